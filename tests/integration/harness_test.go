// Package integration runs the real oxiosd and ox-* binaries against a
// real Unix socket on a temp dir.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/tests/testbin"
)

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oxios-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Other uids run these binaries in the identity tests.
	os.Chmod(dir, 0o755)
	binDir = dir
	// A race-enabled binary sleeps a second at exit by default, to let
	// reports flush; dozens of daemon and command exits add up.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	// Under -race, the race detector goes into the programs whose
	// concurrency the tests drive: oxiosd, the LLM runner and the MCP
	// server, built again over the others. The other commands are thin
	// clients of pkg/client (whose own tests run under -race), started
	// thousands of times here: a race-built one costs about 70 ms more
	// CPU at each start, which on two cores was minutes of make test.
	builds := [][]string{{"../../cmd/..."}}
	raced := []string{"oxiosd", "ox-agent", "ox-mcp"}
	if pre := os.Getenv(testbin.Env); pre != "" {
		// make test builds the commands once for both of its runs of
		// these tests and for tests/docs.
		builds = nil
		var skip []string
		if raceEnabled {
			skip = raced
		}
		if err := testbin.Link(pre, dir, skip); err != nil {
			fmt.Fprintln(os.Stderr, "OXIOS_TEST_BIN:", err)
			os.Exit(1)
		}
	}
	if raceEnabled {
		b := []string{"-race"}
		for _, n := range raced {
			b = append(b, "../../cmd/"+n)
		}
		builds = append(builds, b)
	}
	for _, b := range builds {
		cmd := exec.Command("go", append([]string{"build", "-tags", "urfave_cli_no_docs", "-o", dir + "/"}, b...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building binaries:", err)
			os.Exit(1)
		}
	}
	// The red team's probe of the kernel's entries (tests/rtprobe):
	// static and without the race detector, so that its data stays below
	// 4 GiB, where a 32-bit call can point.
	probe := exec.Command("go", "build", "-o", dir+"/oxios-rtprobe", "../rtprobe")
	probe.Env = append(os.Environ(), "CGO_ENABLED=0")
	probe.Stdout, probe.Stderr = os.Stderr, os.Stderr
	if err := probe.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building oxios-rtprobe:", err)
		os.Exit(1)
	}
	code := m.Run()
	writeCPUReport()
	os.RemoveAll(dir)
	os.Exit(code)
}

func bin(name string) string { return filepath.Join(binDir, name) }

// daemon is a running oxiosd.
type daemon struct {
	t      *testing.T
	dir    string
	data   string
	sock   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	notify *net.UnixConn
	exited chan struct{}
	err    error
}

type daemonOpts struct {
	config string   // contents of oxios.toml, "" for none
	args   []string // extra flags
	dir    string   // reuse a data dir (restart)
	// uid, when not 0, runs oxiosd as that user (rootless), which then
	// owns its folder.
	uid uint32
	// env is added to oxiosd's environment.
	env []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDaemon starts oxiosd on a temp dir and waits for READY=1 on a
// NOTIFY_SOCKET datagram listener: the same handshake systemd uses.
func startDaemon(t *testing.T, o daemonOpts) *daemon {
	t.Helper()
	d := &daemon{t: t, dir: o.dir, stderr: &syncBuffer{}, exited: make(chan struct{})}
	if d.dir == "" {
		d.dir = shortTempDir(t)
	}
	d.data = filepath.Join(d.dir, "data")
	d.sock = filepath.Join(d.dir, "oxiosd.sock")
	args := []string{"--data", d.data, "--socket", d.sock, "--no-mount", "--log-level", "debug"}
	if o.config != "" {
		cf := filepath.Join(d.dir, "oxios.toml")
		if err := os.WriteFile(cf, []byte(o.config), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", cf)
	} else {
		args = append(args, "--config", "")
	}
	args = append(args, o.args...)
	d.notify = notifyListener(t, d.dir)
	d.cmd = exec.Command(bin("oxiosd"), args...)
	d.cmd.Env = append(append(os.Environ(), "NOTIFY_SOCKET="+d.notify.LocalAddr().String()), o.env...)
	if o.uid != 0 {
		for _, p := range []string{d.dir, d.notify.LocalAddr().String()} {
			if err := os.Chown(p, int(o.uid), int(o.uid)); err != nil {
				t.Fatal(err)
			}
		}
		if o.config != "" {
			os.Chown(filepath.Join(d.dir, "oxios.toml"), int(o.uid), int(o.uid))
		}
		d.cmd.Dir = d.dir
		d.cmd.Env = append(d.cmd.Env, "HOME="+d.dir, "XDG_RUNTIME_DIR="+d.dir)
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.uid}}
	}
	d.cmd.Stderr = d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.err = d.cmd.Wait(); countCPU(t, d.cmd.ProcessState); close(d.exited) }()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			d.cmd.Process.Kill()
			<-d.exited
		}
		d.checkAudit()
		if t.Failed() {
			t.Logf("oxiosd stderr:\n%s", d.stderr.String())
		}
	})
	d.waitNotify("READY=1", 30*time.Second)
	return d
}

