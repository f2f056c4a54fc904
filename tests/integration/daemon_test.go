package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.ox("", "ox-state", "save", "-a", "ops", "k", "v")
	other := shortTempDir(t)
	r := run(t, nil, "", "oxiosd", "--config", "", "--no-mount", "--socket", d.sock, "--data", filepath.Join(other, "data"))
	if r.code != 1 || !strings.Contains(r.stderr, "already serving on "+d.sock) {
		t.Fatalf("second oxiosd: exit %d stderr %q", r.code, r.stderr)
	}
	// The first one is untouched and still serves.
	if r := d.ox("", "ox-state", "load", "-a", "ops", "k"); r.code != 0 || r.stdout != "v" {
		t.Fatalf("first daemon after the second was refused: %+v", r)
	}
	fi, err := os.Stat(d.sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", fi.Mode(), err)
	}
	fi, err = os.Stat(d.data)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v (%v), want 0700", fi.Mode(), err)
	}
	d.stop()
	if _, err := os.Stat(d.sock); !os.IsNotExist(err) {
		t.Fatalf("socket file left after a clean stop: %v", err)
	}
}

func TestStaleSocketRemoved(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "oxiosd.sock")
	// A socket file nobody listens on, as a crashed daemon leaves it.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal("stale socket not left behind:", err)
	}
	d := startDaemon(t, daemonOpts{dir: dir})
	if r := d.ox("", "ox-state", "save", "-a", "ops", "k", "v"); r.code != 0 {
		t.Fatalf("daemon on a stale socket: %+v", r)
	}
	d.stop()
}

// TestSocketActivation passes a listening socket the way systemd does:
// fd 3, LISTEN_FDS=1, LISTEN_PID set to the daemon's own pid.
func TestSocketActivation(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "activated.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	notify := notifyListener(t, dir)
	// The shell learns its pid ($$) and exec keeps it for oxiosd.
	script := fmt.Sprintf(`LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=oxiosd.socket exec %s --config "" --no-mount --data %s --socket %s`,
		bin("oxiosd"), filepath.Join(dir, "data"), filepath.Join(dir, "unused.sock"))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.ExtraFiles = []*os.File{f}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify.LocalAddr().String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	d := &daemon{t: t, sock: sock, notify: notify, stderr: &stderr, exited: make(chan struct{}), cmd: cmd}
	go func() { d.err = <-exited; close(d.exited) }()
	t.Cleanup(func() { cmd.Process.Kill() })
	d.waitNotify("READY=1", 30*time.Second)
	if r := d.ox("", "ox-state", "save", "-a", "ops", "k", "via systemd"); r.code != 0 {
		t.Fatalf("save over the activated socket: %+v\n%s", r, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "unused.sock")); !os.IsNotExist(err) {
		t.Fatalf("daemon made its own socket despite activation: %v", err)
	}
	if !strings.Contains(stderr.String(), "activated=true") {
		t.Fatalf("log does not say the socket was activated:\n%s", stderr.String())
	}
	d.stop()
	// systemd owns the socket file: the daemon leaves it.
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("activated socket file removed by the daemon: %v", err)
	}
}

// TestIdentity checks SO_PEERCRED: a uid that is neither root nor the
// daemon's is refused unless the config grants it, and then only its
// agents.
func TestIdentity(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another uid")
	}
	const nobody = 65534
	cfg := fmt.Sprintf("socket_group = \"%d\"\n", nobody)
	d := startDaemon(t, daemonOpts{config: cfg})
	os.Chmod(d.dir, 0o755)
	fi, _ := os.Stat(d.sock)
	if fi.Mode().Perm() != 0o660 || fi.Sys().(*syscall.Stat_t).Gid != nobody {
		t.Fatalf("socket_group: mode %v gid %d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid)
	}
	asNobody := func(d *daemon, args ...string) result {
		cmd := exec.Command(bin("ox-state"), args...)
		cmd.Env = []string{"OXIOS_SOCKET=" + d.sock, "PATH=/usr/bin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{out.String(), errb.String(), code}
	}
	r := asNobody(d, "ls", "-a", "ops")
	if r.code != 77 || !strings.Contains(r.stderr, "not granted") {
		t.Fatalf("ungranted uid: exit %d %q, want 77", r.code, r.stderr)
	}
	d.stop()

	cfg += fmt.Sprintf("[access.users]\n\"%d\" = [\"web-*\"]\n", nobody)
	d = startDaemon(t, daemonOpts{config: cfg, dir: d.dir})
	if r := asNobody(d, "save", "-a", "web-1", "k", "v"); r.code != 0 {
		t.Fatalf("granted agent: exit %d %q", r.code, r.stderr)
	}
	if r := asNobody(d, "save", "-a", "ops", "k", "v"); r.code != 77 || !strings.Contains(r.stderr, "EPERM") {
		t.Fatalf("agent outside the grant: exit %d %q, want 77", r.code, r.stderr)
	}
	// The admin (our uid) sees the granted user's work.
	if r := d.ox("", "ox-state", "load", "-a", "web-1", "k"); r.stdout != "v" {
		t.Fatalf("admin load: %+v", r)
	}
}

// TestTTYOutput: a table on a terminal, JSON lines in a pipe (and with
// --json on a terminal).
func TestTTYOutput(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.ox("", "ox-state", "save", "-a", "ops", "notes/today.md", "hello")
	onTTY := func(args ...string) string {
		master, slave := openPTY(t)
		defer master.Close()
		cmd := exec.Command(bin("ox-state"), args...)
		cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
		cmd.Stdout, cmd.Stderr = slave, slave
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		slave.Close()
		var out strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			out.Write(buf[:n])
			if err != nil { // EIO once the child closed the terminal
				break
			}
		}
		cmd.Wait()
		return strings.ReplaceAll(out.String(), "\r\n", "\n")
	}
	table := onTTY("ls", "-a", "ops")
	if !strings.HasPrefix(table, "KEY") || !strings.Contains(table, "notes/today.md") || strings.Contains(table, "{") {
		t.Fatalf("on a terminal ls printed %q, want a table", table)
	}
	if js := onTTY("ls", "--json", "-a", "ops"); !strings.HasPrefix(js, `{"type":"state"`) {
		t.Fatalf("--json on a terminal printed %q", js)
	}
	if piped := d.ox("", "ox-state", "ls", "-a", "ops").stdout; !strings.HasPrefix(piped, `{"type":"state"`) {
		t.Fatalf("in a pipe ls printed %q", piped)
	}
}

func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pty:", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestShutdownFinishesInflight: SIGTERM while saves are in flight; every
// save that was acknowledged is there after restart, and the daemon exits 0.
func TestShutdownFinishesInflight(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	acked := make(chan int, 10000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if _, err := c.StateSave(context.Background(), "ops", fmt.Sprintf("k%d", i), []byte("v")); err != nil {
				return
			}
			acked <- i
		}
	}()
	time.Sleep(200 * time.Millisecond)
	d.stop()
	<-done
	close(acked)
	d = startDaemon(t, daemonOpts{dir: d.dir})
	c = d.client(t)
	n := 0
	for i := range acked {
		if _, _, err := c.StateLoad(context.Background(), "ops", fmt.Sprintf("k%d", i)); err != nil {
			t.Fatalf("acknowledged save k%d lost across SIGTERM: %v", i, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no save was acknowledged before SIGTERM")
	}
}
