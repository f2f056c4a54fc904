package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
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
