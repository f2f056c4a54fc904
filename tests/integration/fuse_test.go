package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/share"
)

// The FUSE view, driven with real tools on a real mount of a real oxiosd.
// Each test's daemon mounts at DIR/mnt; when the test ends the daemon is
// stopped and the test checks that the mount is gone and that no file
// descriptor of this process still points into it. Every test has a
// watchdog: a mount that stops answering gets its daemon killed, which
// fails the blocked calls with ENOTCONN instead of hanging the run.

// fuseWatchdog bounds a test; make torture's long runs (OXIOS_TORTURE
// set) get half an hour.
var fuseWatchdog = func() time.Duration {
	if os.Getenv("OXIOS_TORTURE") != "" {
		return 30 * time.Minute
	}
	return 90 * time.Second
}()

// mounted is a daemon serving its mount.
type mounted struct {
	*daemon
	mnt string
}

func fuseAvailable(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			t.Skip("not root and no fusermount3")
		}
	}
}

// startMounted starts oxiosd with its mount; READY must mean mounted.
func startMounted(t *testing.T, o daemonOpts) *mounted {
	t.Helper()
	fuseAvailable(t)
	// Race-built binaries sleep a second before exiting by default: with
	// a shell command per step, that is most of a test's time.
	// (GORACE has atexit_sleep_ms=0: TestMain sets it.)
	if o.dir == "" {
		o.dir = shortTempDir(t)
	}
	mnt := filepath.Join(o.dir, "mnt")
	// The harness passes --no-mount; the later flag wins.
	o.args = append([]string{"--no-mount=false", "--mount", mnt}, o.args...)
	d := startDaemon(t, o)
	m := &mounted{daemon: d, mnt: mnt}
	if !isMountPoint(t, mnt) {
		t.Fatalf("READY before %s was mounted; stderr:\n%s", mnt, d.stderr.String())
	}
	stuck := time.AfterFunc(fuseWatchdog, func() {
		t.Errorf("the mount did not answer within %s: killing oxiosd", fuseWatchdog)
		d.cmd.Process.Kill()
	})
	t.Cleanup(func() {
		stuck.Stop()
		select {
		case <-d.exited:
		default:
			d.stop()
		}
		if isMountPoint(t, mnt) {
			t.Errorf("%s is still mounted after oxiosd stopped", mnt)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		if fds := fdsInto(mnt); len(fds) > 0 {
			t.Errorf("descriptors of the test still point into the mount: %v", fds)
		}
	})
	return m
}

// isMountPoint reads /proc/self/mountinfo.
func isMountPoint(t *testing.T, dir string) bool {
	t.Helper()
	return mountCount(t, dir) > 0
}

func mountCount(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			n++
		}
	}
	return n
}

func fdsInto(dir string) []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, dir+"/") {
			out = append(out, l)
		}
	}
	return out
}

// sh runs a shell script in dir with a deadline; cred, if set, runs it as
// that user.
func sh(t *testing.T, dir, script string, cred *syscall.Credential) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PATH="+binDir+":/usr/bin:/bin")
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = "/"
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("sh %q: %v", script, err)
		}
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		t.Fatalf("sh %q: timed out", script)
	}
	return result{out.String(), errb.String(), code}
}

