package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The mount as a file system (issue 25): what a closed write must survive
// (the kernel evicting the inode), and what pjdfstest and fsx check.

// canDropCaches skips the test unless it may make the kernel evict inodes
// (root: /proc/sys/vm/drop_caches).
func canDropCaches(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("cannot drop caches: %v", err)
	}
	f.Close()
}

// TestFUSEEvictionKeepsWrites: a write closed just before the kernel
// evicts the file's inode is not lost when the file is opened again at
// once. Before the fix the reopen read the store, which did not have the
// queued save yet, and the next write was made on the old content (1 in
// ~40). Echo 2 > drop_caches frees unused dentries and inodes: FORGET.
func TestFUSEEvictionKeepsWrites(t *testing.T) {
	t.Parallel()
	canDropCaches(t)
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "ev", "seed", "x")
	const rounds, perShell = 200, 20
	// A shell for many rounds: a round is a few forks, not a Go round
	// trip (and each shell has its own deadline).
	script := fmt.Sprintf(`cd agent/ev/state
i=0
while [ $i -lt %d ]; do
  printf AAAAAAAAAA >f
  printf B | dd of=f conv=notrunc status=none
  echo 2 >/proc/sys/vm/drop_caches
  printf C | dd of=f bs=1 seek=1 conv=notrunc status=none
  printf '%%s\n' "$(cat f)"
  i=$((i+1))
done`, perShell)
	var out string
	for r := 0; r < rounds; r += perShell {
		out += m.sh(t, script)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != rounds {
		t.Fatalf("%d rounds printed, want %d:\n%s", len(lines), rounds, out)
	}
	bad := 0
	for i, l := range lines {
		if l != "BCAAAAAAAA" {
			if bad++; bad < 5 {
				t.Errorf("round %d: cat printed %q, want BCAAAAAAAA", i, l)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d rounds lost a write", bad, rounds)
	}
	if v, ok := m.load(t, "ev", "f"); !ok || v != "BCAAAAAAAA" {
		t.Fatalf("ox-state load: %q %v", v, ok)
	}
}

// TestFUSEAuditFollow: /audit/log reports the length of what the caller
// sees, a read from an offset returns what was appended since, and
// tail -f follows it (it polls fstat: a size of 0 made it say "file
// truncated" and print nothing new).
func TestFUSEAuditFollow(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	for i := 0; i < 5; i++ {
		m.ox("", "ox-state", "save", "-a", "tf", fmt.Sprintf("k%d", i), "v")
	}
	logPath := filepath.Join(m.mnt, "audit/log")
	content := m.sh(t, "cat audit/log")
	st, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != int64(len(content)) || st.Size() == 0 {
		t.Fatalf("audit/log: stat says %d bytes, cat read %d", st.Size(), len(content))
	}

	// A handle at the end reads what is appended after it got there.
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(st.Size(), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(f); len(b) != 0 {
		t.Fatalf("read at the end before any change: %q", b)
	}
	m.ox("", "ox-state", "save", "-a", "tf", "after-seek", "v")
	b, err := io.ReadAll(f)
	if err != nil || !strings.Contains(string(b), `tf:after-seek"`) || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("read from the old end after a save: %q %v", b, err)
	}
	if st2, _ := os.Stat(logPath); st2.Size() != st.Size()+int64(len(b)) {
		t.Fatalf("size after one more entry: %d, want %d", st2.Size(), st.Size()+int64(len(b)))
	}

	// tail -f, polling (FUSE tells inotify nothing of the daemon's
	// changes), prints the new entries and no complaint.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tail := exec.CommandContext(ctx, "tail", "-n", "0", "-s", "0.1", "-f", logPath)
	var errb syncBuffer
	tail.Stderr = &errb
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); tail.Wait() }()
	time.Sleep(300 * time.Millisecond) // tail has stat'ed its start
	for i := 0; i < 3; i++ {
		m.ox("", "ox-state", "save", "-a", "tf", fmt.Sprintf("followed%d", i), "v")
	}
	sc := bufio.NewScanner(out)
	for i := 0; i < 3; i++ {
		if !sc.Scan() {
			t.Fatalf("tail -f ended after %d lines: %v; stderr %q", i, sc.Err(), errb.String())
		}
		if want := fmt.Sprintf(`tf:followed%d"`, i); !strings.Contains(sc.Text(), want) {
			t.Fatalf("tail -f line %d: %q, want %s", i, sc.Text(), want)
		}
	}
	if strings.Contains(errb.String(), "truncated") {
		t.Fatalf("tail -f: %s", errb.String())
	}
}

