package sandbox

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServe starts a sandbox whose workspace is a tmpfs of its own and
// whose shim serves execs, and asks it for execs: they see what the
// command wrote, are bounded by the workspace's size, can be killed, and
// end with the sandbox; oxiosd's side reaches the workspace through the
// shim's root.
func TestServe(t *testing.T) {
	rootless := os.Geteuid() != 0
	if rootless && !Probe().Rootless {
		t.Skip("sandboxes need root or unprivileged user namespaces")
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := PrepareRoot(root); err != nil {
		t.Fatal(err)
	}
	uid := uint32(FirstUID + 4243)
	spec := &Spec{Root: root, UID: uid, GID: uid, UserNS: rootless, Serve: true, Dir: WorkDir,
		Argv: []string{"/bin/sh", "-c", "echo hi > /work/f && read x"}, Env: []string{"PATH=/usr/bin:/bin"},
		Binds: []Bind{{Path: WorkDir, RW: true, Tmpfs: 1 << 20}}}
	path, argv, env, attr, err := Cmd(spec)
	if err != nil {
		t.Fatal(err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer statusR.Close()
	shim, execs, err := ServePair()
	if err != nil {
		t.Fatal(err)
	}
	defer execs.Close()
	stdin, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, SysProcAttr: attr, Stdin: stdin, Stdout: &out, Stderr: &out, ExtraFiles: []*os.File{statusW, shim}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	statusW.Close()
	shim.Close()
	stdin.Close()
	defer cmd.Process.Kill()
	if ok, report := WaitStarted(statusR); !ok {
		t.Fatalf("the sandbox did not start: %s %s", report, out.String())
	}
	// The command's file, once it is there.
	var got []byte
	for i := 0; i < 100 && len(got) == 0; i++ {
		got, _ = os.ReadFile(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "root", "work", "f"))
		time.Sleep(10 * time.Millisecond)
	}
	if string(got) != "hi\n" {
		t.Fatalf("the workspace through the shim's root: %q", got)
	}
	do := func(argv ...string) (string, ExecReply, bool) {
		t.Helper()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		devnull, _ := os.Open(os.DevNull)
		defer devnull.Close()
		id, replies, err := execs.Start(argv, []string{"PATH=/usr/bin:/bin"}, "", [3]*os.File{devnull, w, w})
		w.Close()
		if err != nil {
			r.Close()
			t.Fatalf("exec %q: %v", argv, err)
		}
		if argv[0] == "/bin/sleep" {
			if rep := <-replies; rep.Pid == 0 {
				t.Fatalf("sleep did not start: %+v", rep)
			}
			execs.Kill(id)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		var last ExecReply
		ok := false
		for rep := range replies {
			last, ok = rep, true
			if rep.Done || rep.Err != "" {
				break
			}
		}
		return string(b), last, ok
	}
	if o, rep, _ := do("/bin/cat", "/work/f"); o != "hi\n" || !rep.Done || rep.Code != 0 {
		t.Errorf("cat /work/f in the sandbox: %q %+v", o, rep)
	}
	if o, _, _ := do("/bin/sh", "-c", "id -u; grep -E '^(CapEff|Seccomp):' /proc/self/status"); !strings.Contains(o, "CapEff:\t0000000000000000") || !strings.Contains(o, "Seccomp:\t2") {
		t.Errorf("an exec's walls: %q", o)
	}
	if o, rep, _ := do("/bin/sh", "-c", "head -c 2000000 /dev/zero > /work/big"); rep.Code == 0 || !strings.Contains(o, "No space left") {
		t.Errorf("an exec filling the 1 MiB workspace: %q %+v", o, rep)
	}
	// Each kill is sent by the shim's serving goroutine, which parks
	// between requests and may resume on another thread: a kill from a
	// thread of another Landlock domain than the exec's fork failed with
	// EPERM (see server.loop). A dozen make that near certain to show.
	for i := 0; i < 12; i++ {
		if _, rep, _ := do("/bin/sleep", "60"); rep.Signal != 9 {
			t.Fatalf("killed exec %d: %+v", i, rep)
		}
	}
	if _, rep, _ := do("/nonexistent"); rep.Err == "" {
		t.Errorf("an exec of a missing program: %+v", rep)
	}
	// The command ends, and the sandbox with it: no more execs.
	stdinW.Close()
	cmd.Wait()
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	if _, replies, err := execs.Start([]string{"/bin/true"}, nil, "", [3]*os.File{devnull, devnull, devnull}); err == nil {
		if rep, ok := <-replies; ok {
			t.Errorf("an exec after the sandbox ended: %+v", rep)
		}
	}
}

// TestExecsUpper: where oxiosd reads a rootless overlay's upper layer
// from, as the shim tells it on the socket at ServeFD (sendUpper): the
// folder it sent; the spec's folder when it sent none because the
// overlay refused the tmpfs; nothing when the shim ended without a word.
func TestExecsUpper(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "upper"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "upper", "f"), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		fd     bool
		onData bool
		want   string // "dir": through the folder sent
	}{{"sent", true, false, "dir"}, {"on DATA", false, true, "spec"}, {"no word", false, false, ""}} {
		t.Run(c.name, func(t *testing.T) {
			shim, execs, err := ServePair()
			if err != nil {
				t.Fatal(err)
			}
			defer execs.Close()
			upperFD, upperOnData = -1, c.onData
			if c.fd {
				f, err := os.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				upperFD = int(f.Fd())
			}
			defer func() { upperFD, upperOnData = -1, false }()
			if err := sendUpper(int(shim.Fd())); err != nil {
				t.Fatal(err)
			}
			shim.Close()
			got := execs.Upper(5*time.Second, "spec")
			switch c.want {
			case "dir":
				if b, err := os.ReadFile(filepath.Join(got, "f")); err != nil || string(b) != "changed" {
					t.Errorf("Upper = %q: f %q %v", got, b, err)
				}
			default:
				if got != c.want {
					t.Errorf("Upper = %q, want %q", got, c.want)
				}
			}
		})
	}
}
