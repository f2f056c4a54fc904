package supervisor

import (
	"os"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Main() // the idmap maker is this binary re-run
	os.Exit(m.Run())
}

// TestIdmaps: the namespaces made ahead for an owner's folders come
// ready after a run on one started, each with a uid reserved for the run
// that takes it; an owner no longer among the recent ones, and the
// supervisor's close, give back what was made.
func TestIdmaps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces mapping another user's ids: needs root")
	}
	s := newSup(t, t.TempDir())
	o := owner{4242, 4242}
	r := &Run{}
	if _, _, ok := s.takeIdmap(o, r); ok {
		t.Fatal("a namespace was ready before any was made")
	}
	s.refillIdmaps(o)
	ready := func(o owner) int {
		s.idmaps.mu.Lock()
		defer s.idmaps.mu.Unlock()
		return len(s.idmaps.ready[o])
	}
	for i := 0; i < 1000 && ready(o) < idmapsPerOwner; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := ready(o); n != idmapsPerOwner {
		t.Fatalf("%d namespaces ready, want %d", n, idmapsPerOwner)
	}
	uid, ns, ok := s.takeIdmap(o, r)
	if !ok || ns == nil || !sandbox.IsSandboxUID(uid) {
		t.Fatalf("take: %d %v %v", uid, ns, ok)
	}
	ns.Close()
	if got, taken := s.uids.run(uid); !taken || got != r {
		t.Errorf("the taken namespace's uid %d is not the run's: %v %v", uid, got, taken)
	}
	s.idmaps.mu.Lock()
	left := s.idmaps.ready[o][0].uid
	s.idmaps.mu.Unlock()
	if _, taken := s.uids.run(left); !taken {
		t.Errorf("the uid %d of a namespace ready is not reserved", left)
	}
	// idmapOwners other owners: o's namespace goes, its uid with it.
	for i := uint32(1); i <= idmapOwners; i++ {
		s.takeIdmap(owner{i, i}, r)
	}
	if n := ready(o); n != 0 {
		t.Errorf("%d namespaces kept for an owner no longer recent", n)
	}
	if _, taken := s.uids.run(left); taken {
		t.Errorf("the uid %d of a namespace dropped is still reserved", left)
	}
	s.refillIdmaps(owner{1, 1})
	s.Close()
	s.uids.mu.Lock()
	n := len(s.uids.taken)
	s.uids.mu.Unlock()
	if n != 1 { // the run's, which the test never released
		t.Errorf("%d uids reserved after close, want the run's alone", n)
	}
}