// checkAudit verifies the audit chain the daemon left, as restic's tests
// end by checking the repository: every test that ran a daemon also
// proves that whatever it did, the log it wrote still links from its
// first entry to its head.
func (d *daemon) checkAudit() {
	d.t.Helper()
	if p := auditProblem(d.data); p != "" {
		d.t.Error(p)
	}
}

// auditProblem says what is wrong with the audit log of a data dir, or "".
func auditProblem(data string) string {
	dir := filepath.Join(data, "audit")
	if _, err := os.Stat(dir); err != nil {
		return "" // the daemon never got that far
	}
	rep, err := audit.Verify(dir)
	switch {
	case err != nil:
		return fmt.Sprintf("verifying the audit log of %s: %v", data, err)
	case !rep.OK:
		return fmt.Sprintf("the audit log of %s does not verify: entry %d: %s", data, rep.FirstBad, rep.Problem)
	}
	return ""
}

// shortTempDir is a temp dir with a path short enough for a socket
// (sun_path is 108 bytes; t.TempDir() paths can be longer).
func shortTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "ox")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func notifyListener(t *testing.T, dir string) *net.UnixConn {
	t.Helper()
	addr := &net.UnixAddr{Name: filepath.Join(dir, fmt.Sprintf("notify-%d", time.Now().UnixNano())), Net: "unixgram"}
	c, err := net.ListenUnixgram("unixgram", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitNotify waits for a datagram containing want.
func (d *daemon) waitNotify(want string, timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 4096)
	for {
		d.notify.SetReadDeadline(deadline)
		n, err := d.notify.Read(buf)
		if err != nil {
			select {
			case <-d.exited:
				d.t.Fatalf("oxiosd exited (%v) before %s; stderr:\n%s", d.err, want, d.stderr.String())
			default:
			}
			d.t.Fatalf("no %s from oxiosd: %v; stderr:\n%s", want, err, d.stderr.String())
		}
		for _, l := range strings.Split(string(buf[:n]), "\n") {
			if l == want {
				return
			}
		}
	}
}

// stop sends SIGTERM and checks a clean exit with STOPPING=1 announced.
func (d *daemon) stop() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.waitNotify("STOPPING=1", 30*time.Second)
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		d.t.Fatal("oxiosd did not exit within 30s of SIGTERM")
	}
	if d.err != nil {
		d.t.Fatalf("oxiosd exited with %v after SIGTERM; stderr:\n%s", d.err, d.stderr.String())
	}
}

// kill9 kills the daemon without warning.
func (d *daemon) kill9() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.exited
	// A race-built oxiosd reports a race as it finds it and exits 66 at
	// its end, which a kill never reaches: its stderr says it.
	if strings.Contains(d.stderr.String(), "WARNING: DATA RACE") {
		d.t.Errorf("oxiosd, killed, had reported a data race; stderr:\n%s", d.stderr.String())
	}
}

func (d *daemon) client(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), d.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// result of running a command.
type result struct {
	stdout, stderr string
	code           int
}

// ox runs an ox-* binary against d with stdin.
func (d *daemon) ox(stdin string, name string, args ...string) result {
	d.t.Helper()
	return run(d.t, []string{"OXIOS_SOCKET=" + d.sock}, stdin, name, args...)
}

// noStdin as the stdin of run or ox runs the command with /dev/null for
// stdin, as cron does, instead of an empty pipe.
const noStdin = "\x00no stdin"

func run(t *testing.T, env []string, stdin string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin(name), args...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != noStdin {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	countCPU(t, cmd.ProcessState)
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running %s: %v", name, err)
		}
		code = ee.ExitCode()
	}
	return result{out.String(), errb.String(), code}
}

// rawConn is a bare protocol connection for wire-level tests.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (d *daemon) raw(t *testing.T) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawConn{t: t, c: c, r: bufio.NewReaderSize(c, 1<<20)}
	var hello map[string]json.RawMessage
	rc.readJSON(&hello)
	if hello["hello"] == nil {
		t.Fatalf("first line is not a hello: %v", hello)
	}
	return rc
}

func (rc *rawConn) send(line string) {
	rc.t.Helper()
	if _, err := rc.c.Write([]byte(line + "\n")); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rawConn) readJSON(v any) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := rc.r.ReadBytes('\n')
	if err != nil {
		rc.t.Fatalf("reading reply: %v", err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		rc.t.Fatalf("reply %q is not JSON: %v", line, err)
	}
}

type wireReply struct {
	ID     uint64          `json:"id"`
	OK     bool            `json:"ok"`
	Done   bool            `json:"done"`
	Result json.RawMessage `json:"result"`
	Item   json.RawMessage `json:"item"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (rc *rawConn) reply() wireReply {
	rc.t.Helper()
	var r wireReply
	rc.readJSON(&r)
	return r
}

// noRace skips a test under -race: make test runs it in its step without
// -race (its second go test line lists it). For a test whose cost is many
// starts of commands and runs (race-built binaries start several times
// slower) and whose subject is not concurrency in oxiosd: what it drives
// of the daemon, other tests drive under -race.
func noRace(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("run without -race by make test's second step")
	}
}
