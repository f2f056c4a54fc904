package supervisor

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// uids hands out the uids of sandboxes: one per live run (and per exec
// outside a run), never two at once, in turn from a place picked at
// random, so that a uid comes back only after the whole range has been
// used (and daemons side by side rarely pick the same).
type uids struct {
	mu    sync.Mutex
	next  uint32
	taken map[uint32]*Run // nil value: taken by an exec
}

func (u *uids) init() {
	u.next = uint32(rand.IntN(sandbox.UIDs))
	u.taken = map[uint32]*Run{}
}

func (u *uids) acquire(r *Run) uint32 {
	u.mu.Lock()
	defer u.mu.Unlock()
	for {
		uid := sandbox.FirstUID + u.next%sandbox.UIDs
		u.next++
		if _, busy := u.taken[uid]; !busy {
			u.taken[uid] = r
			return uid
		}
	}
}

// give makes uid, taken by none yet (acquire(nil)), run r's.
func (u *uids) give(uid uint32, r *Run) {
	u.mu.Lock()
	u.taken[uid] = r
	u.mu.Unlock()
}

func (u *uids) release(uid uint32) {
	u.mu.Lock()
	delete(u.taken, uid)
	u.mu.Unlock()
}

func (u *uids) run(uid uint32) (*Run, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.taken[uid]
	return r, ok
}

// AcquireUID gives an exec outside a run a sandbox uid of its own;
// ReleaseUID gives it back once the exec has ended.
func (s *Supervisor) AcquireUID() uint32 { return s.uids.acquire(nil) }

// ReleaseUID gives back a uid of AcquireUID.
func (s *Supervisor) ReleaseUID(uid uint32) { s.uids.release(uid) }

// Attribute finds the run a peer (its uid and pid, from SO_PEERCRED or
// a FUSE request) belongs to, in a way the run cannot shake off:
//
//   - a sandbox uid is the run it was given to, and nothing else: a
//     sandboxed process cannot change its uid;
//   - otherwise the run whose process group or process tree the pid is in
//     (an unsandboxed run, which the policy allowed);
//   - otherwise the run whose cgroup the pid is in: a process that left
//     the tree (setsid, a double fork) is still in its run's group.
//
// A peer in a sandbox's uid, in a cgroup of this daemon or in another pid
// namespace that is no live run's is refused (an error): it is a leftover
// of a run or an exec, never the admin. (nil, nil): not a run's.
//
// The mount asks on every request, so /proc is read only while a run or
// exec may have a process left (Cgroups.quiet): with none, no process is
// in a group of ours or in a sandbox's pid namespace (which dies with its
// shim, and every shim is some run's or exec's), and a process of another
// pid namespace is not this daemon's leftover: it is taken by its uid,
// like any other.
func (s *Supervisor) Attribute(uid uint32, pid int32) (*Run, error) {
	if sandbox.IsSandboxUID(uid) {
		r, ok := s.uids.run(uid)
		if !ok || r == nil {
			return nil, proto.Errorf(proto.EACCES, "uid %d is a sandbox's of no live run", uid)
		}
		select {
		case <-r.done:
			return nil, proto.Errorf(proto.EACCES, "uid %d belongs to run %s, which has ended", uid, r.rec.ID)
		default:
		}
		return r, nil
	}
	if pid <= 0 {
		return nil, nil
	}
	if r, ok := s.RunOf(pid); ok {
		return r, nil
	}
	if s.Cgroups != nil {
		if s.Cgroups.quiet() {
			return nil, nil
		}
		if id, ours := s.Cgroups.GroupOf(int(pid)); ours {
			if r, ok := s.Get(id); ok {
				select {
				case <-r.done:
				default:
					return r, nil
				}
			}
			return nil, proto.Errorf(proto.EACCES, "pid %d is in the cgroup %s of no live run", pid, id)
		}
	}
	if otherPidNS(int(pid)) {
		return nil, proto.Errorf(proto.EACCES, "pid %d is in a pid namespace of its own (a sandbox) and no run's", pid)
	}
	return nil, nil
}

var selfPidNS = func() string {
	l, _ := os.Readlink("/proc/self/ns/pid")
	return l
}()

// otherPidNS reports whether pid is in a pid namespace other than
// oxiosd's (a process of an ancestor namespace has no pid here at all).
// It runs for a caller of the mount's every request while a run lives:
// one readlink into a buffer on the stack.
func otherPidNS(pid int) bool {
	var lb [64]byte
	n, err := unix.Readlink("/proc/"+strconv.Itoa(pid)+"/ns/pid", lb[:])
	return err == nil && selfPidNS != "" && string(lb[:n]) != selfPidNS
}

// GroupOf returns the name of the group of c that pid is in, if any. Like
// otherPidNS it reads /proc into the stack: open, read, close.
func (c *Cgroups) GroupOf(pid int) (string, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/cgroup", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	var buf [4096]byte
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	unix.Close(fd)
	// Each line is ID:CONTROLLERS:PATH; ours are below /oxios.PID/.
	if i := bytes.Index(buf[:n], parentGroup); i >= 0 {
		rest := buf[i+len(parentGroup) : n]
		if j := bytes.IndexAny(rest, "/\n"); j >= 0 {
			rest = rest[:j]
		}
		return string(rest), len(rest) > 0
	}
	return "", false
}

// parentGroup is how the group the run groups are made in (named after
// oxiosd's pid) shows in /proc/PID/cgroup.
var parentGroup = []byte("/oxios." + strconv.Itoa(os.Getpid()) + "/")

// Resolver is the supervisor as the kernel resolves a peer: a process in
// a run's tree is that run's agent (Attribute), named by the agent and
// the run's id ("" when it is no run's).
type Resolver struct{ S *Supervisor }

// Attribute is Supervisor.Attribute by names.
func (r Resolver) Attribute(uid uint32, pid int32) (agent, run string, err error) {
	x, err := r.S.Attribute(uid, pid)
	if err != nil || x == nil {
		return "", "", err
	}
	return x.Agent(), x.ID(), nil
}
