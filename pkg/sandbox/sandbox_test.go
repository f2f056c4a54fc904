package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	return runWith(t, ws, script, nil, binds...)
}

// runWith is run with the spec changed by with (nil: as it is).
func runWith(t *testing.T, ws string, script string, with func(*Spec), binds ...Bind) (string, Status) {
	t.Helper()
	rootless := os.Geteuid() != 0
	if rootless && !Probe().Rootless {
		t.Skip("sandboxes need root or unprivileged user namespaces")
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	uid := uint32(FirstUID + 4242)
	if !rootless {
		if err := Chown(ws, uid); err != nil {
			t.Fatal(err)
		}
	}
	spec := &Spec{Root: root, UID: uid, GID: uid, UserNS: rootless, Argv: []string{"/bin/sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: ws,
		Binds: append([]Bind{{Path: ws, RW: true}}, binds...)}
	if with != nil {
		with(spec)
	}
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

// TestRootless runs this package's sandbox tests again as an ordinary
// user (nobody), whose sandboxes are made in user namespaces: the same
// walls from inside.
func TestRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run as root: it runs the tests again as nobody")
	}
	if os.Getenv("OXIOS_SANDBOX_ROOTLESS_CHILD") != "" {
		return
	}
	// The test binary where nobody can run it.
	dir, err := os.MkdirTemp("", "oxios-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	// Its folder is bound into the sandboxes (the shim's folder): the
	// tests' files are kept out of it.
	exe := filepath.Join(dir, "bin", "sandbox.test")
	if err := os.Mkdir(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	cmd := exec.Command(exe, "-test.run=^(TestConfined|TestStatusSignal|TestServe|TestOverlay)$", "-test.v", "-test.count=1")
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd.Dir = tmp
	cmd.Env = []string{"OXIOS_SANDBOX_ROOTLESS_CHILD=1", "PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	t.Logf("as nobody:\n%s", out)
	if err != nil {
		t.Fatalf("the sandbox tests as nobody: %v", err)
	}
	if strings.Contains(string(out), "SKIP") {
		// The kernel refuses an ordinary user namespaces (a sysctl,
		// AppArmor): what a rootless oxiosd reports, not a failure.
		t.Skipf("as nobody, the sandboxes were skipped (%s)", UserNSHint())
	}
	for _, name := range []string{"TestConfined", "TestOverlay"} {
		if !strings.Contains(string(out), "--- PASS: "+name) {
			t.Fatalf("%s did not pass as nobody", name)
		}
	}
}
