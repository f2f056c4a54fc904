package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// Main runs the shim when the process was started as InitName, and
// returns otherwise. A binary that starts sandboxes calls it before
// anything else.
func Main() {
	if len(os.Args) > 0 && os.Args[0] == idmapName {
		idmapMain()
	}
	if len(os.Args) > 0 && os.Args[0] == idmapsName {
		idmapsMain()
	}
	if len(os.Args) == 0 || os.Args[0] != InitName {
		return
	}
	// One thread builds the sandbox and forks the command: what is set
	// per thread (no_new_privs) is set on the one that forks.
	runtime.LockOSThread()
	status := os.NewFile(3, "status")
	fail := func(err error) {
		fmt.Fprintf(status, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintf(os.Stderr, "oxios sandbox: %v\n", err)
		os.Exit(126)
	}
	// Signals from the start: one that would end the command and comes
	// before it runs (the supervisor signals the process group, which is
	// only the shim until then) ends the run as it would have ended it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	var spec Spec
	if err := json.Unmarshal([]byte(os.Getenv(specEnv)), &spec); err != nil {
		fail(fmt.Errorf("reading the spec: %w", err))
	}
	os.Unsetenv(specEnv)
	unix.CloseOnExec(3)
	if spec.Overlay != nil && spec.Overlay.IdmapFD > 0 {
		unix.CloseOnExec(spec.Overlay.IdmapFD)
	}
	if err := build(&spec); err != nil {
		fail(err)
	}
	if !spec.Serve && spec.UserNS && spec.Overlay != nil && spec.Overlay.Size > 0 {
		// An exec's shim: fd ServeFD is only for its upper layer.
		if err := sendUpper(ServeFD); err != nil {
			fail(err)
		}
		unix.Close(ServeFD)
		if upperFD >= 0 {
			unix.Close(upperFD)
			upperFD = -1
		}
	}
	if err := confine(&spec); err != nil {
		fail(err)
	}
	// The limits last, right before the command that inherits them: the
	// shim's own work is done (a small address space would bind its Go
	// runtime too), and lowering a limit needs no privilege.
	for _, l := range spec.Rlimits {
		if err := unix.Setrlimit(l.Resource, &unix.Rlimit{Cur: l.Max, Max: l.Max}); err != nil {
			fail(fmt.Errorf("setting resource limit %d to %d: %w", l.Resource, l.Max, err))
		}
	}
	select {
	case s := <-sigs:
		if sig := s.(syscall.Signal); sig != syscall.SIGPIPE {
			fmt.Fprintf(status, "signal %d\n", int(sig))
			os.Exit(128 + int(sig))
		}
	default:
	}
	// From here the shim, the namespace's init, only waits: the command
	// gets the run's signals itself (it is in the shim's process group,
	// and the supervisor signals the run's cgroup too).
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %v", spec.Argv[0], pe.Err)
		}
		fmt.Fprintf(status, "error %s\n", err)
		fmt.Fprintf(os.Stderr, "oxios sandbox: %v\n", err)
		if errors.Is(err, syscall.ENOENT) {
			os.Exit(127)
		}
		os.Exit(126)
	}
	os.Stdin.Close()
	leader := cmd.Process.Pid
	fmt.Fprintf(status, "started %d\n", leader)
	var srv *server
	if spec.Serve {
		srv = serve(os.NewFile(ServeFD, "serve"), &spec)
	}
	// Reap every child (orphans re-parent to init) until the command ends.
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			fmt.Fprintf(status, "error waiting: %v\n", err)
			os.Exit(126)
		}
		if pid != leader {
			srv.reaped(pid, ws)
			continue
		}
		switch {
		case ws.Signaled():
			fmt.Fprintf(status, "signal %d\n", int(ws.Signal()))
			os.Exit(128 + int(ws.Signal()))
		case ws.Exited():
			fmt.Fprintf(status, "exit %d\n", ws.ExitStatus())
			os.Exit(ws.ExitStatus())
		}
	}
}

