package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A workspace's size limit is its own filesystem: oxiosd, as root,
// mounts a tmpfs of the policy's size (limits.disk) on the workspace's
// folder before the run starts, so that a run that fills it gets ENOSPC
// from its own filesystem and DATA's keeps every byte it had. A tmpfs
// rather than project quotas or a loop-mounted image: it is made in
// microseconds (an image needs mkfs and a loop device, tens of
// milliseconds of every spawn), needs nothing of the host's filesystem
// (project quotas need ext4 or XFS made and mounted with them), its
// pages are charged to the memory cgroup of the run that writes them
// (so the workspace counts against limits.memory), and nothing of it
// outlives the run or a crash but a mount point, which the next start
// unmounts. Its inodes are bounded too (one per 4 KiB of its size), so
// filling it with empty files ends at ENOSPC as well.

// inodesFor is the number of inodes of a tmpfs of size bytes: one per
// 4 KiB, at least 1024.
func inodesFor(size uint64) uint64 {
	return max(size/4096, 1024)
}

// tmpfsOptions are the mount options of a tmpfs of size bytes (0: the
// kernel's default, half of RAM) with mode.
func tmpfsOptions(mode string, size uint64) string {
	if size == 0 {
		return "mode=" + mode
	}
	return fmt.Sprintf("mode=%s,size=%d,nr_inodes=%d", mode, size, inodesFor(size))
}

// MountWorkspace mounts a tmpfs of size bytes on dir, an empty folder
// oxiosd made for a run's or an exec's workspace, owned by uid.
func MountWorkspace(dir string, size uint64, uid uint32) error {
	opts := tmpfsOptions("0700", size) + fmt.Sprintf(",uid=%d,gid=%d", uid, uid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("the workspace's filesystem (a tmpfs of %d bytes on %s): %w", size, dir, err)
	}
	return nil
}

// RemoveWorkspace removes a workspace: its filesystem first, where it has
// one of its own (a process of the run still in it keeps it until it
// ends, detached from DATA).
func RemoveWorkspace(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("unmounting the workspace %s: %w", dir, err)
	}
	return RemoveAll(dir)
}

// RemoveAll is os.RemoveAll of dir, whose folders may be of mode 0 (an
// overlay's work folder, made so by the kernel): those are made the
// owner's again first.
func RemoveAll(dir string) error {
	if os.RemoveAll(dir) == nil {
		return nil
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// SweepWorkspaces unmounts the workspaces' filesystems left below work
// (DATA/work) by an oxiosd that did not stop cleanly, and removes what
// is left of execs' workspaces (exec-*): a run's is removed with its
// record. It returns how many filesystems it unmounted.
func SweepWorkspaces(work string) (int, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if !strings.HasPrefix(mp, work+"/") {
			continue
		}
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
			continue
		}
		n++
	}
	agents, _ := os.ReadDir(work)
	for _, a := range agents {
		execs, _ := filepath.Glob(filepath.Join(work, a.Name(), "exec-*"))
		for _, e := range execs {
			if err := os.RemoveAll(e); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return n, errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
