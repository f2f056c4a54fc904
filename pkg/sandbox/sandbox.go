// Package sandbox puts the processes of agent runs and execs in a world of
// their own (issue 17): an unprivileged uid of their own with no
// capabilities and no_new_privs, a mount namespace whose root is an empty
// tmpfs with only the system folders (read-only), the workspace
// (read-write) and what the policy grants bound into it, so that oxiosd's
// data directory does not exist there; a pid namespace (no other process
// can be seen or signalled), an IPC and UTS namespace, a network
// namespace with only a loopback unless the network is granted, a seccomp
// filter against the calls a confined program never needs, and Landlock
// where the kernel has it as a second wall.
//
// oxiosd starts a run as its own executable re-run under the name
// InitName (the shim, in the new namespaces and still root there): the
// shim builds the root, pivots into it, drops every privilege, installs
// Landlock and seccomp, then starts the command as its child and stays as
// the namespace's init, reaping orphans. When the command exits the shim
// reports how on a pipe and exits, and the kernel kills whatever is left
// in the pid namespace: nothing of a run outlives it, however it forked.
//
// The standard library does the namespaces (clone flags); the shim is
// ours rather than bubblewrap's because the sandbox needs the per-run
// uid, the cgroup join of package supervisor before the fork, and
// Landlock, which bubblewrap does not do, so a shim was needed either
// way, and oxiosd then needs no package at run time.
package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RaceEnv is what a race-built oxiosd adds to the environment of what it
// starts: its own GORACE (see race.go). Nil in other builds.
var RaceEnv []string

// InitName is the argv[0] under which oxiosd's executable runs as the
// sandbox's shim. A binary that starts sandboxes calls Main first thing.
const InitName = "oxios-sandbox-init"

// specEnv carries the Spec to the shim.
const specEnv = "OXIOS_SANDBOX_SPEC"

// Bind is a path of the host made visible at Path inside: the host's Src,
// or the host's Path when Src is empty.
type Bind struct {
	Path string `json:"path"`
	Src  string `json:"src,omitempty"`
	RW   bool   `json:"rw,omitempty"`
	// Optional binds are skipped when the path does not exist.
	Optional bool `json:"optional,omitempty"`
	// Mkdir makes a missing source folder (an optional bind).
	Mkdir bool `json:"mkdir,omitempty"`
	// Tmpfs, when not 0, mounts a tmpfs of that many bytes at Path,
	// owned by the sandbox's uid, instead of binding a source: the
	// workspace of a rootless sandbox (Spec.UserNS), whose size only a
	// filesystem made inside its namespaces can bound.
	Tmpfs uint64 `json:"tmpfs,omitempty"`
}

