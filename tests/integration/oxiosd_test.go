package integration

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startIn starts oxiosd in dir with args and stderr, waits until it says
// it is ready (its socket answers before it handles signals) and sock
// (relative to dir) answers, and stops it at the test's end.
func startIn(t *testing.T, dir string, stderr *os.File, env []string, sock string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin("oxiosd"), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(stderr.Name()); !strings.Contains(string(b), `msg="oxiosd ready"`) {
			continue
		}
		if c, err := net.Dial("unix", filepath.Join(dir, sock)); err == nil {
			c.Close()
			return
		}
	}
	b, _ := os.ReadFile(stderr.Name())
	t.Fatalf("oxiosd did not answer on %s within 30 s:\n%s", sock, b)
}

// TestDaemonRelativePaths: `oxiosd --socket s.sock --data data` serves,
// and its runs reach it (they are handed the socket made absolute), and
// under journald its lines carry no second timestamp (issue 47).
func TestDaemonRelativePaths(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	logf, err := os.Create(filepath.Join(dir, "oxiosd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// JOURNAL_STREAM names the file stderr is, as systemd sets it.
	var st syscall.Stat_t
	if err := syscall.Fstat(int(logf.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	journal := fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino)
	startIn(t, dir, logf, []string{journal}, "s.sock", "--config", "", "--data", "data", "--socket", "s.sock", "--no-mount")

	sock := filepath.Join(dir, "s.sock")
	r := run(t, []string{"OXIOS_SOCKET=" + sock}, "", "ox-spawn", "-a", "ops", "-n", "--", "ox-state", "save", "k", "from the run")
	if r.code != 0 {
		t.Fatalf("a run's ox-state under oxiosd --socket s.sock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, []string{"OXIOS_SOCKET=" + sock}, "", "ox-state", "load", "-a", "ops", "k"); r.stdout != "from the run" {
		t.Fatalf("the run's save: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r = run(t, []string{"OXIOS_SOCKET=" + sock}, "", "ox-status", "--config", "", "--json"); !strings.Contains(r.stdout, filepath.Join(dir, "data")) {
		t.Errorf("ox-status does not report the data dir as %s:\n%s", filepath.Join(dir, "data"), r.stdout)
	}
	b, _ := os.ReadFile(logf.Name())
	if !strings.Contains(string(b), "oxiosd ready") || strings.Contains(string(b), "time=") {
		t.Errorf("under journald (%s), the log lines carry a time:\n%s", journal, b)
	}

	// With JOURNAL_STREAM naming another file (stderr sent elsewhere by
	// whoever started it), the time stays.
	dir2 := shortTempDir(t)
	log2, err := os.Create(filepath.Join(dir2, "oxiosd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log2.Close()
	startIn(t, dir2, log2, []string{journal}, "s.sock", "--config", "", "--data", "data", "--socket", "s.sock", "--no-mount")
	if b, _ := os.ReadFile(log2.Name()); !strings.Contains(string(b), "time=") {
		t.Errorf("with stderr not the journal's, the log lines carry no time:\n%s", b)
	}
}

// TestHints: an unknown revision or agent says where to look (issue 47).
func TestHints(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.ox("", "ox-state", "save", "-a", "ops", "k", "v")
	d.ox("", "ox-commit", "-a", "ops", "-m", "one")
	for _, c := range []struct {
		args []string
		hint string
	}{
		{[]string{"ox-commit", "log", "-a", "ops", "nosuchrev"}, "ox-commit log lists the commits"},
		{[]string{"ox-commit", "show", "nosuchrev"}, "ox-commit log lists the commits"},
		{[]string{"ox-state", "load", "-a", "nosuch", "k"}, "ox-agents ls lists them"},
		{[]string{"ox-agents", "show", "nosuch"}, "ox-agents ls lists them"},
	} {
		r := d.ox("", c.args[0], c.args[1:]...)
		if r.code != 1 || !strings.Contains(r.stderr, c.hint) {
			t.Errorf("%s: exit %d, no hint %q:\n%s", strings.Join(c.args, " "), r.code, c.hint, r.stderr)
		}
	}
}

// TestStatusNamesOpenAIBaseURL: an endpoint that came from oxiosd's
// OPENAI_BASE_URL, base_url unset, is what ox-status says to check when
// it fails, not [llm] base_url (issue 47).
func TestStatusNamesOpenAIBaseURL(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	logf, err := os.Create(filepath.Join(dir, "oxiosd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// Port 1 of the loopback: nothing answers.
	startIn(t, dir, logf, []string{"OPENAI_BASE_URL=http://127.0.0.1:1/v1"}, "s.sock", "--config", "", "--data", "data", "--socket", "s.sock", "--no-mount")
	r := run(t, []string{"OXIOS_SOCKET=" + filepath.Join(dir, "s.sock")}, "", "ox-status", "--config", "", "--json", "--timeout", "2s")
	var llm string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, `"check":"llm"`) {
			llm = l
		}
	}
	if !strings.Contains(llm, `"ok":false`) || !strings.Contains(llm, "OPENAI_BASE_URL in oxiosd's environment") || strings.Contains(llm, "base_url in oxios.toml (") {
		t.Fatalf("ox-status's llm check of an OPENAI_BASE_URL endpoint: exit %d\n%s", r.code, r.stdout)
	}
}

// TestDaemonEarlySIGTERM: a SIGTERM sent while oxiosd starts (its socket
// is there, its signal handling not yet) stops it; it was lost, and the
// daemon ran on.
func TestDaemonEarlySIGTERM(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "s.sock")
	cmd := exec.Command(bin("oxiosd"), "--config", "", "--data", filepath.Join(dir, "data"), "--socket", sock, "--no-mount")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no socket within 30 s:\n%s", stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("oxiosd exited with %v after an early SIGTERM:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("oxiosd ran on 30 s after a SIGTERM sent while it started:\n%s", stderr.String())
	}
}
