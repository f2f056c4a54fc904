package state

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func fork(t *testing.T, s *Store, f *Fork, changes ...*Change) {
	t.Helper()
	if err := write(t, s, f, changes...); err != nil {
		t.Fatal(err)
	}
}

// big is a value too large for the cache: read from its file.
func big(tag string) string { return tag + strings.Repeat(".", cacheMaxValue) }

func wantValues(t *testing.T, s *Store, agent string, want map[string]string) {
	t.Helper()
	checkUnwritten(t, s)
	recs, err := s.List(agent, "")
	if err != nil && len(want) > 0 {
		t.Fatalf("%s: %v", agent, err)
	}
	if len(recs) != len(want) {
		keys := []string{}
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		t.Errorf("%s has keys %v, want %d", agent, keys, len(want))
	}
	for k, w := range want {
		v, _, err := s.Load(agent, k)
		if err != nil || string(v) != w {
			t.Errorf("%s/%s = %.20q %v, want %.20q", agent, k, v, err, w)
		}
	}
}

func wantFiles(t *testing.T, dir, agent string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		b, err := os.ReadFile(filepath.Join(dir, "repo", "agents", agent, "state", k))
		if err != nil || string(b) != w {
			t.Errorf("file of %s/%s = %.20q %v, want %.20q", agent, k, b, err, w)
		}
	}
}

// A fork is a copy of the origin at its point: values in files (cached
// or not), values not yet in their files, skipped prefixes left out;
// later changes of either side do not show in the other, in memory, in
// the files, and after a crash at any point.
func TestForkCopyOnWrite(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]string{"small": "s0", "d/big": big("b0"), "d/e/k": "k0"}
	var cs []*Change
	for k, v := range src {
		cs = append(cs, save("a", k, v))
	}
	commit(t, s, cs...)
	commit(t, s, save("a", "sched/job", "j"), &Change{Agent: "a", Space: SpaceMem, Key: "m/1", Value: []byte("mem")})
	s.Flush()
	// Pending at the fork: in memory only.
	commit(t, s, save("a", "pend", "p0"), save("a", "small", "s1"))
	src["pend"], src["small"] = "p0", "s1"
	fork(t, s, &Fork{From: "a", To: "b", Skip: map[string][]string{SpaceState: {"sched/"}}}, save("b", "extra", "x"))
	want := map[string]string{"extra": "x"}
	for k, v := range src {
		want[k] = v
	}
	wantValues(t, s, "b", want)
	if v, _, err := s.Load(Ref(SpaceMem, "b"), "m/1"); err != nil || string(v) != "mem" {
		t.Errorf("b's memory = %q %v", v, err)
	}
	// A crash before the applier linked anything.
	crash1 := t.TempDir()
	copyTree(t, dir, crash1)

	// Later changes, each on one side.
	commit(t, s, save("a", "d/big", big("b1")), del("a", "d/e/k"), save("b", "small", "s2"), del("b", "pend"))
	srcNow := map[string]string{"small": "s1", "d/big": big("b1"), "pend": "p0", "sched/job": "j"}
	forkNow := map[string]string{"small": "s2", "d/big": big("b0"), "d/e/k": "k0", "extra": "x"}
	wantValues(t, s, "a", srcNow)
	wantValues(t, s, "b", forkNow)
	s.Flush()
	wantValues(t, s, "a", srcNow)
	wantValues(t, s, "b", forkNow)
	wantFiles(t, dir, "a", srcNow)
	wantFiles(t, dir, "b", forkNow)
	// A crash once everything is in the files.
	crash2 := t.TempDir()
	copyTree(t, dir, crash2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		dir       string
		src, fork map[string]string
	}{{crash1, src, want}, {crash2, srcNow, forkNow}, {dir, srcNow, forkNow}} {
		s, err := Open(c.dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		srcAll := map[string]string{"sched/job": "j"}
		for k, v := range c.src {
			srcAll[k] = v
		}
		wantValues(t, s, "a", srcAll)
		wantValues(t, s, "b", c.fork)
		s.Flush()
		wantFiles(t, c.dir, "b", c.fork)
		s.Close()
	}
}