func (m *mounted) sh(t *testing.T, script string) string {
	t.Helper()
	r := sh(t, m.mnt, script, nil)
	if r.code != 0 {
		t.Fatalf("sh %q: exit %d\nstdout: %s\nstderr: %s", script, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func (m *mounted) load(t *testing.T, agent, key string) (string, bool) {
	t.Helper()
	r := m.ox("", "ox-state", "load", "-a", agent, key)
	return r.stdout, r.code == 0
}

// eventually retries cond for a while: a close hands the content to the
// next group commit, so socket clients see it within a commit, while
// fsync(2) (`sync FILE`) waits for it.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFUSETools: cat, ls -l, cp, mv, rm -r, find, grep -r, redirection and
// append, on a real mount, checked against the socket both ways.
func TestFUSETools(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	if r := m.ox("", "ox-state", "save", "-a", "ops", "notes/today.md", "hello world\n"); r.code != 0 {
		t.Fatalf("save: %+v", r)
	}
	// The socket's save is visible through the mount at once.
	if got := m.sh(t, "cat agent/ops/state/notes/today.md"); got != "hello world\n" {
		t.Fatalf("cat: %q", got)
	}
	ls := m.sh(t, "ls -l agent/ops/state/notes")
	if !strings.Contains(ls, " 12 ") || !strings.Contains(ls, "today.md") || !strings.HasPrefix(strings.Split(ls, "\n")[1], "-rw-r--r--") {
		t.Fatalf("ls -l:\n%s", ls)
	}
	if got := m.sh(t, "ls agent; ls agent/ops"); got != "ops\ninbox\nmem\npolicy\nruns\nspawn\nstate\nstatus\n" {
		t.Fatalf("ls agent, agent/ops: %q", got)
	}
	// A socket change of a file the kernel has cached is seen at once.
	m.ox("", "ox-state", "save", "-a", "ops", "notes/today.md", "changed, and longer than before\n")
	if got := m.sh(t, "cat agent/ops/state/notes/today.md"); got != "changed, and longer than before\n" {
		t.Fatalf("cat after a socket save: %q", got)
	}

	// Redirection and append; sync FILE is fsync(2): durable on return.
	m.sh(t, "echo hi > agent/ops/state/greeting && sync agent/ops/state/greeting")
	if v, ok := m.load(t, "ops", "greeting"); !ok || v != "hi\n" {
		t.Fatalf("load after redirection + fsync: %q %v", v, ok)
	}
	m.sh(t, "echo there >> agent/ops/state/greeting")
	if got := m.sh(t, "cat agent/ops/state/greeting"); got != "hi\nthere\n" {
		t.Fatalf("cat after append: %q", got)
	}
	// close(2) returned before the save was durable, yet a socket read
	// after it sees the new content: reads wait for the mount's queue.
	if v, _ := m.load(t, "ops", "greeting"); v != "hi\nthere\n" {
		t.Fatalf("ox-state load after append and close: %q", v)
	}

	// cp -r a tree in, find and grep -r it, mv inside, rm -r it.
	src := t.TempDir()
	for i := 0; i < 20; i++ {
		p := filepath.Join(src, "tree", fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%02d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("line %d\nneedle-%d\n", i, i%3)), 0o644)
	}
	m.sh(t, "cp -r "+src+"/tree agent/ops/state/ && sync agent/ops/state/tree")
	found := m.sh(t, "cd agent/ops/state && find tree -type f | sort")
	if n := strings.Count(found, "\n"); n != 20 || !strings.Contains(found, "tree/d3/f19.txt\n") {
		t.Fatalf("find after cp -r: %d files\n%s", n, found)
	}
	if out := m.sh(t, "cd agent/ops/state && grep -rl needle-2 tree | sort"); strings.Count(out, "\n") != 6 {
		t.Fatalf("grep -rl: %q", out)
	}
	if out := m.sh(t, "diff -r "+src+"/tree agent/ops/state/tree && echo same"); out != "same\n" {
		t.Fatalf("diff -r: %q", out)
	}
	if n := strings.Count(m.ox("", "ox-state", "ls", "-a", "ops", "tree").stdout, "\n"); n != 20 {
		t.Fatalf("ox-state ls after cp -r: %d keys, want 20", n)
	}
	m.sh(t, "cd agent/ops/state && mv tree/d0/f00.txt tree/d1/moved.txt && mv tree/d2 tree/renamed")
	if v, ok := m.load(t, "ops", "tree/d1/moved.txt"); !ok || v != "line 0\nneedle-0\n" {
		t.Fatalf("after mv: %q %v", v, ok)
	}
	if _, ok := m.load(t, "ops", "tree/d0/f00.txt"); ok {
		t.Fatal("mv left the old key")
	}
	if v, ok := m.load(t, "ops", "tree/renamed/f18.txt"); !ok || v != "line 18\nneedle-0\n" {
		t.Fatalf("after mv of a folder: %q %v", v, ok)
	}
	if out := m.ox("", "ox-state", "ls", "-a", "ops", "tree/d2").stdout; out != "" {
		t.Fatalf("mv of a folder left keys: %s", out)
	}
	// mv across agents copies (EXDEV), as between file systems.
	m.sh(t, "mkdir agent/dev && mv agent/ops/state/tree/d3/f03.txt agent/dev/state/")
	if v, ok := m.load(t, "dev", "f03.txt"); !ok || v != "line 3\nneedle-0\n" {
		t.Fatalf("mv across agents: %q %v", v, ok)
	}
	m.sh(t, "rm -r agent/ops/state/tree")
	if out := m.ox("", "ox-state", "ls", "-a", "ops", "tree").stdout; out != "" {
		t.Fatalf("rm -r left keys:\n%s", out)
	}
	if out := m.sh(t, "ls agent/ops/state"); out != "greeting\nnotes\n" {
		t.Fatalf("ls after rm -r: %q", out)
	}
	// Empty folders live in the mount until a file is saved in them.
	m.sh(t, "mkdir -p agent/ops/state/a/b/c && test -d agent/ops/state/a/b/c && rmdir agent/ops/state/a/b/c agent/ops/state/a/b agent/ops/state/a")
	// A socket delete is seen at once.
	m.ox("", "ox-state", "rm", "-a", "ops", "greeting")
	if r := sh(t, m.mnt, "cat agent/ops/state/greeting", nil); r.code == 0 || !strings.Contains(r.stderr, "No such file") {
		t.Fatalf("cat after a socket delete: %+v", r)
	}
	// status is a record.
	if out := m.sh(t, "cat agent/ops/status"); !strings.Contains(out, `"type":"status","agent":"ops","keys":1,`) {
		t.Fatalf("status: %s", out)
	}
	// xattrs are not supported, and say so (so the kernel stops asking).
	note := filepath.Join(m.mnt, "agent/ops/state/notes/today.md")
	if _, err := syscall.Getxattr(note, "user.x", make([]byte, 64)); err != syscall.EOPNOTSUPP {
		t.Fatalf("getxattr: %v, want EOPNOTSUPP", err)
	}
	if err := syscall.Setxattr(note, "user.x", []byte("1"), 0); err != syscall.EOPNOTSUPP {
		t.Fatalf("setxattr: %v, want EOPNOTSUPP", err)
	}
}

// TestFUSEEditorSave: an editor's save (write a temp file, rename it over
// the original) replaces the content whole: readers, through the mount or
// the socket, see the old or the new content, never a mix or nothing.
func TestFUSEEditorSave(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	dir := filepath.Join(m.mnt, "agent", "ed", "state")
	m.ox("", "ox-state", "save", "-a", "ed", "doc.txt", "version 0\n")
	c := m.client(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad []string
	var mu sync.Mutex
	check := func(where string, v []byte, err error) {
		if err == nil && bytes.HasPrefix(v, []byte("version ")) && bytes.HasSuffix(v, []byte("\n")) && !bytes.Contains(v[1:], []byte("version")) {
			return
		}
		mu.Lock()
		bad = append(bad, fmt.Sprintf("%s: %q %v", where, v, err))
		mu.Unlock()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, _, err := c.StateLoad(context.Background(), "ed", "doc.txt")
			check("socket", v, err)
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			v, err := os.ReadFile(filepath.Join(dir, "doc.txt"))
			check("mount", v, err)
		}
	}()
	for i := 1; i <= 40; i++ {
		tmp := filepath.Join(dir, ".doc.txt.swp")
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		// Written in pieces, as editors do.
		for _, part := range []string{"ver", "sion ", strconv.Itoa(i), "\n"} {
			if _, err := f.WriteString(part); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "doc.txt")); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d reads saw a partial or missing file, first: %s", len(bad), bad[0])
	}
	if v, _ := m.load(t, "ed", "doc.txt"); v != "version 40\n" {
		t.Fatalf("after the saves: %q", v)
	}
	if out := m.ox("", "ox-state", "ls", "-a", "ed").stdout; strings.Contains(out, "swp") {
		t.Fatalf("the temp file is left:\n%s", out)
	}
	// The audit log holds the saves and deletes the mount made.
	if out := m.sh(t, "grep -c '\"op\":\"state.save\",\"target\":\"ed:doc.txt\"' audit/log"); strings.TrimSpace(out) != "41" {
		t.Fatalf("audit entries for the renames: %s", out)
	}
}

// TestFUSEConcurrentWriters: socket clients and mount writers at once, on
// keys of their own and on one shared key; afterwards both views agree.
func TestFUSEConcurrentWriters(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	dir := filepath.Join(m.mnt, "agent", "mix", "state")
	m.ox("", "ox-state", "save", "-a", "mix", "shared", "start")
	const writers, n = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := 0; w < writers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			c := m.client(t)
			for i := 0; i < n; i++ {
				if _, err := c.StateSave(context.Background(), "mix", fmt.Sprintf("s%d/k%d", w, i), []byte(fmt.Sprintf("socket %d %d", w, i))); err != nil {
					errs <- err
					return
				}
				if _, err := c.StateSave(context.Background(), "mix", "shared", []byte(fmt.Sprintf("socket %d %d", w, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("m%d", w)), 0o755); err != nil {
				errs <- err
				return
			}
			for i := 0; i < n; i++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("m%d/k%d", w, i)), []byte(fmt.Sprintf("mount %d %d", w, i)), 0o644); err != nil {
					errs <- err
					return
				}
				if err := os.WriteFile(filepath.Join(dir, "shared"), []byte(fmt.Sprintf("mount %d %d", w, i)), 0o644); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	m.sh(t, "sync agent/mix/state/shared")
	c := m.client(t)
	for w := 0; w < writers; w++ {
		for i := 0; i < n; i++ {
			for _, k := range []struct{ key, want string }{
				{fmt.Sprintf("s%d/k%d", w, i), fmt.Sprintf("socket %d %d", w, i)},
				{fmt.Sprintf("m%d/k%d", w, i), fmt.Sprintf("mount %d %d", w, i)},
			} {
				v, _, err := c.StateLoad(context.Background(), "mix", k.key)
				if err != nil || string(v) != k.want {
					t.Fatalf("socket view of %s: %q %v", k.key, v, err)
				}
				b, err := os.ReadFile(filepath.Join(dir, k.key))
				if err != nil || string(b) != k.want {
					t.Fatalf("mount view of %s: %q %v", k.key, b, err)
				}
			}
		}
	}
	// The shared key: whichever came last, the same in both views.
	eventually(t, "shared key agrees", func() bool {
		v, _, err := c.StateLoad(context.Background(), "mix", "shared")
		b, err2 := os.ReadFile(filepath.Join(dir, "shared"))
		return err == nil && err2 == nil && string(v) == string(b)
	})
}

// TestFUSELargeFile writes a 48 MiB file (256 MiB under make torture)
// through the mount and reads it back, through the mount and (after a
// restart) from the store.
func TestFUSELargeFile(t *testing.T) {
	t.Parallel()
	size := 48 << 20
	if os.Getenv("OXIOS_TORTURE") != "" {
		size = 256 << 20
	}
	m := startMounted(t, daemonOpts{config: "[limits]\nmax_value = \"300MiB\"\n"})
	src := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	// Every 4 KiB page says which it is: a misplaced page shows.
	const pg = 4096
	letters := make([]byte, 0, 26*pg)
	for l := 0; l < 26; l++ {
		letters = append(letters, bytes.Repeat([]byte{byte('a' + l)}, pg)...)
	}
	for p := 0; p < size/pg; p++ {
		hdr := fmt.Sprintf("page %08x\n", p)
		w.WriteString(hdr)
		w.Write(letters[(p%26)*pg+len(hdr) : (p%26+1)*pg])
	}
	w.Flush()
	f.Close()
	sum := fmt.Sprintf("%x", h.Sum(nil))

	m.sh(t, "mkdir agent/big && dd if="+src+" of=agent/big/state/file bs=128k 2>/dev/null && sync agent/big/state/file")
	if out := m.sh(t, "stat -c %s agent/big/state/file"); strings.TrimSpace(out) != strconv.Itoa(size) {
		t.Fatalf("size through the mount: %s", out)
	}
	if out := m.sh(t, "sha256sum < agent/big/state/file"); !strings.HasPrefix(out, sum) {
		t.Fatalf("read back through the mount: %s, want %s", out, sum)
	}
	// Past limits.max_value: EFBIG, and nothing half-applied (the first
	// of the two writes fits; the working copy is dropped whole).
	for _, script := range []string{
		"dd if=/dev/zero bs=1M count=2 seek=299 conv=notrunc of=agent/big/state/file",
		"truncate -s 301M agent/big/state/file",
	} {
		r := sh(t, m.mnt, script, nil)
		if r.code == 0 || !strings.Contains(r.stderr, "File too large") {
			t.Fatalf("%s: %+v", script, r)
		}
	}
	if out := m.sh(t, "stat -c %s agent/big/state/file"); strings.TrimSpace(out) != strconv.Itoa(size) {
		t.Fatalf("size after the refused write: %s", out)
	}
	m.stop()
	m = startMounted(t, daemonOpts{dir: m.dir, config: "[limits]\nmax_value = \"300MiB\"\n"})
	if out := m.sh(t, "sha256sum < agent/big/state/file"); !strings.HasPrefix(out, sum) {
		t.Fatalf("after a restart: %s, want %s", out, sum)
	}
}

// TestFUSEReadOnly: the read-only parts refuse writes with EROFS or
// EACCES, never silently.
func TestFUSEReadOnly(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "ops", "k", "v")
	for _, script := range []string{
		"echo x > agent/ops/policy",
		"echo x >> agent/ops/status",
		"rm agent/ops/status",
		// (A new file in mem/KIND is a memory to be: see TestFUSEMemory.)
		"mv agent/ops/mem/working agent/ops/mem/w2",
		"ln -s x agent/ops/mem/working/l.md",
		"mkdir agent/ops/mem/x",
		"rmdir agent/ops/mem/working",
		"echo x > audit/log",
		"echo x > audit/new",
		"rm audit/head",
		"touch agent/ops/newfile",
		"mv agent/ops/state agent/ops/other",
		"rmdir agent/ops/state",
		"touch newfile",
		"ln agent/ops/state/k agent/ops/state/k2",
		"ln -s k agent/ops/state/k3",
	} {
		r := sh(t, m.mnt, script, nil)
		if r.code == 0 || !(strings.Contains(r.stderr, "Read-only file system") || strings.Contains(r.stderr, "Permission denied") || strings.Contains(r.stderr, "Operation not permitted")) {
			t.Errorf("%s: exit %d %q, want a refusal", script, r.code, r.stderr)
		}
	}
	if out := m.sh(t, "ls -A agent/ops/mem/working; ls agent/ops/mem"); out != "episodic\nsemantic\nworking\n" {
		t.Fatalf("read-only parts: %q", out)
	}
	// The policy is as it was: the default one.
	if out := m.sh(t, "cat agent/ops/policy"); out != string(share.DefaultPolicy) {
		t.Fatalf("agent/ops/policy after the refused writes: %q", out)
	}
}

