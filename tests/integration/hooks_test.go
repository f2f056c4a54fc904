package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyHooks: a policy's hook answers through a real oxiosd. An
// exec hook that refuses rm (77, with its reason) and allows the rest
// (0) decides ox-exec, run sandboxed with the record of the call on its
// stdin; its verdicts are audited; ox-policy check asks it as the call
// does, and ox-policy test replays a past exec against a policy whose
// hook refuses everything.
func TestPolicyHooks(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	// The hooks run as a uid of the pool: their folder is everyone's to
	// read.
	dir, err := os.MkdirTemp("", "oxios-hooks-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	hook := func(name, script string) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return f
	}
	norm := hook("no-rm", `rec=$(cat); case "$rec" in *'"argv":["rm"'*) echo "no rm on $(echo "$rec" | grep -o '"agent":"[a-z]*"')"; exit 77;; esac; exit 0`)
	never := hook("never", `cat >/dev/null; echo "nothing today"; exit 77`)
	policy := func(h string) string {
		return writePolicy(t, "[exec]\nallow = [\"echo\", \"rm\"]\n[sandbox]\nread_only = [\""+dir+"\"]\n[hooks]\nexec = [\""+h+"\"]\n")
	}
	if r := d.ox("", "ox-policy", "set", "-a", "ops", policy(norm)); r.code != 0 {
		t.Fatalf("set: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-exec", "-a", "ops", "--", "echo", "hi"); r.code != 0 || strings.TrimSpace(r.stdout) != "hi" {
		t.Errorf("echo, which the hook allows: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r := d.ox("", "ox-exec", "-a", "ops", "--", "rm", "-f", "x")
	if r.code != 77 || !strings.Contains(r.stderr, `no rm on "agent":"ops"`) || !strings.Contains(r.stderr, "hooks.exec") {
		t.Errorf("rm, which the hook refuses: %d %s", r.code, r.stderr)
	}
	if c := d.ox("", "ox-policy", "check", "-a", "ops", "--json", "--", "exec", "rm", "-f", "x"); c.code != 77 || !strings.Contains(c.stdout, `"rule":"hooks.exec"`) {
		t.Errorf("check rm: %d %s %s", c.code, c.stdout, c.stderr)
	}
	if c := d.ox("", "ox-policy", "check", "-a", "ops", "exec", "echo", "hi"); c.code != 0 {
		t.Errorf("check echo: %d %s %s", c.code, c.stdout, c.stderr)
	}
	au := d.ox("", "ox-audit", "log", "--json").stdout
	if !strings.Contains(au, `"op":"policy.hook"`) || !strings.Contains(au, "[hooks.exec]") || !strings.Contains(au, `"result":"EPERM"`) {
		t.Errorf("the hook's verdicts are not on the audit log:\n%s", au)
	}
	// The past echo, replayed against a hook that refuses everything.
	log := d.ox("", "ox-audit", "export").stdout
	tr := d.ox(log, "ox-policy", "test", "-a", "ops", "--json", policy(never))
	if tr.code != 1 || !strings.Contains(tr.stdout, `"change":"refuse"`) || !strings.Contains(tr.stdout, `"rule":"hooks.exec"`) {
		t.Errorf("test: %d %s %s", tr.code, tr.stdout, tr.stderr)
	}
}
