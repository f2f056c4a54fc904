package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	canDropCaches(t)
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "ev", "seed", "x")
	const rounds = 200
	// One shell for every round: a round is a few forks, not a Go round trip.
	script := fmt.Sprintf(`cd agent/ev/state
i=0
while [ $i -lt %d ]; do
  printf AAAAAAAAAA >f
  printf B | dd of=f conv=notrunc status=none
  echo 2 >/proc/sys/vm/drop_caches
  printf C | dd of=f bs=1 seek=1 conv=notrunc status=none
  printf '%%s\n' "$(cat f)"
  i=$((i+1))
done`, rounds)
	out := m.sh(t, script)
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
