package policy

import (
	"strings"
	"testing"
	"time"
)

func TestHooksParse(t *testing.T) {
	p, err := Parse([]byte("[hooks]\nexec = [\"/usr/local/bin/judge\", \"--strict\"]\ntimeout = \"2s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Hooks.For(HookExec); len(got) != 2 || got[0] != "/usr/local/bin/judge" {
		t.Errorf("hooks.exec: %q", got)
	}
	if p.Hooks.For(HookState) != nil || p.Hooks.TimeoutOr() != 2*time.Second {
		t.Errorf("hooks: %+v", p.Hooks)
	}
	if p, _ := Parse(nil); p.Hooks.TimeoutOr() != DefaultHookTimeout {
		t.Error("no timeout given is not the default")
	}
	for _, bad := range []string{
		"[hooks]\nexec = [\"judge\"]\n",
		"[hooks]\nstate = []\n",
		"[hooks]\nnet = [\"/a/../b\"]\n",
		"[hooks]\ntimeout = \"-1s\"\n",
		"[hooks]\nfs = [\"/bin/true\"]\n",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}

func TestHookReason(t *testing.T) {
	for in, want := range map[string]string{
		"no\nmore":            "no",
		"  spaced  ":          "spaced",
		"bell\a\x1b[31m\xff!": "bell??[31m?!",
		"":                    "",
	} {
		if got := HookReason([]byte(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if got := HookReason([]byte(strings.Repeat("é", 500))); len(got) > HookReasonMax || !strings.HasPrefix(got, "éé") {
		t.Errorf("a long reason: %d bytes", len(got))
	}
}
