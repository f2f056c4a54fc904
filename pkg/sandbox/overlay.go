package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Overlay shows a host folder at WorkDir through the kernel's overlayfs
// (issue 48): Lower, the host's folder, read-only below; Upper and Work,
// folders of the run's workspace (on its own size-limited filesystem
// when oxiosd is root), above, where every change the run makes lands.
// The host folder does not change while the run works; what it changed
// is read from Upper once it has exited (package work).
//
// When oxiosd is root the run's uid is not the owner of the host's
// files, so the lower layer is an idmapped mount of Lower in which its
// owner (UID, GID) is the run's own: the run edits the project's files
// as their owner would, and its copies up are its own. A lower whose
// filesystem refuses idmapped mounts is taken as it is (what only the
// owner may write, the run may not). Rootless, the user namespace maps
// oxiosd's user, the owner of what it may give, to the run's uid already.
type Overlay struct {
	Lower string `json:"lower"`
	Upper string `json:"upper"`
	Work  string `json:"work"`
	UID   uint32 `json:"uid"`
	GID   uint32 `json:"gid"`
	// Size, rootless (in a user namespace, where oxiosd can mount
	// nothing on DATA), puts Upper and Work on a tmpfs of that many bytes
	// (the run's or the exec's limits.disk) the shim makes, so that
	// --work obeys the disk limit as it does as root. oxiosd reaches that
	// tmpfs once the command has exited through the folder the shim sends
	// it on the socket at fd ServeFD (Execs.Upper): a run's is the one of
	// its execs; an exec's shim (Spec.Serve false) is given one for this
	// alone (ServePair), sends and closes it. The folder keeps the tmpfs
	// until oxiosd closes it.
	Size uint64 `json:"size,omitempty"`
	// IdmapFD, when not 0, is the shim's fd of an open user namespace in
	// which UID and GID are the sandbox's ids (IdmapMaker), which oxiosd
	// made ahead of the run, so that the shim need not make one
	// (idmapUserNS, a process of its own: most of what --work adds to a
	// run's start). The shim closes it once the lower is mapped.
	IdmapFD int `json:"idmap_fd,omitempty"`
}

// upperFD is the shim's open folder of the tmpfs of a rootless
// overlay's upper layer (Overlay.Size), -1 for none: sent to oxiosd.
// upperOnData: the overlay refused that tmpfs, and its upper layer is
// the one the spec named, on DATA's disk, which oxiosd is told instead.
var (
	upperFD     = -1
	upperOnData bool
)

// sendUpper tells oxiosd, on fd (the socket at ServeFD), where the upper
// layer of a rootless overlay of Size is: the folder of its tmpfs, sent
// open (in flight it keeps the tmpfs even if the shim ends before oxiosd
// reads it), or, with no file, the spec's folder on DATA's disk.
func sendUpper(fd int) error {
	var rights []byte
	switch {
	case upperFD >= 0:
		rights = unix.UnixRights(upperFD)
	case !upperOnData:
		return nil
	}
	b, _ := json.Marshal(ExecReply{Upper: true})
	if err := unix.Sendmsg(fd, b, rights, nil, 0); err != nil {
		return fmt.Errorf("sending the work's upper layer to oxiosd: %w", err)
	}
	return nil
}

// upperOnTmpfs makes the tmpfs of o's upper and work folders at
// root/.upper, keeps it open in upperFD, points o at it, and returns how
// to detach it once the overlay is mounted (the overlay keeps its own
// reference). An error leaves o as it was.
func upperOnTmpfs(o *Overlay, root string, uid, gid uint32) (func(), error) {
	dir := filepath.Join(root, ".upper")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	opts := tmpfsOptions("0700", o.Size) + fmt.Sprintf(",uid=%d,gid=%d", uid, gid)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("a tmpfs of %d bytes for the upper layer: %w", o.Size, err)
	}
	for _, sub := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			unix.Unmount(dir, unix.MNT_DETACH)
			os.Remove(dir)
			return nil, err
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
		os.Remove(dir)
		return nil, err
	}
	upperFD = fd
	o.Upper, o.Work = filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	return func() {
		unix.Unmount(dir, unix.MNT_DETACH)
		os.Remove(dir)
	}, nil
}

// idmapName is the argv[0] of the helper whose user namespace maps a
// lower folder's owner to the run's uid: it waits for its stdin to close.
const idmapName = "oxios-sandbox-idmap"