// build makes the new root: a tmpfs with the system folders read-only, a
// /proc of the pid namespace, a minimal /dev, an empty /tmp, and the
// spec's binds at their own paths; then pivots into it.
func build(s *Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	root := s.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("tmpfs root: %w", err)
	}
	for _, d := range SystemDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			t, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(t, filepath.Join(root, d)); err != nil {
				return err
			}
			continue
		}
		if err := bind(root, d, d, false); err != nil {
			return err
		}
	}
	if err := mkdirAll(root, "/proc"); err != nil {
		return err
	}
	if err := unix.Mount("proc", filepath.Join(root, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mounting /proc: %w", err)
	}
	if err := buildDev(root); err != nil {
		return err
	}
	if err := scratch(root, s.Tmp); err != nil {
		return err
	}
	// Shallow paths first: a bind below another is made after it.
	binds := append([]Bind(nil), s.Binds...)
	// The executable's folder: the ox-* commands of the same build.
	if exe, err := os.Executable(); err == nil {
		if dir := filepath.Dir(exe); !underAny(dir, SystemDirs) {
			binds = append(binds, Bind{Path: dir})
		}
	}
	sort.SliceStable(binds, func(i, j int) bool {
		return strings.Count(binds[i].Path, "/") < strings.Count(binds[j].Path, "/")
	})
	for _, b := range binds {
		if b.Tmpfs > 0 {
			if err := mkdirAll(root, b.Path); err != nil {
				return err
			}
			opts := tmpfsOptions("0700", b.Tmpfs) + fmt.Sprintf(",uid=%d,gid=%d", s.UID, s.GID)
			if err := unix.Mount("tmpfs", filepath.Join(root, b.Path), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
				return fmt.Errorf("the workspace's filesystem (a tmpfs of %d bytes at %s): %w", b.Tmpfs, b.Path, err)
			}
			continue
		}
		if _, err := os.Stat(b.Source()); err != nil && b.Optional {
			// An agent's folder of the mount appears with its first
			// key; made here, it is there from the start.
			if !b.Mkdir || os.Mkdir(b.Source(), 0o755) != nil {
				continue
			}
		}
		if err := bind(root, b.Source(), b.Path, b.RW); err != nil {
			return err
		}
	}
	if s.Overlay != nil {
		if err := mountOverlay(root, s); err != nil {
			return err
		}
	}
	if err := os.Mkdir(filepath.Join(root, ".oldroot"), 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, filepath.Join(root, ".oldroot")); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the old root: %w", err)
	}
	if err := os.Remove("/.oldroot"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("making / read-only: %w", err)
	}
	if err := unix.Sethostname([]byte("oxios")); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	return nil
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// mkdirAll makes p inside root.
func mkdirAll(root, p string) error {
	return os.MkdirAll(filepath.Join(root, p), 0o755)
}

