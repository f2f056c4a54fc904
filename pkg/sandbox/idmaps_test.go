package sandbox

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIdmapMaker: a namespace of the maker, given to an idmapped mount
// as a run's shim gives it (Overlay.IdmapFD), shows the folder's owner's
// files as the run's uid's; the maker answers again and again, and ends
// with Close.
func TestIdmapMaker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts of a root oxiosd: needs root")
	}
	dir := t.TempDir()
	lower, at := filepath.Join(dir, "lower"), filepath.Join(dir, "at")
	for _, d := range []string{lower, at} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const owner, run = 4242, FirstUID + 77
	if err := os.WriteFile(filepath.Join(lower, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(lower, "f"), owner, owner); err != nil {
		t.Fatal(err)
	}
	var m IdmapMaker
	defer m.Close()
	for i := 0; i < 3; i++ {
		ns, err := m.Make(owner, owner, run+uint32(i), run+uint32(i))
		if err != nil {
			t.Fatal(err)
		}
		uid, err := idmappedOwner(ns, lower, at)
		ns.Close()
		if err != nil {
			if err == unix.EINVAL || err == unix.EOPNOTSUPP {
				t.Skipf("the temporary folder's filesystem takes no idmapped mount: %v", err)
			}
			t.Fatal(err)
		}
		if uid != run+uint32(i) {
			t.Errorf("through namespace %d the owner's file is uid %d, want %d", i, uid, run+uint32(i))
		}
	}
	m.Close()
	if m.cmd != nil || m.conn != nil {
		t.Error("the maker is still there after Close")
	}
}

// idmappedOwner mounts lower at at idmapped by ns, in a mount namespace
// of a thread of its own (which then ends), and returns the owner of f.
func idmappedOwner(ns *os.File, lower, at string) (uint32, error) {
	type result struct {
		uid uint32
		err error
	}
	ch := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with its namespace
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			ch <- result{err: err}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			ch <- result{err: err}
			return
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, lower, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer unix.Close(fd)
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns.Fd())}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
			ch <- result{err: err}
			return
		}
		if err := unix.MoveMount(fd, "", unix.AT_FDCWD, at, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			ch <- result{err: err}
			return
		}
		fi, err := os.Stat(filepath.Join(at, "f"))
		if err != nil {
			ch <- result{err: err}
			return
		}
		ch <- result{uid: fi.Sys().(*syscall.Stat_t).Uid}
	}()
	r := <-ch
	return r.uid, r.err
}
