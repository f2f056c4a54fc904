package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// TestLazySort: the keys come out in order, each once, duplicates
// included, and an early stop stops.
func TestLazySort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 17, 100, 5000} {
		for _, alphabet := range []int{2, 50, 1 << 20} {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("d%d/k%d", rng.IntN(alphabet), rng.IntN(alphabet))
			}
			want := slices.Sorted(slices.Values(keys))
			var got []string
			lazySort(keys, func(k string) bool { got = append(got, k); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("n=%d alphabet=%d: out of order or lost keys", n, alphabet)
			}
			if !slices.Equal(keys, want) {
				t.Fatalf("n=%d alphabet=%d: keys not left sorted", n, alphabet)
			}
		}
	}
	keys := []string{"c", "a", "b", "e", "d"}
	var got []string
	lazySort(keys, func(k string) bool { got = append(got, k); return len(got) < 2 })
	if fmt.Sprint(got) != "[a b]" {
		t.Fatalf("stopped listing emitted %v", got)
	}
}

// keysOf lists agent's keys at or below prefix through Each.
func keysOf(t *testing.T, s *Store, agent, prefix string) []string {
	t.Helper()
	var out []string
	if err := s.Each(agent, prefix, func(rec proto.StateRecord) error {
		out = append(out, rec.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEachFollowsChanges: listings see keys added and removed since the
// order was built, in order, at and below a prefix, after a reopen from
// the key snapshot and after a fork, and one that stops early leaves the
// next whole.
func TestEachFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	check := func(s *Store, what string) {
		t.Helper()
		var want []string
		for k := range live {
			want = append(want, k)
		}
		slices.Sort(want)
		if got := keysOf(t, s, "a", ""); !slices.Equal(got, want) {
			t.Fatalf("%s: listed %d keys %v, want %d", what, len(got), got[:min(len(got), 8)], len(want))
		}
		var under []string
		for _, k := range want {
			if k == "n" || strings.HasPrefix(k, "n/") {
				under = append(under, k)
			}
		}
		if got := keysOf(t, s, "a", "n/"); !slices.Equal(got, under) {
			t.Fatalf("%s: listed %v under n, want %v", what, got, under)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 6 {
		var chs []*Change
		for range 300 {
			k := fmt.Sprintf("%c/%d", "nmo"[rng.IntN(3)], rng.IntN(400))
			if rng.IntN(4) == 0 {
				chs = append(chs, del("a", k))
				delete(live, k)
			} else {
				chs = append(chs, save("a", k, "v"))
				live[k] = true
			}
		}
		if round == 3 {
			// A key that is also a prefix's neighbour: "n" sorts before
			// "n/..." and after "m/...".
			chs = append(chs, save("a", "n.txt", "x"))
			live["n.txt"] = true
		}
		commit(t, s, chs...)
		check(s, fmt.Sprint("round ", round))
	}
	// A listing stopped after its first record leaves the order whole.
	stop := errors.New("stop")
	if err := s.Each("a", "", func(proto.StateRecord) error { return stop }); err != stop {
		t.Fatalf("stopped listing returned %v", err)
	}
	check(s, "after a stopped listing")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.agent("a").order.valid {
		t.Fatal("the order was not taken from the key snapshot")
	}
	check(s, "after reopen")
	commit(t, s, save("a", "n/new", "v"), del("a", "m/1"))
	live["n/new"] = true
	delete(live, "m/1")
	check(s, "after reopen and changes")
}

// TestEachBuildsOnce: the order is built by the first listing and kept
// since, new keys merged in and removed ones skipped, so later listings
// (their first record included) cost no sort of every key; only a tree
// mostly removed since is built again.
func TestEachBuildsOnce(t *testing.T) {
	s := &Store{agents: map[string]*agent{}}
	a := s.agentLocked("a")
	const n = 20000
	for k := range n {
		p := k * 7919 % n // every key once, out of order
		a.addKey(fmt.Sprintf("d%04d/k%07d", p/1000, p), &entry{size: 1})
	}
	if got := keysOf(t, s, "a", "d0001"); len(got) != 1000 || got[0] != "d0001/k0001000" || !slices.IsSorted(got) {
		t.Fatalf("listed %d keys under d0001, first %v", len(got), got[:1])
	}
	for round := range 5 {
		for k := range 100 {
			a.addKey(fmt.Sprintf("new%d/%d", round, k), &entry{size: 1})
			p := k + round*100
			a.removeKey(fmt.Sprintf("d%04d/k%07d", p/1000, p))
		}
		got := keysOf(t, s, "a", "")
		if len(got) != n || !slices.IsSorted(got) {
			t.Fatalf("round %d: listed %d keys, sorted %v", round, len(got), slices.IsSorted(got))
		}
	}
	if a.order.builds != 1 {
		t.Fatalf("the order was built %d times, want once", a.order.builds)
	}
	// A few new keys are not merged into the order (a copy of it all)
	// but listed beside it.
	first := &a.order.sorted[0]
	a.addKey("d0000/k0000000x", &entry{size: 1})
	a.addKey("zz", &entry{size: 1})
	got := keysOf(t, s, "a", "")
	if &a.order.sorted[0] != first || len(a.order.extra) != 502 {
		t.Fatalf("new keys were merged into the order (extra %d)", len(a.order.extra))
	}
	// (The rounds above removed d0000/k0000000 to k0000499.)
	if len(got) != n+2 || !slices.IsSorted(got) || got[0] != "d0000/k0000000x" || got[len(got)-1] != "zz" {
		t.Fatalf("listed %d keys, sorted %v, first %q, last %q", len(got), slices.IsSorted(got), got[0], got[len(got)-1])
	}
	if under := keysOf(t, s, "a", "d0000"); len(under) != 501 || under[0] != "d0000/k0000000x" || under[1] != "d0000/k0000500" {
		t.Fatalf("listed %d keys under d0000, first %q", len(under), under[:2])
	}
	for k := range n {
		a.removeKey(fmt.Sprintf("d%04d/k%07d", k/1000, k))
	}
	if got := keysOf(t, s, "a", ""); len(got) != 502 {
		t.Fatalf("listed %d keys, want the 502 new ones", len(got))
	}
	if a.order.builds != 2 {
		t.Fatalf("a tree mostly removed was built %d times, want twice", a.order.builds)
	}
}