// TestFUSEAudit: /audit/head and /audit/log say what ox-audit says.
func TestFUSEAudit(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	for i := 0; i < 30; i++ {
		m.ox("", "ox-state", "save", "-a", "ops", fmt.Sprintf("k%d", i), "v")
	}
	m.sh(t, "echo via-mount > agent/ops/state/m && sync agent/ops/state/m")
	head := m.ox("", "ox-audit", "head")
	if got := m.sh(t, "cat audit/head"); got != head.stdout {
		t.Fatalf("audit/head %q, ox-audit head %q", got, head.stdout)
	}
	log := m.ox("", "ox-audit", "log", "--json")
	if got := m.sh(t, "cat audit/log"); got != log.stdout || strings.Count(got, "\n") < 31 {
		t.Fatalf("audit/log (%d lines) differs from ox-audit log (%d lines)", strings.Count(got, "\n"), strings.Count(log.stdout, "\n"))
	}
	// `> file` in a shell closes a dup of the descriptor first: still one save.
	if got := m.sh(t, "grep -c 'ops:m\"' audit/log"); strings.TrimSpace(got) != "1" {
		t.Fatalf("the mount's save in the log: %q", got)
	}
}

// TestFUSEOtherUID: another uid gets nothing unless granted; granted, it
// sees and changes only its agents.
func TestFUSEOtherUID(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	const nobody = 65534
	as := &syscall.Credential{Uid: nobody, Gid: nobody}
	m := startMounted(t, daemonOpts{})
	os.Chmod(m.dir, 0o755)
	m.ox("", "ox-state", "save", "-a", "ops", "secret", "s3cret")
	m.ox("", "ox-state", "save", "-a", "web-1", "page", "hello")
	for _, script := range []string{"ls " + m.mnt, "cat " + m.mnt + "/agent/ops/state/secret", "ls " + m.mnt + "/agent"} {
		if r := sh(t, "/", script, as); r.code == 0 || !strings.Contains(r.stderr, "Permission denied") {
			t.Errorf("ungranted uid, %s: %+v", script, r)
		}
	}
	m.stop()

	m = startMounted(t, daemonOpts{dir: m.dir, config: fmt.Sprintf("[access.users]\n\"%d\" = [\"web-*\"]\n", nobody)})
	// The admin has been here: names and attributes are in the kernel's
	// caches. The contents and the listings are still checked per caller.
	m.sh(t, "cat agent/ops/state/secret agent/web-1/state/page >/dev/null; ls -l agent/*/state >/dev/null")
	if r := sh(t, "/", "ls "+m.mnt+"/agent", as); r.code != 0 || r.stdout != "web-1\n" {
		t.Fatalf("granted uid, ls agent: %+v", r)
	}
	if r := sh(t, "/", "cat "+m.mnt+"/agent/web-1/state/page", as); r.code != 0 || r.stdout != "hello" {
		t.Fatalf("granted uid, its agent: %+v", r)
	}
	if r := sh(t, "/", "echo new > "+m.mnt+"/agent/web-1/state/page2 && cat "+m.mnt+"/agent/web-1/state/page2", as); r.code != 0 || r.stdout != "new\n" {
		t.Fatalf("granted uid, writing its agent: %+v", r)
	}
	for _, script := range []string{
		"cat " + m.mnt + "/agent/ops/state/secret",
		"ls " + m.mnt + "/agent/ops/state",
		"echo x > " + m.mnt + "/agent/ops/state/secret",
		"rm " + m.mnt + "/agent/ops/state/secret",
		"mkdir " + m.mnt + "/agent/ops2",
		"cat " + m.mnt + "/audit/head",
	} {
		// Refused, or not there for this uid (ENOENT, which dash words as
		// "Directory nonexistent" for a file it cannot create).
		r := sh(t, "/", script, as)
		if r.code == 0 || !(strings.Contains(r.stderr, "Permission denied") || strings.Contains(r.stderr, "Operation not permitted") ||
			strings.Contains(r.stderr, "No such file") || strings.Contains(r.stderr, "Directory nonexistent")) {
			t.Errorf("granted uid, outside its grant, %s: %+v", script, r)
		}
	}
	if v, _ := m.load(t, "ops", "secret"); v != "s3cret" {
		t.Fatalf("ops/secret changed: %q", v)
	}
	// Its audit log is its agents' entries only.
	if r := sh(t, "/", "cat "+m.mnt+"/audit/log", as); r.code != 0 || strings.Contains(r.stdout, "ops:") || !strings.Contains(r.stdout, "web-1:page2") {
		t.Fatalf("granted uid, audit/log: %+v", r)
	}
}