// checkUnwritten recounts each agent's unwritten bytes, which the store
// keeps as a running sum.
func checkUnwritten(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	agents := make([]*agent, 0, len(s.agents))
	for _, a := range s.agents {
		agents = append(agents, a)
	}
	s.mu.Unlock()
	for _, a := range agents {
		a.mu.RLock()
		var n int64
		for _, e := range a.keys {
			if e.unwritten() {
				n += e.size
			}
		}
		if n != a.unwritten {
			t.Errorf("%s: unwritten %d, its entries sum to %d", a.name, a.unwritten, n)
		}
		a.mu.RUnlock()
	}
}

// A fork prepared ahead of its batch is the same copy as one made in the
// batch, and a prepared fork whose batch never comes changes nothing.
func TestForkPrepared(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := map[string]string{"k": "v", "d/big": big("b"), "sched/j": "j"}
	commit(t, s, save("a", "k", "v"), save("a", "d/big", big("b")), save("a", "sched/j", "j"))
	s.prepare(&Fork{From: "a", To: "never"}) // its batch never comes
	f := &Fork{From: "a", To: "b", Skip: map[string][]string{SpaceState: {"sched/"}}}
	s.prepare(f)
	if n, m := f.Copied(SpaceState), f.Copied(SpaceMem); n != 2 || m != 0 {
		t.Errorf("the prepared fork copies %d keys of state, %d memories; want 2 (sched/ left out) and 0", n, m)
	}
	fork(t, s, f, save("b", "extra", "x"))
	wantValues(t, s, "b", map[string]string{"k": "v", "d/big": big("b"), "extra": "x"})
	wantValues(t, s, "a", want)
	if n, _ := s.Keys("never"); n != 0 {
		t.Errorf("the fork never made has %d keys", n)
	}
	s.Flush()
	wantValues(t, s, "b", map[string]string{"k": "v", "d/big": big("b"), "extra": "x"})
	// Prepared from an agent with nothing: refused when added.
	g := &Fork{From: "none", To: "c"}
	s.prepare(g)
	if err := s.Begin().AddFork(g); err == nil || err.Code != proto.ENOENT {
		t.Errorf("fork of an agent with nothing: %v", err)
	}
}

// A fork's index is installed after its batch is published, while the
// committer goes on: whoever reads or changes the fork meanwhile waits
// for it, and a change of the origin published right after the fork
// reaches neither the fork's values nor its files.
func TestForkInstalledBehind(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 20000
	cs := make([]*Change, 0, n)
	for i := range n {
		cs = append(cs, save("a", fmt.Sprintf("d%02d/k%05d", i%50, i), fmt.Sprint("v", i)))
	}
	commit(t, s, cs...)
	s.Flush()
	for round := range 3 {
		to := fmt.Sprint("b", round)
		fork(t, s, &Fork{From: "a", To: to})
		key := fmt.Sprintf("d%02d/k%05d", round, round)
		// At once, before the copy can be in: the origin changes.
		commit(t, s, save("a", key, "new"))
		if k, _ := s.Keys(to); k != n {
			t.Fatalf("%s has %d keys, want %d", to, k, n)
		}
		if v, _, err := s.Load(to, key); err != nil || string(v) != fmt.Sprint("v", round) {
			t.Fatalf("%s/%s = %q %v", to, key, v, err)
		}
		commit(t, s, save(to, "mine", "m"))
	}
	s.Flush()
	checkUnwritten(t, s)
	for round := range 3 {
		key := fmt.Sprintf("d%02d/k%05d", round, round)
		wantFiles(t, dir, fmt.Sprint("b", round), map[string]string{key: fmt.Sprint("v", round), "mine": "m", "d49/k19999": "v19999"})
	}
	wantFiles(t, dir, "a", map[string]string{"d00/k00000": "new", "d01/k00001": "new"})
	s.qmu.Lock()
	left := len(s.installs)
	s.qmu.Unlock()
	if left != 0 {
		t.Errorf("%d installs left after the applier's flush", left)
	}
}

