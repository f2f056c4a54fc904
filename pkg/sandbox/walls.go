package sandbox

import (
	"os"
	"path/filepath"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
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
// scratch folders, /dev and the spec's read-write binds; nothing else.
// BestEffort: a kernel with an older ABI enforces what it knows.
func landlockRestrict(s *Spec) error {
	ro := append([]string(nil), SystemDirs...)
	ro = append(ro, "/proc")
	if exe, err := os.Executable(); err == nil {
		ro = append(ro, filepath.Dir(exe))
	}
	rw := []string{"/tmp", "/var/tmp", "/run", "/dev/shm"}
	var roFiles, rwFiles []string
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
	return landlock.V5.BestEffort().RestrictPaths(
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
// kernel, keyrings, BPF, perf, the clock and the machine itself. They
// fail with EPERM.
var Denied = []string{
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns",
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	"bpf", "perf_event_open", "userfaultfd",
	"keyctl", "add_key", "request_key",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at", "name_to_handle_at",
	"reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "iopl", "ioperm", "uselib", "vhangup",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"lookup_dcookie", "nfsservctl",
}

// nsFlags are the clone flags that make namespaces.
const nsFlags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// policy is the seccomp filter: Denied fail with EPERM; clone with a
// namespace flag too; clone3, whose flags a filter cannot read, with
// ENOSYS, so that libc falls back to clone; the rest is allowed. (A
// sandbox has no terminal: TIOCSTI has nothing to type into.)
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

func loadSeccomp() error {
	return seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy()})
}
