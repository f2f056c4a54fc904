package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	Main()
	os.Exit(m.Run())
}

// run runs script under sh in a sandbox whose workspace is ws, and
// returns its output and status.
func run(t *testing.T, ws string, script string, binds ...Bind) (string, Status) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandboxes need root")
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	uid := uint32(FirstUID + 4242)
	if err := Chown(ws, uid); err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Root: root, UID: uid, GID: uid, Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws,
		Binds: append([]Bind{{Path: ws, RW: true}}, binds...)}
	path, argv, env, attr, err := Cmd(spec)
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, SysProcAttr: attr, Stdout: &out, Stderr: &out, ExtraFiles: []*os.File{w}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cmd.Wait()
	return out.String(), ReadStatus(r)
}

// TestConfined checks the walls from inside: the uid, the capabilities,
// the paths, other processes, the calls seccomp refuses.
func TestConfined(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s3cret"), 0o644)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o700)
	out, st := run(t, ws, `
id -u
grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
cat `+secret+` 2>/dev/null && echo SECRET-READ
echo x > /etc/oxios-test 2>/dev/null && echo ETC-WRITTEN
echo ok > `+ws+`/f && echo WS-WRITTEN
ls /proc | grep -c '^[0-9]'
unshare -U true 2>/dev/null && echo UNSHARED
head -c1 /etc/shadow 2>/dev/null && echo SHADOW-READ
hostname
exit 3`)
	if !st.Exited || st.Code != 3 {
		t.Fatalf("status %+v, output:\n%s", st, out)
	}
	for _, want := range []string{"1900004242\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "WS-WRITTEN", "oxios\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"SECRET-READ", "ETC-WRITTEN", "UNSHARED", "SHADOW-READ"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
	// Two processes: the init shim and the shell (ls and grep are gone).
	if !strings.Contains(out, "\n2\n") && !strings.Contains(out, "\n3\n") && !strings.Contains(out, "\n4\n") {
		t.Errorf("the pid namespace shows more processes:\n%s", out)
	}
}

func TestStatusSignal(t *testing.T) {
	ws := t.TempDir()
	_, st := run(t, ws, `kill -KILL $$`)
	if st.Signal != 9 {
		t.Fatalf("status %+v, want signal 9", st)
	}
	_, st = run(t, ws, `exec /nonexistent`)
	if !st.Exited || st.Code != 127 {
		t.Fatalf("status %+v, want exit 127", st)
	}
}