// A fork of a fork whose files are not linked yet, and its replay.
func TestForkOfFork(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	var cs []*Change
	for i := range 50 {
		k, v := fmt.Sprintf("k%02d", i), fmt.Sprint("v", i)
		if i%10 == 0 {
			v = big(v)
		}
		want[k] = v
		cs = append(cs, save("a", k, v))
	}
	commit(t, s, cs...)
	s.Flush()
	fork(t, s, &Fork{From: "a", To: "b"})
	crash := t.TempDir()
	copyTree(t, dir, crash)
	fork(t, s, &Fork{From: "b", To: "c"})
	commit(t, s, save("a", "k00", "new"), save("b", "k10", "new"))
	wantValues(t, s, "c", want)
	s.Close()

	// The crash copy: b's record replayed; fork c from it before its
	// links are made, then crash again.
	s, err = Open(crash, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, s, "b", want)
	s.Close()
}

// A fork needs a new name and an origin with keys.
func TestForkRefused(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, save("a", "k", "v"), save("b", "k", "v"))
	for _, f := range []*Fork{{From: "a", To: "b"}, {From: "none", To: "c"}, {From: "a", To: "a"}} {
		if err := s.Begin().AddFork(f); err == nil {
			t.Errorf("fork %s as %s accepted", f.From, f.To)
		}
	}
}

// BenchmarkFork10k times a fork of an agent of 10,000 keys in files:
// the journal record, its sync and the clone of the index.
func BenchmarkFork10k(b *testing.B) {
	s := store10k(b)
	for i := 0; b.Loop(); i++ {
		bt := s.Begin()
		if err := bt.AddFork(&Fork{From: "a", To: fmt.Sprint("f", i)}); err != nil {
			b.Fatal(err)
		}
		bt.Write()
		bt.Sync()
		bt.Publish()
	}
}

// BenchmarkCloneTree10k times the copy of a 10,000-key index a fork
// makes (its CPU, on the fork's way: see prepare).
func BenchmarkCloneTree10k(b *testing.B) {
	s := store10k(b)
	a := s.agent(Ref(SpaceState, "a"))
	b.ReportAllocs()
	for b.Loop() {
		if fc := cloneTree(a, nil, nil, nil, nil, 1); len(fc.keys) != 10000 {
			b.Fatal(len(fc.keys))
		}
	}
}

// store10k is a store whose agent a holds 10,000 keys in files, as the
// fork benchmarks copy it.
func store10k(b *testing.B) *Store {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	bt := s.Begin()
	for i := range 10000 {
		bt.Add(&Change{Agent: "a", Key: fmt.Sprintf("d%03d/k%05d.md", i%300, i), Value: []byte(strings.Repeat("fork bench state ", 12))})
	}
	bt.Write()
	bt.Sync()
	bt.Publish()
	s.Flush()
	return s
}

// TestForkEndsItsLinking: a fork counts itself linking on its origin
// until the applier has made its links (the origin's changes are then
// written strictly in order, see apply), and no longer after: the count
// returns to zero, for a fork published at run time and for one replayed.
func TestForkEndsItsLinking(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	commit(t, s, save("a", "k", "v1"), save("a", "j", "w"))
	s.Flush() // a's files are written: the fork links them
	a := s.agent(Ref(SpaceState, "a"))
	f := &Fork{From: "a", To: "f"}
	s.PrepareFork(f)
	if n := a.linking.Load(); n != 1 || s.linking.Load() != 1 {
		t.Fatalf("a fork being made: origin linking %d, store %d", n, s.linking.Load())
	}
	fork(t, s, f)
	commit(t, s, save("a", "k", "v2")) // after the fork: not in it
	s.Flush()
	if n := a.linking.Load(); n != 0 || s.linking.Load() != 0 {
		t.Fatalf("after the fork's end: origin linking %d, store %d", n, s.linking.Load())
	}
	wantValues(t, s, "f", map[string]string{"k": "v1", "j": "w"})
	wantValues(t, s, "a", map[string]string{"k": "v2", "j": "w"})
	if b, err := os.ReadFile(filepath.Join(dir, "repo", "agents", "f", "state", "k")); err != nil || string(b) != "v1" {
		t.Fatalf("fork's file: %q %v", b, err)
	}
	// A fork replayed from the journal ends its linking too.
	commit(t, s, save("a", "k", "v3"))
	fork(t, s, &Fork{From: "a", To: "g"})
	crash(s)
	s = mustOpen(t, dir)
	defer s.Close()
	s.Flush()
	if n := s.linking.Load(); n != 0 {
		t.Fatalf("after a replayed fork: store linking %d", n)
	}
	wantValues(t, s, "g", map[string]string{"k": "v3", "j": "w"})
}