// statT is lstat(2) of p.
func statT(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

// TestFUSEModesAndTimes: what pjdfstest's chmod, utimensat and open
// groups check, where that needs no links, fifos or other users. A key's
// mode and mtime are kept with it (through eviction and a restart), mode
// 0 is shown as 0, ctime moves with every change, and a folder's time
// moves when a name comes or goes in it.
func TestFUSEModesAndTimes(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	dir := m.dir
	st := filepath.Join(m.mnt, "agent/mt/state")
	m.ox("", "ox-state", "save", "-a", "mt", "seed", "x")
	f := filepath.Join(st, "f")
	if err := os.WriteFile(f, []byte("value"), 0o644); err != nil {
		t.Fatal(err)
	}
	c0 := statT(t, f).Ctim
	time.Sleep(10 * time.Millisecond)

	// chmod: kept, and ctime moves while mtime does not.
	m0 := statT(t, f).Mtim
	if err := os.Chmod(f, 0o600); err != nil {
		t.Fatal(err)
	}
	s1 := statT(t, f)
	if s1.Mode&0o7777 != 0o600 || s1.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Fatalf("mode after chmod 600: %#o", s1.Mode)
	}
	if s1.Mtim != m0 || s1.Ctim.Nano() <= c0.Nano() {
		t.Fatalf("chmod: mtime %v -> %v (must stay), ctime %v -> %v (must move)", m0, s1.Mtim, c0, s1.Ctim)
	}
	// Mode 0 is 0, not 0644.
	g := filepath.Join(st, "zero")
	os.WriteFile(g, []byte("z"), 0o644)
	if err := os.Chmod(g, 0); err != nil {
		t.Fatal(err)
	}
	if mode := statT(t, g).Mode & 0o7777; mode != 0 {
		t.Fatalf("mode after chmod 0: %#o", mode)
	}
	// open(O_CREAT, 0600) under umask 0: the create's mode.
	h := filepath.Join(st, "created")
	fd, err := syscall.Open(h, syscall.O_CREAT|syscall.O_WRONLY|syscall.O_EXCL, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Write(fd, []byte("c"))
	syscall.Close(fd)
	if mode := statT(t, h).Mode & 0o7777; mode != 0o640&^uint32(syscall.Umask(0)) {
		t.Fatalf("mode of a file created 0640: %#o", mode)
	}

	// touch -d and utimensat: mtime sticks; ctime moves.
	past := time.Date(2001, 2, 3, 4, 5, 6, 700, time.UTC)
	c1 := statT(t, f).Ctim
	time.Sleep(10 * time.Millisecond)
	if err := os.Chtimes(f, past, past); err != nil {
		t.Fatal(err)
	}
	s2 := statT(t, f)
	if time.Unix(s2.Mtim.Unix()).UTC() != past || s2.Ctim.Nano() <= c1.Nano() {
		t.Fatalf("utimensat: mtime %v (want %v), ctime %v -> %v", time.Unix(s2.Mtim.Unix()), past, c1, s2.Ctim)
	}
	m.sh(t, "touch -d '2002-03-04 05:06:07 UTC' agent/mt/state/zero")
	if got := m.sh(t, "stat -c %Y agent/mt/state/zero"); strings.TrimSpace(got) != "1015218367" {
		t.Fatalf("touch -d: mtime %s", got)
	}
	// A write after touch -d takes the time of the write.
	m.sh(t, "printf more >> agent/mt/state/zero")
	if s := statT(t, g); time.Since(time.Unix(s.Mtim.Unix())) > time.Minute {
		t.Fatalf("mtime after a write that followed touch -d: %v", time.Unix(s.Mtim.Unix()))
	}
	m.sh(t, "touch -d '2002-03-04 05:06:07 UTC' agent/mt/state/zero")

	// Folder times move when a name comes or goes.
	sub := filepath.Join(st, "sub")
	os.Mkdir(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "a"), []byte("a"), 0o644)
	d0 := statT(t, sub).Mtim
	time.Sleep(20 * time.Millisecond)
	os.WriteFile(filepath.Join(sub, "b"), []byte("b"), 0o644)
	if d1 := statT(t, sub).Mtim; d1.Nano() <= d0.Nano() {
		t.Fatalf("folder mtime after a new file: %v -> %v", d0, d1)
	}
	time.Sleep(20 * time.Millisecond)
	d1 := statT(t, sub).Mtim
	os.Remove(filepath.Join(sub, "a"))
	if d2 := statT(t, sub).Mtim; d2.Nano() <= d1.Nano() {
		t.Fatalf("folder mtime after rm: %v -> %v", d1, d2)
	}

	check := func(when string) {
		t.Helper()
		if mode := statT(t, f).Mode & 0o7777; mode != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", when, mode)
		}
		if mode := statT(t, g).Mode & 0o7777; mode != 0 {
			t.Errorf("%s: mode of zero %#o, want 0", when, mode)
		}
		if s := statT(t, f); time.Unix(s.Mtim.Unix()).UTC() != past {
			t.Errorf("%s: mtime %v, want %v", when, time.Unix(s.Mtim.Unix()).UTC(), past)
		}
		if got := m.sh(t, "stat -c %Y agent/mt/state/zero"); strings.TrimSpace(got) != "1015218367" {
			t.Errorf("%s: touch -d's mtime %s", when, got)
		}
		if b, err := os.ReadFile(f); err != nil || string(b) != "value" {
			t.Errorf("%s: content %q %v", when, b, err)
		}
	}
	check("at once")
	m.sh(t, "sync agent/mt/state/f agent/mt/state/zero")
	if f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0); err == nil {
		f.WriteString("2")
		f.Close()
		check("after the kernel evicted the inodes")
	}
	m.stop()
	m = startMounted(t, daemonOpts{dir: dir})
	check("after a restart")

	// rename(2) keeps the mode and the mtime.
	moved := filepath.Join(st, "moved")
	if err := os.Rename(f, moved); err != nil {
		t.Fatal(err)
	}
	for _, when := range []string{"after mv", "after mv and eviction"} {
		s := statT(t, moved)
		if s.Mode&0o7777 != 0o600 || time.Unix(s.Mtim.Unix()).UTC() != past {
			t.Errorf("%s: mode %#o mtime %v, want 0600 %v", when, s.Mode&0o7777, time.Unix(s.Mtim.Unix()).UTC(), past)
		}
		m.sh(t, "sync agent/mt/state/moved")
		os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0)
	}
}

