package policy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestMatchKey(t *testing.T) {
	for _, c := range []struct {
		pat, key string
		want     bool
	}{
		{"**", "a", true}, {"**", "a/b/c", true},
		{"notes/**", "notes/a", true}, {"notes/**", "notes/a/b", true}, {"notes/**", "notes", true}, {"notes/**", "notesx/a", false},
		{"*.md", "a.md", true}, {"*.md", "d/a.md", false}, {"**/*.md", "d/e/a.md", true}, {"**/*.md", "a.md", true},
		{"a/*/c", "a/b/c", true}, {"a/*/c", "a/b/x/c", false}, {"a/**/c", "a/b/x/c", true}, {"a/**/c", "a/c", true},
		{"a", "a/b", false}, {"a/b", "a", false}, {"secret", "secret", true}, {"sec?et", "secret", true},
	} {
		if got := MatchKey(c.pat, c.key); got != c.want {
			t.Errorf("MatchKey(%q, %q) = %v", c.pat, c.key, got)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", "../x", "a/**b", "[", "./a"} {
		if CheckPattern(bad) == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}

func TestStateAndMemoryRules(t *testing.T) {
	p, err := Parse([]byte("[state]\nread = [\"**\"]\nwrite = [\"notes/**\"]\nquota = \"1KiB\"\n[memory]\nkinds = [\"episodic\"]\nquota = 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	var d *Denied
	if err := p.CheckStateWrite("notes/a", 100); err != nil {
		t.Error(err)
	}
	if err := p.CheckStateWrite("etc/a", 100); !errors.As(err, &d) || d.Rule != "state.write" {
		t.Errorf("write outside: %v", err)
	}
	if err := p.CheckStateWrite("notes/a", 2000); !errors.As(err, &d) || d.Rule != "state.quota" {
		t.Errorf("over quota: %v", err)
	}
	if err := p.CheckStateRead("etc/a"); err != nil {
		t.Error(err)
	}
	if err := p.CheckMemory("semantic", 1); !errors.As(err, &d) || d.Rule != "memory.kinds" {
		t.Errorf("kind: %v", err)
	}
	if err := p.CheckMemory("episodic", 3); !errors.As(err, &d) || d.Rule != "memory.quota" {
		t.Errorf("memory quota: %v", err)
	}
	if err := p.CheckMemories([]string{"episodic", "semantic"}, 1); !errors.As(err, &d) || d.Rule != "memory.kinds" {
		t.Errorf("a batch with a kind not given: %v", err)
	}
	if err := p.CheckMemories([]string{"episodic", "episodic"}, 3); !errors.As(err, &d) || d.Rule != "memory.quota" {
		t.Errorf("a batch over the quota: %v", err)
	}
	if err := p.CheckMemories([]string{"episodic"}, 1); err != nil {
		t.Errorf("a batch allowed: %v", err)
	}
	if err := p.CheckRecall("semantic"); !errors.As(err, &d) || d.Rule != "memory.kinds" {
		t.Errorf("recall of a kind not given: %v", err)
	}
	if p.CheckRecall("episodic") != nil || p.CheckRecall("") != nil {
		t.Error("recall of a kind given, or of any given, refused")
	}
	// Left out: nothing granted.
	empty, _ := Parse(nil)
	if err := empty.CheckRecall(""); !errors.As(err, &d) || d.Rule != "memory.kinds" {
		t.Errorf("recall of any kind with none given: %v", err)
	}
	if empty.CheckStateRead("a") == nil || empty.CheckStateWrite("a", 1) == nil || empty.CheckMemory("working", 1) == nil ||
		empty.CheckTool("jsonq") == nil || empty.CheckHost("example.org") == nil {
		t.Error("an empty policy grants something")
	}
	if empty.Signals.OnViolation != ViolationDeny {
		t.Errorf("on_violation default %q", empty.Signals.OnViolation)
	}
}

func TestNetRules(t *testing.T) {
	p, err := Parse([]byte("[net]\nallow = [\"example.org\", \"*.corp.example\", \"10.1.2.3\", \"192.168.7.0/24\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr
	ok := []struct {
		host string
		a    string
	}{{"example.org", "93.184.215.14"}, {"api.corp.example", "93.184.215.15"}, {"db", "10.1.2.3"}, {"x", "192.168.7.9"}}
	for _, c := range ok {
		if strings.Contains(c.host, ".") && p.CheckHost(c.host) != nil {
			t.Errorf("host %s refused", c.host)
		}
		if err := p.CheckAddr(c.host, addr(c.a)); err != nil {
			t.Errorf("%s at %s: %v", c.host, c.a, err)
		}
	}
	var d *Denied
	for _, c := range []struct{ host, a string }{
		{"example.org", "127.0.0.1"}, {"example.org", "169.254.169.254"}, {"example.org", "10.0.0.1"},
		{"example.org", "::1"}, {"example.org", "::ffff:127.0.0.1"}, {"example.org", "fd00::1"}, {"example.org", "0.0.0.0"},
	} {
		if err := p.CheckAddr(c.host, addr(c.a)); !errors.As(err, &d) || d.Rule != "net.private" {
			t.Errorf("%s at %s: %v", c.host, c.a, err)
		}
	}
	for _, h := range []string{"evil.org", "corp.example.evil", "example.org.evil", "127.0.0.1", "169.254.169.254", "[::1]"} {
		if p.CheckHost(h) == nil {
			t.Errorf("host %s allowed", h)
		}
	}
	if p.CheckHost("10.1.2.3") != nil || p.CheckHost("EXAMPLE.ORG.") != nil {
		t.Error("listed address or name refused")
	}
	if _, err := Parse([]byte("[net]\nallow = [\"http://x\"]\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad host accepted: %v", err)
	}
	if _, err := Parse([]byte("[signals]\non_violation = \"explode\"\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad on_violation: %v", err)
	}
}

func TestCheckWork(t *testing.T) {
	p, err := Parse([]byte("[work]\nallow = [\"/home/alice/src/**\", \"/srv/*/repo\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for dir, ok := range map[string]bool{
		"/home/alice/src": true, "/home/alice/src/oxios": true, "/home/alice/src/a/b": true,
		"/home/alice": false, "/home/alice/srcx": false, "/srv/x/repo": true, "/srv/x/y/repo": false, "/": false,
	} {
		if got := p.CheckWork(dir) == nil; got != ok {
			t.Errorf("CheckWork(%s) = %v, want %v", dir, got, ok)
		}
	}
	if err := (&Policy{}).CheckWork("/tmp"); err == nil || AsDenied(err).Rule != "work.allow" {
		t.Errorf("no [work]: %v", err)
	}
	for _, bad := range []string{"relative/**", "/a/../b", "/", "/a/b**"} {
		if _, err := Parse([]byte("[work]\nallow = [\"" + bad + "\"]\n")); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestCheckModel: llm.models names the models an agent may ask for, by
// name or glob ("*" across "/" too); left out, any; empty, none.
func TestCheckModel(t *testing.T) {
	p, err := Parse([]byte("[llm]\nmodels = [\"gpt-4o-mini\", \"meta-llama/*\", \"small-?\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{
		"gpt-4o-mini": true, "gpt-4o": false, "meta-llama/Llama-3-8B": true, "meta-llama": false,
		"small-1": true, "small-12": false, "": false,
	} {
		if got := p.CheckModel(name) == nil; got != ok {
			t.Errorf("CheckModel(%q) = %v, want %v", name, got, ok)
		}
	}
	if d := AsDenied(p.CheckModel("gpt-4o")); d == nil || d.Rule != "llm.models" || !strings.Contains(d.Reason, `"gpt-4o"`) || !strings.Contains(d.Reason, "gpt-4o-mini, meta-llama/*") {
		t.Errorf("the refusal: %v", d)
	}
	if err := Default().CheckModel("anything"); err != nil {
		t.Errorf("no [llm] models: %v", err)
	}
	none, err := Parse([]byte("[llm]\nmodels = []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := AsDenied(none.CheckModel("gpt-4o-mini")); d == nil || !strings.Contains(d.Reason, "lists none") {
		t.Errorf("models = []: %v", d)
	}
	for _, bad := range []string{"", " x", "a[", "two words"} {
		if _, err := Parse([]byte("[llm]\nmodels = [\"" + bad + "\"]\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