// TestFUSEKill9StaleMount: oxiosd killed with -9 leaves a dead mount; the
// next start clears it and mounts again.
func TestFUSEKill9StaleMount(t *testing.T) {
	m := startMounted(t, daemonOpts{})
	m.sh(t, "mkdir agent/k && echo before > agent/k/state/f && sync agent/k/state/f")
	m.kill9()
	if _, err := os.ReadDir(m.mnt); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("reading the dead mount: %v, want ENOTCONN", err)
	}
	if !isMountPoint(t, m.mnt) {
		t.Fatal("kill -9 left no mount behind: nothing to test")
	}
	m = startMounted(t, daemonOpts{dir: m.dir})
	if n := mountCount(t, m.mnt); n != 1 {
		t.Fatalf("%d mounts at %s after the restart, want 1", n, m.mnt)
	}
	if !strings.Contains(m.stderr.String(), "cleared a stale mount") {
		t.Errorf("no log line about the stale mount:\n%s", m.stderr.String())
	}
	if got := m.sh(t, "cat agent/k/state/f"); got != "before\n" {
		t.Fatalf("after restart: %q", got)
	}
}

// TestFUSENoMount: --no-mount says so in one line and the socket works.
func TestFUSENoMount(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{args: []string{"--mount", "/nonexistent/oxios-mnt"}})
	// The log reaches us through a pipe, maybe after READY.
	eventually(t, "the --no-mount line", func() bool { return strings.Contains(d.stderr.String(), "oxiosd ready") })
	n := 0
	for _, l := range strings.Split(d.stderr.String(), "\n") {
		if strings.Contains(l, "mount") {
			n++
		}
	}
	if !strings.Contains(d.stderr.String(), "filesystem mount disabled (--no-mount)") || n != 1 {
		t.Fatalf("want one line about the mount:\n%s", d.stderr.String())
	}
	if r := d.ox("", "ox-state", "save", "-a", "x", "k", "v"); r.code != 0 {
		t.Fatalf("save: %+v", r)
	}
}