// idmapMain is the helper: it holds its user namespace until told.
func idmapMain() {
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// OverlayOptions are the mount options of o's overlay: in a user
// namespace its xattrs are user.overlay.* (userxattr); as root, renamed
// folders and metadata-only copies up are off, so that the upper layer
// holds only whole files, whiteouts and opaque folders, which is all
// package work reads.
func OverlayOptions(o *Overlay, lower string, userNS bool) string {
	opts := "lowerdir=" + escapeOpt(lower) + ",upperdir=" + escapeOpt(o.Upper) + ",workdir=" + escapeOpt(o.Work)
	if userNS {
		return opts + ",userxattr"
	}
	return opts + ",redirect_dir=off,metacopy=off,index=off"
}

// escapeOpt escapes what the overlay's option parser splits on.
func escapeOpt(p string) string {
	return strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`).Replace(p)
}

// mountOverlay mounts s.Overlay at WorkDir inside root, over the
// workspace's bind (which Landlock's rules name).
func mountOverlay(root string, s *Spec) error {
	o := s.Overlay
	dst := filepath.Join(root, WorkDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	lower := o.Lower
	if !s.UserNS {
		aside := filepath.Join(root, ".lower")
		ok, err := idmapLower(o, aside, s.UID, s.GID, root)
		if err != nil {
			return err
		}
		if ok {
			lower = aside
			defer func() {
				unix.Unmount(aside, unix.MNT_DETACH)
				os.Remove(aside)
			}()
		}
	}
	if s.UserNS && o.Size > 0 {
		// Its own bounded filesystem; if the kernel's overlay will not
		// take it (a tmpfs without user xattrs, before Linux 6.6), the
		// upper layer stays on DATA's disk, as it is said, and oxiosd is
		// told so (sendUpper).
		host := *o
		detach, err := upperOnTmpfs(o, root, s.UID, s.GID)
		if err == nil {
			err = unix.Mount("overlay", dst, "overlay", unix.MS_NOSUID|unix.MS_NODEV, OverlayOptions(o, lower, s.UserNS))
			detach()
			if err == nil {
				return nil
			}
			unix.Close(upperFD)
			upperFD = -1
		}
		*o = host
		upperOnData = true
		fmt.Fprintf(os.Stderr, "oxios sandbox: --work: the upper layer is on DATA's disk, not bounded by limits.disk: %v\n", err)
	}
	if err := unix.Mount("overlay", dst, "overlay", unix.MS_NOSUID|unix.MS_NODEV, OverlayOptions(o, lower, s.UserNS)); err != nil {
		return fmt.Errorf("the overlay of %s at %s: %w", o.Lower, WorkDir, err)
	}
	return nil
}

// idmapLower mounts at aside an idmapped clone of o.Lower in which
// o.UID and o.GID are uid and gid. It reports false, with no error, when
// Lower's filesystem refuses idmapped mounts.
func idmapLower(o *Overlay, aside string, uid, gid uint32, root string) (bool, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, o.Lower, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return false, fmt.Errorf("the work folder %s: %w", o.Lower, err)
	}
	defer unix.Close(fd)
	var ns int
	if o.IdmapFD > 0 {
		ns = o.IdmapFD
		defer unix.Close(ns)
	} else {
		var done func()
		ns, done, err = idmapUserNS(o.UID, o.GID, uid, gid, root)
		if err != nil {
			return false, err
		}
		defer done()
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(ns)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		if err == unix.EINVAL || err == unix.EPERM || err == unix.EOPNOTSUPP {
			return false, nil
		}
		return false, fmt.Errorf("idmapping %s: %w", o.Lower, err)
	}
	if err := os.Mkdir(aside, 0o700); err != nil {
		return false, err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, aside, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return false, fmt.Errorf("mounting the idmapped %s: %w", o.Lower, err)
	}
	return true, nil
}

// idmapUserNS returns an open user namespace in which host ids
// (fromUID, fromGID) are (toUID, toGID), as the shim makes it when
// oxiosd gave it none (Overlay.IdmapFD): userNSOf in the shim's pid
// namespace, whose /proc is root's.
func idmapUserNS(fromUID, fromGID, toUID, toGID uint32, root string) (int, func(), error) {
	// Go writes the helper's id maps through /proc/PID, PID being of
	// the shim's pid namespace: its own procfs (root's) is put over the
	// host's for as long, in the shim's mount namespace.
	if err := unix.Mount(filepath.Join(root, "proc"), "/proc", "", unix.MS_BIND, ""); err != nil {
		return -1, nil, fmt.Errorf("the idmap helper's /proc: %w", err)
	}
	defer unix.Unmount("/proc", unix.MNT_DETACH)
	return userNSOf(fromUID, fromGID, toUID, toGID)
}

// userNSOf returns an open user namespace in which host ids (fromUID,
// fromGID) are (toUID, toGID), made by a helper that done reaps. The
// helper is true(1), which exits at once: a process that has exited and
// is not yet reaped keeps its user namespace, which is opened then (a Go
// helper that waits costs a runtime's start, tens of milliseconds of
// every run on a loaded machine); without true, the running executable,
// which waits (it calls Main).
func userNSOf(fromUID, fromGID, toUID, toGID uint32) (int, func(), error) {
	exe, args := "", []string{idmapName}
	for _, p := range []string{"/bin/true", "/usr/bin/true"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			exe, args = p, []string{"true"}
			break
		}
	}
	if exe == "" {
		var err error
		if exe, err = initPath(); err != nil {
			return -1, nil, err
		}
	}
	cmd := &exec.Cmd{Path: exe, Args: args, Env: []string{"GOMAXPROCS=1", "GOGC=off"}}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: int(fromUID), HostID: int(toUID), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: int(fromGID), HostID: int(toGID), Size: 1}},
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return -1, nil, err
	}
	if err := cmd.Start(); err != nil {
		return -1, nil, fmt.Errorf("the idmap helper: %w", err)
	}
	done := func() {
		in.Close()
		cmd.Wait()
	}
	ns, err := unix.Open(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "ns", "user"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		done()
		return -1, nil, fmt.Errorf("the idmap helper's user namespace: %w", err)
	}
	return ns, func() { unix.Close(ns); done() }, nil
}
