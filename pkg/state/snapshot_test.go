package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

type keyInfo struct{ size, mod int64 }

type treeInfo struct {
	keys  map[string]keyInfo
	dirs  map[string]int
	bytes int64
}

// indexOf is what the index of s holds, for comparison.
func indexOf(s *Store) map[string]treeInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]treeInfo{}
	for ref, a := range s.agents {
		a.mu.RLock()
		t := treeInfo{keys: map[string]keyInfo{}, dirs: maps.Clone(a.dirs), bytes: a.bytes}
		for k, e := range a.keys {
			t.keys[k] = keyInfo{e.size, e.mod}
		}
		a.mu.RUnlock()
		out[ref] = t
	}
	return out
}

// walkOf is the index a walk of data's work tree finds.
func walkOf(t *testing.T, data string) map[string]treeInfo {
	t.Helper()
	s := &Store{repo: filepath.Join(data, "repo", "agents"), agents: map[string]*agent{}}
	if err := s.walkIndex(); err != nil {
		t.Fatal(err)
	}
	return indexOf(s)
}

func sameAsWalk(t *testing.T, s *Store, data string) {
	t.Helper()
	s.Flush()
	got, want := indexOf(s), walkOf(t, data)
	if !reflect.DeepEqual(got, want) {
		for _, ref := range slices.Sorted(maps.Keys(want)) {
			if !reflect.DeepEqual(got[ref], want[ref]) {
				t.Errorf("tree %s: the index holds %d keys (dirs %v, %d bytes), a walk finds %d (dirs %v, %d bytes)",
					ref, len(got[ref].keys), got[ref].dirs, got[ref].bytes, len(want[ref].keys), want[ref].dirs, want[ref].bytes)
				for k, w := range want[ref].keys {
					if g, ok := got[ref].keys[k]; !ok || g != w {
						t.Errorf("  %s: index %+v (%v), walk %+v", k, g, ok, w)
					}
				}
			}
		}
		t.Fatalf("the index differs from a walk of the work tree: trees %v, walk %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fill saves keys of several agents and spaces, nested folders included,
// and deletes some.
func fill(t *testing.T, s *Store, round int) {
	t.Helper()
	var cs []*Change
	for i := 0; i < 300; i++ {
		cs = append(cs, &Change{Agent: "ann", Space: SpaceMem, Key: fmt.Sprintf("episodic/%03d-%d.md", i, round), Value: []byte(fmt.Sprintf("memory %d of round %d", i, round))})
	}
	cs = append(cs,
		save("ann", "notes/today", fmt.Sprint("round ", round)),
		save("ann", "notes/deep/er/k", "x"),
		save("ann", fmt.Sprint("top", round), ""),
		save("bob", "k", "bob's"),
		&Change{Agent: "bob", Space: SpaceSys, Key: "budget.json", Value: []byte("{}")},
		&Change{Agent: "cyd", Space: SpaceMem, Key: "fact/a.md", Value: []byte("fact")},
	)
	for _, e := range commit(t, s, cs...) {
		if e != nil {
			t.Fatal(e)
		}
	}
	if round > 0 {
		commit(t, s, del("ann", "top0"), &Change{Agent: "ann", Space: SpaceMem, Key: "episodic/007-0.md", Delete: true})
	}
}

func TestSnapshotUsedAfterCleanClose(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	if s.indexFrom != "walk" {
		t.Fatalf("a new store's index came from %q", s.indexFrom)
	}
	fill(t, s, 0)
	fill(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "index", snapName)
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no snapshot after a clean close: %v", err)
	}
	s = mustOpen(t, dir)
	if s.indexFrom != "snapshot" {
		t.Fatalf("index from %q after a clean close", s.indexFrom)
	}
	// It stays: the journal's generation is still its own, and the
	// journal's replay at a start after a crash brings it up to date.
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("the snapshot is gone once the store is open: %v", err)
	}
	sameAsWalk(t, s, dir)
	if v, _, err := s.Load("ann", "notes/today"); err != nil || string(v) != "round 1" {
		t.Fatalf("notes/today = %q, %v", v, err)
	}
	if recs, _ := s.List(Ref(SpaceMem, "ann"), "episodic"); len(recs) != 599 {
		t.Fatalf("%d memories listed, want 599", len(recs))
	}
	if !s.IsFolder("ann", "notes/deep") || s.IsFolder("ann", "notes/today") {
		t.Fatal("folders wrong after loading the snapshot")
	}
	// Still a working store: it changes, closes and opens from a new snapshot.
	fill(t, s, 2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A file rewritten in place behind the store's back (its folder does
	// not change) is not seen: proof that no walk happened.
	p := filepath.Join(dir, "repo", "agents", "ann", "state", "notes", "today")
	if err := os.WriteFile(p, []byte("changed behind the store's back"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	defer s.Close()
	if st, err := s.Stat("ann", "notes/today"); err != nil || st.Size != int64(len("round 2")) || s.indexFrom != "snapshot" {
		t.Fatalf("notes/today: %+v, %v; index from %s", st, err, s.indexFrom)
	}
}

// crash leaves s as a crash would: whatever it published is in the
// journal and (after Flush) in the work tree, nothing is checkpointed and
// no snapshot is saved but those written behind checkpoints, which it
// waits for (a crash ends them, a test must not race with them). The
// store is abandoned, not closed.
func crash(s *Store) {
	s.Flush()
	s.stopSnapshots()
}

// TestSnapshotIgnoredAfterCrash: a store that was not closed leaves no
// snapshot, and one that comes back (say an unlink the file system lost)
// is either not believed or brought up to date by the journal: the index
// is the work tree's either way.
func TestSnapshotIgnoredAfterCrash(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "index", snapName)
	s := mustOpen(t, dir)
	fill(t, s, 0)
	s.Close()
	old, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	time.Sleep(20 * time.Millisecond) // past a coarse ctime tick
	fill(t, s, 1)
	// Then a versioning restore: deletes, then saves, in one batch
	// through the journal.
	commit(t, s, del("bob", "k"), save("ann", "notes/today", "restored"))
	crash(s)
	check := func(s *Store, restored bool) {
		t.Helper()
		sameAsWalk(t, s, dir)
		if _, _, err := s.Load("ann", "top1"); err != nil {
			t.Errorf("a key saved after the snapshot is lost: %v", err)
		}
		if !restored {
			return
		}
		if _, _, err := s.Load("bob", "k"); err == nil {
			t.Errorf("a key deleted after the snapshot is back")
		}
		if v, _, _ := s.Load("ann", "notes/today"); string(v) != "restored" {
			t.Errorf("notes/today = %q after the restore", v)
		}
	}
	// The old snapshot back, the journal in its generation.
	if err := os.WriteFile(snap, old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	check(s, true)
	// The snapshot written behind the checkpoint of that start's replay.
	fill(t, s, 2)
	crash(s)
	s = mustOpen(t, dir)
	if s.indexFrom != "snapshot" {
		t.Errorf("index from %q after a crash, not from the snapshot behind the last checkpoint", s.indexFrom)
	}
	check(s, false)
	// No snapshot at all.
	fill(t, s, 3)
	crash(s)
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	if s.indexFrom != "walk" {
		t.Errorf("index from %q after a crash without a snapshot", s.indexFrom)
	}
	check(s, false)
	// The old snapshot back, the journal checkpointed since.
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("ann", "after-checkpoint", "x"))
	crash(s)
	if err := os.WriteFile(snap, old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	defer s.Close()
	if s.indexFrom != "walk" {
		t.Fatalf("a snapshot of an older journal generation was used")
	}
	check(s, false)
}

// TestSnapshotGeneration: the generation alone (the tree's folders are
// as they were) keeps a stale snapshot out, and so does a new journal.
func TestSnapshotGeneration(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	fill(t, s, 0)
	s.Close()
	snap := filepath.Join(dir, "index", snapName)
	old, _ := os.ReadFile(snap)
	s = mustOpen(t, dir)
	// Saved and deleted before the applier ran: the journal has records,
	// the tree does not change.
	commit(t, s, save("ann", "brief", "x"), del("ann", "brief"))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(snap, old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	if s.indexFrom != "walk" {
		t.Fatal("a snapshot of an older journal generation was used")
	}
	sameAsWalk(t, s, dir)
	s.Close()

	// A fresh store closed at once: a snapshot of generation 1. With the
	// journal moved away, the new one is at generation 1 too.
	dir = t.TempDir()
	s = mustOpen(t, dir)
	s.Close()
	s = mustOpen(t, dir)
	if s.indexFrom != "snapshot" {
		t.Fatalf("index from %q", s.indexFrom)
	}
	commit(t, s, save("ann", "k", "v"))
	s.Flush()
	crash := t.TempDir()
	copyTree(t, dir, crash)
	s.Close()
	os.Remove(filepath.Join(crash, "journal", "wal"))
	if err := os.WriteFile(filepath.Join(crash, "index", snapName), old, 0o600); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, crash)
	defer s.Close()
	if s.indexFrom != "walk" {
		t.Fatal("a snapshot was used with a new journal")
	}
	sameAsWalk(t, s, crash)
}

// TestSnapshotDamaged: a snapshot that fails its checks is not used.
func TestSnapshotDamaged(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	fill(t, s, 0)
	s.Close()
	snap := filepath.Join(dir, "index", snapName)
	for _, c := range []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"a flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b }},
		{"a flipped checksum byte", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"cut short", func(b []byte) []byte { return b[:len(b)-100] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"another format", func(b []byte) []byte {
			b[7] = '2'
			return binary.LittleEndian.AppendUint32(b[:len(b)-4], crc32.Checksum(b[:len(b)-4], castagnoli))
		}},
	} {
		b, err := os.ReadFile(snap)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := os.WriteFile(snap, c.damage(b), 0o600); err != nil {
			t.Fatal(err)
		}
		s = mustOpen(t, dir)
		if s.indexFrom != "walk" {
			t.Errorf("%s: index from %q", c.name, s.indexFrom)
		}
		sameAsWalk(t, s, dir)
		s.Close() // a good snapshot again, for the next case
	}
}

// TestSnapshotTreeChangedWhileStopped: files created or removed in the
// work tree while the store was closed (a checkout, a copy) are seen.
func TestSnapshotTreeChangedWhileStopped(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	fill(t, s, 0)
	s.Close()
	time.Sleep(20 * time.Millisecond) // past a coarse ctime tick
	mem := filepath.Join(dir, "repo", "agents", "ann", "mem", "episodic")
	if err := os.WriteFile(filepath.Join(mem, "new.md"), []byte("copied in"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	if s.indexFrom != "walk" {
		t.Fatalf("index from %q with a file added", s.indexFrom)
	}
	sameAsWalk(t, s, dir)
	s.Close()
	time.Sleep(20 * time.Millisecond)
	if err := os.RemoveAll(filepath.Join(dir, "repo", "agents", "bob")); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	defer s.Close()
	if s.indexFrom != "walk" || s.HasAgent("bob") {
		t.Fatalf("index from %q with an agent removed; bob known: %v", s.indexFrom, s.HasAgent("bob"))
	}
	sameAsWalk(t, s, dir)
}

// FuzzSnapshot: no snapshot, however made, crashes the decoder.
func FuzzSnapshot(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		f.Fatal(err)
	}
	commit(&testing.T{}, s, save("a", "x/y", "1"), &Change{Agent: "a", Space: SpaceMem, Key: "fact/k.md", Value: []byte("v")})
	s.Close()
	b, err := os.ReadFile(filepath.Join(dir, "index", snapName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[len(snapMagic)+8 : len(b)-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append([]byte(snapMagic), 1, 0, 0, 0, 0, 0, 0, 0)
		b = append(b, body...)
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
		s := &Store{repo: filepath.Join(dir, "repo", "agents"), agents: map[string]*agent{}, j: &journal{gen: 1}}
		s.decodeSnapshot(b, nil)
	})
}

// TestSnapshotBehindCheckpoint: a checkpoint leaves a snapshot of its new
// generation behind it, written while the store goes on; a start after a
// crash loads it and the journal's replay brings it up to date, forks
// and deletions included (issue 45: a restart after a crash walked the
// whole tree, 30.8 s at a million keys). A folder the journal does not
// change, changed while the store was stopped, still makes it walk.
func TestSnapshotBehindCheckpoint(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "index", snapName)
	s := mustOpen(t, dir)
	fill(t, s, 0)
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// Changes while it is written, and after: all in the journal.
	fill(t, s, 1)
	fork(t, s, &Fork{From: "ann", To: "dan"}, save("dan", "notes/own", "dan's"))
	commit(t, s, del("ann", "notes/deep/er/k"), save("cyd", "new/folder/k", "new"))
	crash(s)
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no snapshot behind the checkpoint: %v", err)
	}
	s = mustOpen(t, dir)
	if s.indexFrom != "snapshot" {
		t.Fatalf("index from %q after a crash, not from the snapshot behind the checkpoint", s.indexFrom)
	}
	sameAsWalk(t, s, dir)
	for _, c := range []struct{ agent, key, want string }{
		{"ann", "notes/today", "round 1"}, {"dan", "notes/today", "round 1"}, {"dan", "notes/own", "dan's"},
		{"cyd", "new/folder/k", "new"}, {"bob", "k", "bob's"},
	} {
		if v, _, err := s.Load(c.agent, c.key); err != nil || string(v) != c.want {
			t.Errorf("%s/%s = %q (%v), want %q", c.agent, c.key, v, err, c.want)
		}
	}
	if _, _, err := s.Load("ann", "notes/deep/er/k"); err == nil {
		t.Errorf("a key deleted after the snapshot is back")
	}

	// A file made behind the store's back in a folder no record of the
	// journal changes: the snapshot cannot know it, so it is not used.
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("ann", "after", "x"))
	crash(s)
	time.Sleep(20 * time.Millisecond) // past a coarse ctime tick
	behind := filepath.Join(dir, "repo", "agents", "bob", "state", "behind")
	if err := os.WriteFile(behind, []byte("made while stopped"), 0o644); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, dir)
	defer s.Close()
	if s.indexFrom != "walk" {
		t.Fatalf("index from %q though a folder the journal does not change was changed", s.indexFrom)
	}
	sameAsWalk(t, s, dir)
	if v, _, err := s.Load("bob", "behind"); err != nil || string(v) != "made while stopped" {
		t.Fatalf("bob/behind = %q (%v) after the walk", v, err)
	}
}
