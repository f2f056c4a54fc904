package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runsOrWrites are programs that, given the right arguments, run another
// program or write a file their arguments name (from their man pages): a
// shipped allowlist holds none of them (issue 17).
var runsOrWrites = []string{
	"env", "sort", "uniq", "date", "tee", "sed", "awk", "gawk", "find", "xargs", "sh", "bash", "dash", "python3", "perl",
	"cp", "mv", "dd", "tar", "rsync", "vi", "vim", "less", "more", "man", "git", "nice", "timeout", "nohup", "stdbuf",
	"ionice", "chroot", "su", "sudo", "watch", "split", "csplit", "install", "ln", "touch", "mkdir", "rm", "truncate",
	"shred", "patch", "curl", "wget", "busybox", "flock", "setsid", "script", "strace", "gdb", "make", "ssh", "nc",
}

func TestShippedAllowlistsAreSafe(t *testing.T) {
	files, _ := filepath.Glob("../../share/policies/*.toml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, prog := range runsOrWrites {
			if p.allowed(prog) {
				t.Errorf("%s: exec.allow lists %s, which can run a program or write a file", filepath.Base(f), prog)
			}
		}
	}
	if Default().Sandbox.Isolation != IsolationFull || Default().Sandbox.Network {
		t.Errorf("default policy: sandbox %+v, want full isolation without network", Default().Sandbox)
	}
}

// TestSortAbbreviations: getopt takes any unambiguous prefix of a long
// option, so every spelling of --compress-program is refused.
func TestSortAbbreviations(t *testing.T) {
	p, err := Parse([]byte("[exec]\nallow = [\"sort\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"--compress-program=sh", "--compress=sh", "--compr=sh", "--co=sh", "--compress-prog"} {
		if _, err := p.CheckExec([]string{"sort", a}, ""); err == nil {
			t.Errorf("sort %s allowed", a)
		}
	}
	if _, err := p.CheckExec([]string{"sort", "--check"}, ""); err != nil {
		t.Errorf("sort --check refused: %v", err)
	}
}

func TestSandboxSection(t *testing.T) {
	for _, bad := range []string{
		"[sandbox]\nisolation = \"some\"\n",
		"[sandbox]\nread_only = [\"relative\"]\n",
		"[sandbox]\nread_write = [\"/\"]\n",
		"[sandbox]\nread_write = [\"/a/../b\"]\n",
	} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "sandbox.") {
			t.Errorf("%q: err %v, want one naming sandbox.", bad, err)
		}
	}
	p, err := Parse([]byte("[sandbox]\nisolation = \"available\"\nnetwork = true\nread_only = [\"/srv/data\"]\n"))
	if err != nil || p.Sandbox.Isolation != IsolationAvailable || !p.Sandbox.Network || p.Sandbox.ReadOnly[0] != "/srv/data" {
		t.Fatalf("%+v %v", p, err)
	}
}