// TestForkMidBatch: a fork in the middle of a batch, with changes of
// other agents before and after it and of the fork after it (the batch
// must not change the origin: see AddFork). The changes and the fork's
// files reach the index and, once the applier has written and linked
// them, the files: a batch queues its records for the applier in one go,
// with a fork's own files between those before it and those after it.
func TestForkMidBatch(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, save("a", "k", big("v1")), save("a", "other", "o1"))
	s.Flush()
	commit(t, s, save("a", "k", big("v2"))) // pending at the fork
	b := s.Begin()
	if err := b.Add(save("c", "x", big("x1"))); err != nil {
		t.Fatal(err)
	}
	if err := b.AddFork(&Fork{From: "a", To: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := finish(t, b, save("b", "k", big("b1")), save("b", "own", "b1"), save("c", "y", "y1")); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"a": {"k": big("v2"), "other": "o1"},
		"b": {"k": big("b1"), "other": "o1", "own": "b1"},
		"c": {"x": big("x1"), "y": "y1"},
	}
	for agent, w := range want {
		wantValues(t, s, agent, w)
	}
	s.Flush()
	for agent, w := range want {
		wantValues(t, s, agent, w)
		wantFiles(t, dir, agent, w)
	}
}

// TestForkReplayedFromItsPoint is issue 45's repro: a fork replayed after
// a crash copies its origin as it was at the fork, not as its files stand
// at the crash (a key saved after the fork, written to its file, and
// deleted, the delete not yet applied), and a fork removed since stays
// removed.
func TestForkReplayedFromItsPoint(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	commit(t, s, save("src", "k0", "v0"), &Change{Agent: "src", Space: SpaceMem, Key: "m0", Value: []byte("mem0")})
	s.Flush()
	fork(t, s, &Fork{From: "src", To: "dst"})
	fork(t, s, &Fork{From: "src", To: "gone"})
	commit(t, s, del("gone", "k0"), &Change{Agent: "gone", Space: SpaceMem, Key: "m0", Delete: true})
	commit(t, s, save("src", "k1", "v1"), &Change{Agent: "src", Space: SpaceMem, Key: "m1", Value: []byte("mem1")})
	s.Flush() // k1 and m1 are in src's files
	commit(t, s, del("src", "k1"), &Change{Agent: "src", Space: SpaceMem, Key: "m1", Delete: true})
	s.Flush()
	crashed := t.TempDir()
	copyTree(t, dir, crashed)
	s.Close()
	// The crash came before the applier removed k1's and m1's files.
	for path, v := range map[string]string{"state/k1": "v1", "mem/m1": "mem1"} {
		if err := os.WriteFile(filepath.Join(crashed, "repo", "agents", "src", path), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s = mustOpen(t, crashed)
	defer s.Close()
	for _, flushed := range []bool{false, true} {
		wantValues(t, s, "src", map[string]string{"k0": "v0"})
		wantValues(t, s, "dst", map[string]string{"k0": "v0"})
		wantValues(t, s, Ref(SpaceMem, "dst"), map[string]string{"m0": "mem0"})
		wantValues(t, s, "gone", nil)
		wantValues(t, s, Ref(SpaceMem, "gone"), nil)
		if n, _ := s.Keys("gone"); n != 0 {
			t.Errorf("flushed %v: the removed fork has %d keys", flushed, n)
		}
		s.Flush()
	}
	wantFiles(t, crashed, "dst", map[string]string{"k0": "v0"})
	if _, err := os.Stat(filepath.Join(crashed, "repo", "agents", "dst", "state", "k1")); err == nil {
		t.Error("dst has a file for k1, saved in src after the fork")
	}
}
