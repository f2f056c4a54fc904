package config

import (
	"os"
	"path/filepath"
	"testing"
)

func load(t *testing.T, text string) (Config, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "oxios.toml")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(f, true)
}

// TestMaxBuffered: left out, limits.max_buffered is 64 MiB or one line of
// the largest size, so a value of max_value can always arrive (with
// max_value = 300MiB it was 64 MiB, and every save of a large value
// waited line_timeout for memory it could never get); set, it stands.
func TestMaxBuffered(t *testing.T) {
	c, err := Load("", false)
	if err != nil || c.Limits.MaxBuffered != DefaultMaxBuffered || c.Limits.MaxBuffered < c.Limits.MaxLine {
		t.Fatalf("defaults: max_buffered %d, max_line %d, %v", c.Limits.MaxBuffered, c.Limits.MaxLine, err)
	}
	c, err = load(t, "[limits]\nmax_value = \"300MiB\"\n")
	if err != nil || c.Limits.MaxBuffered != c.Limits.MaxLine || c.Limits.MaxLine < 400<<20 {
		t.Fatalf("max_value 300MiB: max_buffered %d, max_line %d, %v", c.Limits.MaxBuffered, c.Limits.MaxLine, err)
	}
	c, err = load(t, "[limits]\nmax_buffered = \"128MiB\"\n")
	if err != nil || c.Limits.MaxBuffered != 128<<20 {
		t.Fatalf("max_buffered 128MiB: %d, %v", c.Limits.MaxBuffered, err)
	}
	// Set below max_line, it stands (an operator's cap on line memory:
	// the longest lines then get ENOBUFS, as oxios.toml(5) says).
	c, err = load(t, "[limits]\nmax_value = \"300MiB\"\nmax_buffered = \"64MiB\"\n")
	if err != nil || c.Limits.MaxBuffered != 64<<20 {
		t.Fatalf("max_buffered below max_line: %d, %v", c.Limits.MaxBuffered, err)
	}
	// The shipped config file loads as the defaults do.
	if c, err := Load("../../share/oxios.toml", true); err != nil || c.Limits.MaxBuffered != DefaultMaxBuffered {
		t.Fatalf("share/oxios.toml: max_buffered %d, %v", c.Limits.MaxBuffered, err)
	}
}

func TestMountAt(t *testing.T) {
	c := Config{Mount: "/run/oxios/mnt"}
	if c.MountAt() != "/run/oxios/mnt" {
		t.Fatal(c.MountAt())
	}
	c.NoMount = true
	if c.MountAt() != "" {
		t.Fatal(c.MountAt())
	}
}

func TestNamedModels(t *testing.T) {
	f := filepath.Join(t.TempDir(), "oxios.toml")
	os.WriteFile(f, []byte("[llm]\nbase_url = \"http://a/v1\"\nmodel = \"m\"\nprompt_price = 1.0\n[models.fast]\nmodel = \"m-mini\"\ncompletion_price = 2.0\n[models.far]\nbase_url = \"https://b/v1\"\nkey_env = \"FAR_KEY\"\n"), 0o600)
	c, err := Load(f, true)
	if err != nil {
		t.Fatal(err)
	}
	l, model, m := c.LLM.Resolve("fast")
	if m == nil || model != "m-mini" || l.BaseURL != "http://a/v1" || l.PromptPrice != 0 || l.CompletionPrice != 2 {
		t.Errorf("fast: %q %+v", model, l)
	}
	l, model, _ = c.LLM.Resolve("far")
	if model != "far" || l.BaseURL != "https://b/v1" || l.KeyEnv != "FAR_KEY" {
		t.Errorf("far: %q %+v", model, l)
	}
	if l, model, m := c.LLM.Resolve("gpt-x"); m != nil || model != "gpt-x" || l.BaseURL != "http://a/v1" {
		t.Errorf("a name without an entry: %q %+v", model, l)
	}
	for _, bad := range []string{"[models.x]\nbase_url = \"http://u:p@h/v1\"\n", "[models.x]\ntemperature = 3.0\n", "[models.x]\nprompt_price = -1.0\n"} {
		os.WriteFile(f, []byte("[llm]\nbase_url = \"http://a/v1\"\n"+bad), 0o600)
		if _, err := Load(f, true); err == nil {
			t.Errorf("loaded %q", bad)
		}
	}
}