// bind mounts the host's p at inside (a path inside root): read-only
// unless rw, never with setuid bits or devices.
func bind(root, p, inside string, rw bool) error {
	fi, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	dst := filepath.Join(root, inside)
	if fi.IsDir() {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(p, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", p, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if !rw {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		// A mount locked with more flags than asked (nosuid, noexec of the
		// host's own mount) keeps them: ask again with them.
		var st unix.Statfs_t
		if serr := unix.Statfs(dst, &st); serr == nil {
			flags |= uintptr(st.Flags) & (unix.MS_NOEXEC | unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
			err = unix.Mount("", dst, "", flags, "")
		}
		if err != nil {
			return fmt.Errorf("bind %s: remount: %w", p, err)
		}
	}
	return nil
}

// buildDev makes a /dev with only the harmless devices of the host.
func buildDev(root string) error {
	dev := filepath.Join(root, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("tmpfs /dev: %w", err)
	}
	for _, d := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		p := "/dev/" + d
		if _, err := os.Stat(p); err != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dev, d), os.O_CREATE|os.O_WRONLY, 0o666)
		if err != nil {
			return err
		}
		f.Close()
		if err := unix.Mount(p, filepath.Join(dev, d), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", p, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return os.Mkdir(filepath.Join(dev, "shm"), 0o1777)
}

// scratch mounts one tmpfs of size bytes and binds a folder of it at
// each of /tmp, /var/tmp, /run and /dev/shm: what a run writes there is
// bounded once for all four (where each was a tmpfs of its own, 832 MiB
// of RAM together), and counts against its memory cgroup. The tmpfs
// itself is mounted aside and detached once bound, so that no folder of
// it shows but those four.
func scratch(root string, size uint64) error {
	aside := filepath.Join(root, ".scratch")
	if err := os.Mkdir(aside, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", aside, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, tmpfsOptions("0755", size)); err != nil {
		return fmt.Errorf("tmpfs for /tmp: %w", err)
	}
	for _, d := range []string{"/tmp", "/var/tmp", "/run", "/dev/shm"} {
		src := filepath.Join(aside, strings.ReplaceAll(d[1:], "/", "-"))
		if err := os.Mkdir(src, 0o777); err != nil {
			return err
		}
		// The mode is set again: Mkdir's is masked by the umask.
		if err := os.Chmod(src, 0o777|os.ModeSticky); err != nil {
			return err
		}
		if err := mkdirAll(root, d); err != nil {
			return err
		}
		if err := unix.Mount(src, filepath.Join(root, d), "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d, err)
		}
	}
	if err := unix.Unmount(aside, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the scratch tmpfs: %w", err)
	}
	return os.Remove(aside)
}

// confine drops every privilege: the capability bounding set, the
// groups, root itself (for the spec's uid), or, in a user namespace,
// the capabilities held in it; then sets no_new_privs and installs
// Landlock and the seccomp filter, on every thread.
func confine(s *Spec) error {
	// Capabilities, their bounding set and no_new_privs are each
	// thread's own: every thread drops them (psx), not only the one that
	// forks the command, since the shim of a run that serves execs
	// (serve.go) forks them from others.
	for c := 0; c <= 63; c++ {
		if err := allThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c)); err != nil && err != unix.EINVAL {
			return fmt.Errorf("dropping capability %d: %w", c, err)
		}
	}
	if s.UserNS {
		// The shim already has the ids of the command (the only ones its
		// user namespace maps), so no change of uid drops what it holds:
		// the ambient set and the capabilities of this thread, the one
		// that forks the command, go by hand. (setgroups is refused in
		// the namespace, and the groups are oxiosd's user's, mapped to
		// nobody.)
		if err := allThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL); err != nil {
			return fmt.Errorf("clearing ambient capabilities: %w", err)
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var none [2]unix.CapUserData
		if _, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&none[0])), 0); e != 0 {
			return fmt.Errorf("dropping capabilities: %w", e)
		}
	} else {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(int(s.GID), int(s.GID), int(s.GID)); err != nil {
			return fmt.Errorf("setresgid: %w", err)
		}
		if err := syscall.Setresuid(int(s.UID), int(s.UID), int(s.UID)); err != nil {
			return fmt.Errorf("setresuid: %w", err)
		}
	}
	if err := allThreadsPrctl(unix.PR_SET_NO_NEW_PRIVS, 1); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	// What is left of root: none (a uid of 0 after this is a bug).
	if os.Geteuid() == 0 || os.Getuid() == 0 {
		return errors.New("still root after dropping privileges")
	}
	if !s.NoLandlock {
		if err := landlockRestrict(s); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if !s.NoSeccomp {
		if err := loadSeccomp(); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}

// allThreadsPrctl is prctl(option, arg, 0, 0, 0) on every thread of the
// shim.
func allThreadsPrctl(option int, arg uintptr) error {
	if _, _, e := psx.Syscall6(unix.SYS_PRCTL, uintptr(option), arg, 0, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}