// TestFUSENoLeakedFds: the daemon's descriptors come back to where they
// were after many opens of small and large files (the large ones are read
// from their files, with passthrough as root).
func TestFUSENoLeakedFds(t *testing.T) {
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "fd", "small", "s")
	m.ox(strings.Repeat("x", 1<<20), "ox-state", "save", "-a", "fd", "large")
	count := func() int {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", m.cmd.Process.Pid))
		return len(ents)
	}
	// Wait for the applier to write the large key's file.
	time.Sleep(2500 * time.Millisecond)
	m.sh(t, "cat agent/fd/state/large agent/fd/state/small > /dev/null")
	before := count()
	m.sh(t, "for i in $(seq 200); do cat agent/fd/state/large agent/fd/state/small; echo $i > agent/fd/state/n; done > /dev/null")
	eventually(t, "descriptors back to "+strconv.Itoa(before), func() bool { return count() <= before })
}

// TestFUSEBusyShutdown: a process working inside the mount does not hold
// up a stop: the mount is detached, the process gets ENOTCONN, and what
// was written and closed is saved.
func TestFUSEBusyShutdown(t *testing.T) {
	m := startMounted(t, daemonOpts{})
	m.sh(t, "mkdir agent/busy")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Its working directory is in the mount; it writes once oxiosd is gone.
	inside := exec.CommandContext(ctx, "sh", "-c", "echo saved > f; read x; ls > /dev/null")
	inside.Dir = filepath.Join(m.mnt, "agent", "busy", "state")
	stdin, _ := inside.StdinPipe()
	var errb bytes.Buffer
	inside.Stderr = &errb
	if err := inside.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the file written inside", func() bool {
		_, err := os.Stat(filepath.Join(inside.Dir, "f"))
		return err == nil
	})
	start := time.Now()
	m.stop()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("stopping with a busy mount took %s", d)
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := inside.Wait(); err == nil || !strings.Contains(errb.String(), "not connected") {
		t.Errorf("the process inside: %v %q, want ENOTCONN", err, errb.String())
	}
	d := startDaemon(t, daemonOpts{dir: m.dir})
	if r := d.ox("", "ox-state", "load", "-a", "busy", "f"); r.stdout != "saved\n" {
		t.Fatalf("after the busy stop: %+v", r)
	}
}

