package integration

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestOx runs commands through ox, the front door: ox NAME is ox-NAME,
// with its output and exit status; ox help lists every command with its
// one-line use and a third party's ox-NAME on PATH, which it runs but
// does not run to list; ox help NAME opens the man page.
func TestOx(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	tools := t.TempDir()
	marker := filepath.Join(tools, "ran")
	hello := "#!/bin/sh\necho \"$0\" \"$@\" > " + marker + "\necho hello \"$@\"\n"
	if err := os.WriteFile(filepath.Join(tools, "ox-hello"), []byte(hello), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"OXIOS_SOCKET=" + d.sock, "PATH=" + tools + string(os.PathListSeparator) + os.Getenv("PATH")}

	if r := run(t, env, "", "ox", "state", "save", "-a", "web", "config/port", "8080"); r.code != 0 {
		t.Fatalf("ox state save: exit %d\n%s", r.code, r.stderr)
	}
	for _, line := range [][]string{{"state", "-a", "web", "load", "config/port"}, {"state", "load", "-a", "web", "config/port"}, {"state", "load", "config/port", "-a", "web"}} {
		if r := run(t, env, "", "ox", line...); r.code != 0 || r.stdout != "8080" {
			t.Fatalf("ox %s: exit %d, %q\n%s", strings.Join(line, " "), r.code, r.stdout, r.stderr)
		}
	}
	// The command's status and messages are ox's.
	r := run(t, env, "", "ox", "state", "-a", "web", "load", "nope")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "ox-state: ") {
		t.Fatalf("ox state load nope: exit %d, want 1 from ox-state\n%s", r.code, r.stderr)
	}
	r = run(t, env, "", "ox", "lsx")
	if r.code != 2 || !strings.Contains(r.stderr, "ox: unknown command lsx (ox help lists them)") {
		t.Fatalf("ox lsx: exit %d\n%s", r.code, r.stderr)
	}
	if r = run(t, env, "", "ox", "hello", "a", "b"); r.code != 0 || r.stdout != "hello a b\n" {
		t.Fatalf("ox hello a b (ox-hello on PATH): exit %d, %q\n%s", r.code, r.stdout, r.stderr)
	}
	os.Remove(marker)

	r = run(t, env, "", "ox", "help")
	if r.code != 0 {
		t.Fatalf("ox help: exit %d\n%s", r.code, r.stderr)
	}
	for _, name := range commandBinaries(t) {
		n, ok := strings.CutPrefix(name, "ox-")
		if !ok {
			continue
		}
		// "   state     save, load, list and delete agent state"
		if !regexp.MustCompile(`(?m)^   ` + n + ` +\S`).MatchString(r.stdout) {
			t.Errorf("ox help does not list %s with its use:\n%s", n, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^   hello +` + regexp.QuoteMeta(filepath.Join(tools, "ox-hello")) + `$`).MatchString(r.stdout) {
		t.Errorf("ox help does not list ox-hello of PATH:\n%s", r.stdout)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("ox help ran ox-hello, a program it does not know")
	}

	// ox help state: man ox-state, found on MANPATH here.
	mandir := filepath.Join(t.TempDir(), "man1")
	os.MkdirAll(mandir, 0o755)
	page, err := os.ReadFile("../../man/ox-state.1")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mandir, "ox-state.1"), page, 0o644)
	r = run(t, append(env, "MANPATH="+filepath.Dir(mandir), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=80"), "", "ox", "help", "state")
	if _, err := os.Stat("/usr/bin/man"); err == nil {
		if r.code != 0 || !strings.Contains(r.stdout, "ox-state - save, load") || !strings.Contains(r.stdout, "EXIT STATUS") {
			t.Fatalf("ox help state: exit %d, not the man page\n%s%s", r.code, r.stdout, r.stderr)
		}
	} else if r.code != 0 || !strings.Contains(r.stdout, "ox-state - save, load") {
		t.Fatalf("ox help state without man: exit %d, not --help\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, env, "", "ox", "help", "nosuch"); r.code != 2 || !strings.Contains(r.stderr, "unknown command nosuch") {
		t.Fatalf("ox help nosuch: exit %d\n%s", r.code, r.stderr)
	}
}
