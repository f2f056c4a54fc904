package supervisor

import (
	"os"
	"sync"

	"github.com/oxios/oxios/pkg/sandbox"
)

// A run of a root oxiosd on a host folder (--work) sees it through an
// idmapped mount whose user namespace maps the folder's owner to the
// run's uid (sandbox.Overlay). Making that namespace takes a process of
// its own (a helper started in it: a fork, an exec, its id maps written,
// its reaping): on a loaded machine about 10 ms, most of what --work
// added to a run's start (issue 48). So the supervisor makes them ahead,
// in the background: for each of the last few owners whose folders runs
// took, a couple of namespaces, each with the uid of the run that will
// take it reserved beside it (the namespace maps the owner to that uid
// alone). The first run on a folder of a new owner makes its own, in its
// shim, as before, and starts the making of the next ones.

const (
	idmapsPerOwner = 2 // namespaces kept ready per owner
	idmapOwners    = 4 // owners kept, the most recent
)

// owner is a host folder's owner: the ids an idmap maps.
type owner struct{ uid, gid uint32 }

// idmap is a user namespace made ahead (ns), in which its owner's ids
// are uid's, reserved for the run that takes it.
type idmap struct {
	uid uint32
	ns  *os.File
}

// idmaps are the namespaces made ahead, by owner.
type idmaps struct {
	mu      sync.Mutex
	ready   map[owner][]idmap
	filling map[owner]bool
	recent  []owner // newest first, at most idmapOwners
	closed  bool
	wg      sync.WaitGroup
	maker   sandbox.IdmapMaker
}

// takeIdmap is a namespace made ahead for o's folders, with its uid,
// now the run r's (ok false: none ready, and the run makes its own).
// fillIdmaps makes the next ones once the run has started.
func (s *Supervisor) takeIdmap(o owner, r *Run) (uid uint32, ns *os.File, ok bool) {
	m := &s.idmaps
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, nil, false
	}
	if m.ready == nil {
		m.ready, m.filling = map[owner][]idmap{}, map[owner]bool{}
	}
	s.touchOwnerLocked(o)
	if l := m.ready[o]; len(l) > 0 {
		it := l[len(l)-1]
		m.ready[o] = l[:len(l)-1]
		s.uids.give(it.uid, r)
		uid, ns, ok = it.uid, it.ns, true
	}
	return uid, ns, ok
}

// refillIdmaps starts making o's namespaces, in the background, unless
// that is under way. It is called once a run on a folder of o's has
// started, not before: the making is a fork too, and Go forks one at a
// time (syscall.ForkLock), so that a fill begun at the run's start
// delayed the start of its shim.
func (s *Supervisor) refillIdmaps(o owner) {
	m := &s.idmaps
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.filling[o] || !s.recentLocked(o) {
		return
	}
	m.filling[o] = true
	m.wg.Add(1)
	go s.fillIdmaps(o)
}

// touchOwnerLocked makes o the most recent owner; the least recent
// beyond idmapOwners goes, with what was made for it.
func (s *Supervisor) touchOwnerLocked(o owner) {
	m := &s.idmaps
	for i, x := range m.recent {
		if x == o {
			copy(m.recent[1:i+1], m.recent[:i])
			m.recent[0] = o
			return
		}
	}
	m.recent = append([]owner{o}, m.recent...)
	if len(m.recent) > idmapOwners {
		old := m.recent[len(m.recent)-1]
		m.recent = m.recent[:len(m.recent)-1]
		s.dropIdmapsLocked(old)
	}
}

// dropIdmapsLocked closes what was made for o and gives its uids back.
func (s *Supervisor) dropIdmapsLocked(o owner) {
	for _, it := range s.idmaps.ready[o] {
		it.ns.Close()
		s.uids.release(it.uid)
	}
	delete(s.idmaps.ready, o)
}

// fillIdmaps makes o's namespaces until idmapsPerOwner are ready, o is
// no longer among the recent owners, or the supervisor closes. A
// namespace that cannot be made stops it (the runs make their own).
func (s *Supervisor) fillIdmaps(o owner) {
	m := &s.idmaps
	defer m.wg.Done()
	for {
		m.mu.Lock()
		want := !m.closed && len(m.ready[o]) < idmapsPerOwner && s.recentLocked(o)
		if !want {
			m.filling[o] = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		uid := s.uids.acquire(nil)
		ns, err := m.maker.Make(o.uid, o.gid, uid, uid)
		m.mu.Lock()
		if err != nil || m.closed || !s.recentLocked(o) {
			if err != nil {
				s.log.Warn("making a user namespace ahead for runs on host folders", "owner", o.uid, "err", err)
			}
			if ns != nil {
				ns.Close()
			}
			s.uids.release(uid)
			m.filling[o] = false
			m.mu.Unlock()
			return
		}
		m.ready[o] = append(m.ready[o], idmap{uid: uid, ns: ns})
		m.mu.Unlock()
	}
}

func (s *Supervisor) recentLocked(o owner) bool {
	for _, x := range s.idmaps.recent {
		if x == o {
			return true
		}
	}
	return false
}

// closeIdmaps waits for the making under way and closes what was made.
func (s *Supervisor) closeIdmaps() {
	m := &s.idmaps
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.wg.Wait()
	m.mu.Lock()
	for o := range m.ready {
		s.dropIdmapsLocked(o)
	}
	m.mu.Unlock()
	m.maker.Close()
}