// TestFUSEHeldFileKeepsItsValue: a state file open through the mount
// reads the value it had when opened, whole, however often the key is
// saved meanwhile. The daemon writes a later value into a file a save
// replaced only when no one has it open (the mount's open file included),
// so the held file is never written over.
func TestFUSEHeldFileKeepsItsValue(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	c := m.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Larger than the daemon's cache of small values, so that the mount
	// serves it from its file, and small enough for that file to be kept
	// for a later value once replaced.
	value := func(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, 8<<10) }
	file := filepath.Join(m.data, "repo", "agents", "held", "state", "k")
	save := func(i int) {
		t.Helper()
		if _, err := c.StateSave(ctx, "held", "k", value(i)); err != nil {
			t.Fatal(err)
		}
		// The file follows the save once saves pause.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if b, _ := os.ReadFile(file); bytes.Equal(b, value(i)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("value %d never reached %s", i, file)
			}
		}
	}
	save(0)
	f, err := os.Open(filepath.Join(m.mnt, "agent", "held", "state", "k"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 10)
	if _, err := io.ReadFull(f, head); err != nil || !bytes.Equal(head, value(0)[:10]) {
		t.Fatalf("first read: %q %v", head, err)
	}
	for i := 1; i <= 6; i++ {
		save(i)
	}
	all, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil || !bytes.Equal(all, value(0)) {
		t.Fatalf("the held file reads %d bytes %.12q... (%v), want the value it was opened with", len(all), all, err)
	}
	if v, _ := m.load(t, "held", "k"); v != string(value(6)) {
		t.Fatalf("the key's value is %.12q..., want the last saved", v)
	}
}

// TestStopWithLiveRun: a run's sandbox binds its agent's folder of the
// mount in its own namespace, which kept the FUSE connection (and oxiosd's
// stop, waiting for it) alive as long as the run: a detached sleep 60 made
// the stop take 60 s. The stop does not wait for runs: oxiosd is gone while
// the run of sleep 300 still lives (d.stop fails the test past 30 s), and
// the mount is gone from the host.
func TestStopWithLiveRun(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	rec := spawnDetached(t, m.daemon, "ops", "sleep", "300")
	defer syscall.Kill(rec.PID, syscall.SIGKILL)
	if err := syscall.Kill(rec.PID, 0); err != nil {
		t.Fatalf("the run's process %d is not there: %v", rec.PID, err)
	}
	m.stop()
	if isMountPoint(t, m.mnt) {
		t.Fatalf("%s is still mounted after oxiosd stopped", m.mnt)
	}
}