// Spec is one sandboxed process.
type Spec struct {
	// Root is an empty folder only root can reach (DATA/sandbox), on which
	// the shim mounts the tmpfs it builds the new root in.
	Root string   `json:"root"`
	UID  uint32   `json:"uid"`
	GID  uint32   `json:"gid"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	// Dir is where the command starts (the workspace).
	Dir string `json:"dir"`
	// Binds: the workspace, the socket, the agent's folder of the mount,
	// the policy's extra paths. The system folders are added by the shim.
	Binds []Bind `json:"binds"`
	// Net keeps the host's network (no network namespace).
	Net bool `json:"net,omitempty"`
	// UserNS makes the sandbox in a user namespace of its own, for an
	// oxiosd that does not run as root (Features.Rootless): UID and GID
	// inside map to oxiosd's own outside, the only ids an ordinary user
	// may map. The shim holds CAP_SYS_ADMIN and CAP_SETPCAP in that
	// namespace alone, to build the root, and drops them before the
	// command.
	UserNS bool `json:"userns,omitempty"`
	// Serve: the shim, once the command has started, starts the execs
	// oxiosd asks of it on fd 4 (ServeFD, see serve.go) inside the
	// sandbox, as processes of the run: how a rootless run's execs reach
	// its workspace, which is a filesystem of its mount namespace alone.
	Serve bool `json:"serve,omitempty"`
	// NoLandlock, NoSeccomp leave those layers out (the machine lacks
	// them and the policy lets runs start with less).
	NoLandlock bool `json:"no_landlock,omitempty"`
	NoSeccomp  bool `json:"no_seccomp,omitempty"`
	// Disk is the size of the workspace (0: no limit of its own): the
	// caller mounts it (MountWorkspace) when oxiosd is root.
	Disk uint64 `json:"disk,omitempty"`
	// Overlay, when not nil, is a host folder shown at WorkDir through an
	// overlay whose changes land in the workspace (--work, issue 48).
	Overlay *Overlay `json:"overlay,omitempty"`
	// Tmp is the size of the one tmpfs that holds /tmp, /var/tmp, /run
	// and /dev/shm (0: the kernel's default, half of RAM).
	Tmp uint64 `json:"tmp,omitempty"`
	// Rlimits are set by the shim on itself before it starts the
	// command, which inherits them. Set from outside (prlimit) they
	// would race the shim's change of uid: once it runs as the agent's
	// uid, only a daemon with CAP_SYS_RESOURCE may limit it, and a root
	// without it (a container's) got EPERM whenever the shim was faster.
	Rlimits []Rlimit `json:"rlimits,omitempty"`
}

// Rlimit is one resource limit (soft and hard alike) of a sandbox.
type Rlimit struct {
	Resource int    `json:"resource"` // unix.RLIMIT_*
	Max      uint64 `json:"max"`
}

// WorkDir is where a sandbox shows its workspace (and starts, and has its
// HOME): a path of its own, so that no folder of oxiosd's data directory
// exists in a sandbox, not even the workspace's parents.
const WorkDir = "/work"

// SystemDirs are bound read-only into every sandbox (those that exist).
var SystemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"}

// Cloneflags are the namespaces a sandbox gets (CLONE_NEWNET unless the
// network is granted).
func Cloneflags(net bool) uintptr {
	f := uintptr(unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP)
	if !net {
		f |= unix.CLONE_NEWNET
	}
	return f
}

// Cmd is the shim's command line and attributes for spec: the caller sets
// stdio, adds the status pipe as its first extra file (fd 3), and starts
// it.
func Cmd(spec *Spec) (path string, argv, env []string, attr *syscall.SysProcAttr, err error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", nil, nil, nil, err
	}
	exe, err := initPath()
	if err != nil {
		return "", nil, nil, nil, err
	}
	attr = &syscall.SysProcAttr{Setpgid: true, Cloneflags: Cloneflags(spec.Net)}
	if spec.UserNS {
		userNS(attr, spec.UID, spec.GID)
		if spec.Overlay != nil {
			// The overlay works in its upper layer with the creds of
			// who mounted it, the shim's: its work folder is mode 0 and
			// copies up keep their owner, so it needs what root has
			// over files, in its user namespace only, for the run's
			// life (the command itself has none of it).
			attr.AmbientCaps = append(attr.AmbientCaps, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_CHOWN, unix.CAP_FSETID)
		}
	}
	// One P and no collector: the shim allocates little and lives on as
	// a waiting init; the command gets spec.Env, not these.
	env = append([]string{specEnv + "=" + string(b), "GOMAXPROCS=1", "GOGC=off"}, RaceEnv...)
	return exe, []string{InitName}, env, attr, nil
}

// userNS makes attr start its process in a user namespace of its own, as
// uid and gid inside, which are oxiosd's own ids outside, with the
// capabilities the shim needs to build the sandbox in it (in that
// namespace only: outside it has none of oxiosd's rights but its ids).
func userNS(attr *syscall.SysProcAttr, uid, gid uint32) {
	attr.Cloneflags |= unix.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(uid), HostID: os.Getuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(gid), HostID: os.Getgid(), Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
}

// initPath is the shim: the small program InitName beside the running
// executable (it starts in about a third of oxiosd's start), or the
// running executable itself, which then must call Main first.
func initPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(exe), InitName)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return p, nil
	}
	return exe, nil
}

// Source is the host's path of the bind.
func (b Bind) Source() string {
	if b.Src != "" {
		return b.Src
	}
	return b.Path
}

// Status is how a sandboxed command ended, as the shim reports it on the
// status pipe.
type Status struct {
	Exited bool
	Code   int
	Signal syscall.Signal
	// Err is why the command did not start (the sandbox could not be
	// built, or the program not run).
	Err string
}

// readLine reads one line of the status pipe, a byte at a time: what
// follows is for the next reader.
func readLine(f *os.File) string {
	var b []byte
	c := make([]byte, 1)
	for len(b) < 4096 {
		n, err := f.Read(c)
		if n == 1 {
			if c[0] == '\n' {
				break
			}
			b = append(b, c[0])
		}
		if err != nil {
			break
		}
	}
	return string(b)
}

// WaitStarted waits until the shim has started the command (its sandbox
// is built: a signal sent to the run from now on reaches the command). If
// it did not, it returns the shim's report, which ReadStatus then gives.
func WaitStarted(f *os.File) (ok bool, report string) {
	line := readLine(f)
	if strings.HasPrefix(line, "started ") {
		return true, ""
	}
	return false, line
}

// ReadStatus reads the shim's report from the read end of its status
// pipe, once the shim has exited; pending is a report WaitStarted
// returned, if any.
func ReadStatus(f *os.File, pending ...string) Status {
	var line string
	if len(pending) > 0 && pending[0] != "" {
		line = pending[0]
	} else {
		line = readLine(f)
		for strings.HasPrefix(line, "started ") {
			line = readLine(f)
		}
	}
	line = strings.TrimSpace(line)
	verb, arg, _ := strings.Cut(line, " ")
	switch verb {
	case "exit":
		n, _ := strconv.Atoi(arg)
		return Status{Exited: true, Code: n}
	case "signal":
		n, _ := strconv.Atoi(arg)
		return Status{Signal: syscall.Signal(n)}
	case "error":
		return Status{Err: arg}
	}
	return Status{Err: "the sandbox's init ended without a report"}
}

// Features is what the machine offers for sandboxes.
type Features struct {
	// Namespaces: oxiosd may make mount, pid, net, IPC and UTS namespaces
	// for runs: as root, with a uid of their own on the host; rootless,
	// inside a user namespace of their own.
	Namespaces bool `json:"namespaces"`
	// Rootless: oxiosd is not root, and makes each sandbox in an
	// unprivileged user namespace (every run is oxiosd's user outside).
	Rootless bool `json:"rootless,omitempty"`
	Seccomp  bool `json:"seccomp"`
	// Landlock is the Landlock ABI version, 0 when the kernel has none.
	Landlock int `json:"landlock"`
	// Missing says what is missing and why, for the log and ox-status.
	Missing []string `json:"missing,omitempty"`
}

// String is the features for the log: "namespaces seccomp landlock/7".
func (f Features) String() string {
	var s []string
	if f.Namespaces {
		s = append(s, "namespaces")
		if f.Rootless {
			s = append(s, "rootless")
		}
	}
	if f.Seccomp {
		s = append(s, "seccomp")
	}
	if f.Landlock > 0 {
		s = append(s, "landlock/"+strconv.Itoa(f.Landlock))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}

// Full reports whether every layer is there.
func (f Features) Full() bool { return f.Namespaces && f.Seccomp && f.Landlock > 0 }

// Probe finds what the machine offers. Namespaces are tried for real, in
// a child (/bin/true in every namespace a sandbox uses), since a container
// may forbid them even to root, and a kernel or AppArmor may forbid
// unprivileged user namespaces to an ordinary user.
func Probe() Features {
	var f Features
	attr := &syscall.SysProcAttr{Cloneflags: Cloneflags(false)}
	if os.Geteuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: FirstUID, Gid: FirstUID, NoSetGroups: false}
	} else {
		f.Rootless = true
		userNS(attr, FirstUID, FirstUID)
	}
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{Sys: attr})
	if err == nil {
		var st *os.ProcessState
		st, err = p.Wait()
		if err == nil && !st.Success() {
			err = fmt.Errorf("/bin/true: %s", st)
		}
	}
	switch {
	case err == nil:
		f.Namespaces = true
	case f.Rootless:
		f.Rootless = false
		f.Missing = append(f.Missing, "namespaces: oxiosd does not run as root, and the kernel refuses it an unprivileged user namespace ("+err.Error()+"): "+UserNSHint())
	default:
		f.Missing = append(f.Missing, "namespaces: "+err.Error())
	}
	if seccompSupported() {
		f.Seccomp = true
	} else {
		f.Missing = append(f.Missing, "seccomp: the kernel has no seccomp filters")
	}
	f.Landlock = landlockABI()
	switch {
	case f.Landlock == 0:
		f.Missing = append(f.Missing, "landlock: the kernel has no Landlock (or it is not among the LSMs enabled at boot)")
	case f.Landlock < 6:
		f.Missing = append(f.Missing, fmt.Sprintf("landlock/%d: abstract Unix sockets and signals are not scoped: runs granted the network can reach each other's abstract sockets (ABI 6, Linux 6.12, scopes them)", f.Landlock))
	}
	return f
}

// The uids of sandboxes: a range no user of the machine has, from which
// each run (and each exec outside a run) takes one of its own while it
// lives.
const (
	FirstUID = 1_900_000_000
	UIDs     = 1 << 20
)

// IsSandboxUID reports whether uid is one oxiosd gives sandboxes: a peer
// with such a uid is a sandboxed process, never the admin.
func IsSandboxUID(uid uint32) bool { return uid >= FirstUID && uid < FirstUID+UIDs }

// PrepareRoot makes dir, the folder the shims build their roots on.
func PrepareRoot(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// Chown gives a workspace to a sandbox's uid.
func Chown(dir string, uid uint32) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(uid), int(uid))
	})
}
