package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	seccomparch "github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// landlockABI is the kernel's Landlock ABI version, 0 without Landlock.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// landlockRestrict is the second wall, inside the new root: read and
// execute on the system folders, read on /proc, read-write on the
// scratch folders, /dev and the spec's read-write binds; nothing else;
// and no abstract Unix socket or signal across the run's edge.
// BestEffort: a kernel with an older ABI enforces what it knows.
func landlockRestrict(s *Spec) error {
	ro := append([]string(nil), SystemDirs...)
	ro = append(ro, "/proc")
	if exe, err := os.Executable(); err == nil {
		ro = append(ro, filepath.Dir(exe))
	}
	rw := []string{"/tmp", "/var/tmp", "/run", "/dev/shm"}
	var roFiles, rwFiles []string
	if s.Overlay != nil {
		rw = append(rw, WorkDir)
	}
	for _, b := range s.Binds {
		fi, err := os.Stat(b.Path) // inside: after the pivot
		if err != nil {
			continue
		}
		switch {
		case fi.IsDir() && b.RW:
			rw = append(rw, b.Path)
		case fi.IsDir():
			ro = append(ro, b.Path)
		case b.RW:
			rwFiles = append(rwFiles, b.Path)
		default:
			roFiles = append(roFiles, b.Path)
		}
	}
	rwFiles = append(rwFiles, "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
	// The paths of V5 and, from ABI 6, the scopes: an abstract Unix
	// socket made outside the run's own domain cannot be connected to
	// from it (another run's, even of the same agent: each shim makes a
	// domain of its own), nor can a process outside it be signalled.
	// Not V6's network rights: the network is a namespace's business.
	cfg := landlock.V6
	cfg.HandledAccessNet = 0
	return cfg.BestEffort().Restrict(
		// Listing / shows what the mount namespace holds, nothing more.
		landlock.PathAccess(landlock.AccessFSSet(ll.AccessFSReadDir), "/"),
		landlock.RODirs(ro...).IgnoreIfMissing(),
		landlock.RWDirs(rw...).IgnoreIfMissing(),
		landlock.ROFiles(roFiles...).IgnoreIfMissing(),
		landlock.RWFiles(rwFiles...).WithIoctlDev().IgnoreIfMissing(),
	)
}

func seccompSupported() bool { return seccomp.Supported() }

// Denied are the calls a confined program never needs: changing mounts
// and namespaces, reaching into other processes, loading code into the
// kernel, keyrings, BPF, perf, io_uring (whose rings make calls seccomp
// never sees), the clock and the machine itself. They fail with EPERM.
var Denied = []string{
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"keyctl", "add_key", "request_key",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at", "name_to_handle_at",
	"reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "quotactl_fd", "iopl", "ioperm", "uselib", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"lookup_dcookie", "nfsservctl",
}

// nsFlags are the clone flags that make namespaces.
const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// policy is the seccomp filter's list: Denied fail with EPERM; clone with
// a namespace flag too; clone3, whose flags a filter cannot read, with
// ENOSYS, so that libc falls back to clone; the rest is allowed. (A
// sandbox has no terminal: TIOCSTI has nothing to type into.)
//
// A list of what is refused, not of what is allowed (Docker's profile
// is an allowlist of some 370 calls): a run builds and runs what it
// likes (compilers, Node, Python, their test suites), and a call that a
// new kernel adds and an allowlist lacks would break them with ENOSYS;
// what a run must not reach is the kernel's shared objects and other
// processes, and those calls are few and named here. What makes a
// denylist sound is that it cannot be walked around: see filter.
func policy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Names: Denied, Action: seccomp.ActionErrno},
			{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
			{NamesWithCondtions: []seccomp.NameWithConditions{
				{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: nsFlags}}},
			}, Action: seccomp.ActionErrno},
		},
	}
}

// retKillProcess is SECCOMP_RET_KILL_PROCESS: the whole process dies of
// SIGSYS.
const retKillProcess = 0x80000000

// filter is the program the kernel runs on each call: first a guard that
// kills the process making a call through any other entry than the
// native one (i386's int $0x80 or sysenter and x32's numbers on x86-64,
// arm32's on arm64), then the library's program for policy.
//
// The guard is ours because the library's program, for a call of an
// architecture it was not built for, jumps to the policy's default
// action: with a list of refusals, that is Allow, and the 32-bit entry
// reached every call Denied names (unshare(CLONE_NEWUSER) gave a full
// capability set). x32's calls (x86-64's arch value, numbers with bit 30
// set), which the library answers ENOSYS, are killed alike. A kill, not
// an error: no
// program of a 64-bit run makes 32-bit calls by mistake, so one that does
// is an attack, and the run's end by SIGSYS is on its record and in the
// audit log, with its agent and run.
func filter() ([]bpf.Instruction, error) {
	info, err := seccomparch.GetInfo("")
	if err != nil {
		return nil, err
	}
	p := policy()
	prog, err := p.Assemble()
	if err != nil {
		return nil, err
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: retKillProcess},
	}
	if info.ID == seccomparch.X86_64.ID {
		// x32 shares x86-64's arch value: its calls have bit 30 set.
		guard = append(guard,
			bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(seccomparch.X32.SeccompMask), SkipFalse: 1},
			bpf.RetConstant{Val: retKillProcess},
		)
	}
	return append(guard, prog...), nil
}

// loadSeccomp installs filter on every thread of the process (TSYNC),
// with no_new_privs.
func loadSeccomp() error {
	insts, err := filter()
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return err
	}
	fs := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		fs[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(fs)), Filter: &fs[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(fs)
	if errno != 0 {
		return errno
	}
	return nil
}
