package state

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain puts the tests' folders (t.TempDir) on the memory file system
// of /dev/shm where there is one with 4 GiB free (a container's is often
// 64 MiB), unless OXIOS_TEST_ON_DISK is set. These
// tests make crashes by copying a store's files or by killing a process,
// never by cutting the machine's power, so what they check is the same in
// memory; on a disk they spent most of their time waiting for fsyncs and
// syncfs calls behind every other package's writes (`make test` runs the
// packages side by side). The code's calls are the same: the file system
// answers them at once. Tests that need a file system of their own
// (ownFS) still mount one.
func TestMain(m *testing.M) {
	var fs unix.Statfs_t
	if os.Getenv("OXIOS_TEST_ON_DISK") == "" && unix.Statfs("/dev/shm", &fs) == nil && int64(fs.Bavail)*fs.Bsize >= 4<<30 {
		if dir, err := os.MkdirTemp("/dev/shm", "oxios-state-test-"); err == nil {
			os.Setenv("TMPDIR", dir)
			code := m.Run()
			os.RemoveAll(dir)
			os.Exit(code)
		} else {
			fmt.Fprintln(os.Stderr, "state tests: no /dev/shm, on disk:", err)
		}
	}
	os.Exit(m.Run())
}
