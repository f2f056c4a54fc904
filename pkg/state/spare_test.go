package state

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// inode is the inode number of the file at path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// leases reports whether the file system of dir grants write leases,
// which a spare needs.
func leases(t *testing.T, dir string) bool {
	f, err := os.Create(filepath.Join(dir, "lease-probe"))
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		return false
	}
	unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	return true
}

// spareValue is a value of round i, too large for the cache (read from its
// file) but small enough for its file to be kept as a spare.
func spareValue(i int) []byte {
	return bytes.Repeat([]byte(strconv.Itoa(i%10)), cacheMaxValue+1000)
}

// A key's replaced file is written over for a later value only when no
// one can see it: without readers the applier swaps between two files;
// a file someone holds open, or a fork has linked, keeps its value.
func TestSparesOnlyWhenUnseen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{CacheBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := s.path("a", "k")
	write := func(i int) {
		commit(t, s, &Change{Agent: "a", Key: "k", Value: spareValue(i)})
		s.Flush()
	}
	write(0)
	first := inode(t, path)
	write(1)
	write(2)
	if s.noExchange {
		t.Skip("the file system has no RENAME_EXCHANGE: no spares")
	}
	if !leases(t, dir) {
		t.Skip("the file system grants no write leases: no spares")
	}
	if got := inode(t, path); got != first {
		t.Fatalf("the third value's file is inode %d, not the first's %d: no spare was used", got, first)
	}

	// Held open (as the mount holds a file it serves): never written over.
	f, v, _, err := s.Open("a", "k")
	if err != nil || f == nil || v != nil {
		t.Fatalf("Open = %v, %d bytes, %v: want the file", f, len(v), err)
	}
	held := inode(t, path)
	for i := 3; i < 10; i++ {
		write(i)
		if inode(t, path) == held {
			t.Fatalf("value %d was written into the file held open", i)
		}
	}
	got, err := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	f.Close()
	if err != nil || !bytes.Equal(got, spareValue(2)) {
		t.Fatalf("the held file changed: %.20q %v", got, err)
	}
	if v, _, err := s.Load("a", "k"); err != nil || !bytes.Equal(v, spareValue(9)) {
		t.Fatalf("k = %.20q %v", v, err)
	}

	// Linked by a fork: the fork's value stays, in memory and in its file.
	fork(t, s, &Fork{From: "a", To: "b"})
	s.Flush()
	for i := 10; i < 16; i++ {
		write(i)
	}
	if v, _, err := s.Load("b", "k"); err != nil || !bytes.Equal(v, spareValue(9)) {
		t.Fatalf("the fork's k = %.20q %v", v, err)
	}
	if b, err := os.ReadFile(s.path("b", "k")); err != nil || !bytes.Equal(b, spareValue(9)) {
		t.Fatalf("the fork's file of k = %.20q %v", b, err)
	}

	// Loads while the applier rewrites: every value whole.
	stop := loading(t, s, "a", "k", func(v []byte) bool {
		return len(v) == len(spareValue(0)) && bytes.Equal(v, bytes.Repeat(v[:1], len(v)))
	})
	for i := 16; i < 200; i++ {
		write(i)
	}
	stop()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("%d temp files left after Close", len(left))
	}
}