// TestFUSEWritableMmap: a file opened for writing can be mapped shared
// and written through the mapping (writers use direct I/O, which the
// kernel let map only from Linux 6.6 with DIRECT_IO_ALLOW_MMAP; before,
// ENODEV). What was written through the mapping is saved at close.
func TestFUSEWritableMmap(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "mm", "f", "hello world")
	p := filepath.Join(m.mnt, "agent/mm/state/f")
	fd, err := syscall.Open(p, syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := syscall.Mmap(fd, 0, 11, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if errors.Is(err, syscall.ENODEV) {
		syscall.Close(fd)
		t.Skipf("this kernel maps no direct-I/O file for writing: %v", err)
	}
	if err != nil {
		syscall.Close(fd)
		t.Fatalf("mmap of a file opened for writing: %v", err)
	}
	if string(b) != "hello world" {
		t.Errorf("mapped content %q", b)
	}
	copy(b[6:], "WORLD")
	if err := syscall.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(fd); err != nil {
		t.Fatalf("close after writing through the mapping: %v", err)
	}
	if got := m.sh(t, "cat agent/mm/state/f"); got != "hello WORLD" {
		t.Fatalf("cat after the mapping was written: %q", got)
	}
	m.sh(t, "sync agent/mm/state/f")
	if v, ok := m.load(t, "mm", "f"); !ok || v != "hello WORLD" {
		t.Fatalf("ox-state load: %q %v", v, ok)
	}
}

// TestFUSEStaleRead: writes alternating between the mount and the socket,
// each read at once through the other path. Once in 300 rounds cat
// printed the mount's previous value right after ox-state save returned:
// the mount still showed the content of its own save, durable by then
// and overtaken by the socket's, until the goroutine that records the
// save had run. The mount now stops showing a save's content as soon as
// it is durable (writeback.Queue.Shown).
func TestFUSEStaleRead(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	rounds := 30 // a round is 5 processes: seconds under -race on a busy machine
	if os.Getenv("OXIOS_TORTURE") != "" {
		rounds = 300 // make torture
	}
	const perShell = 10 // each shell has its own deadline
	script := `export OXIOS_SOCKET=%s
cd agent/sr/state
i=%d
while [ $i -lt %d ]; do
  printf m$i >f
  ox-state save -a sr f s$i >/dev/null || exit 1
  v=$(cat f)
  [ "$v" = s$i ] || echo "round $i: cat printed $v after ox-state save s$i"
  printf n$i >f
  v=$(ox-state load -a sr f)
  [ "$v" = n$i ] || echo "round $i: ox-state load printed $v after the mount wrote n$i"
  i=$((i+1))
done`
	m.ox("", "ox-state", "save", "-a", "sr", "seed", "x")
	var out string
	for r := 0; r < rounds; r += perShell {
		out += m.sh(t, fmt.Sprintf(script, m.sock, r, r+perShell))
	}
	if out != "" {
		t.Fatalf("stale reads:\n%s", out)
	}
}
