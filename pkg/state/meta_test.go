package state

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// TestKeyMetadata: a key's mode and times (the mount's chmod and touch)
// are kept with its record: a plain save keeps the mode, a delete drops
// it, and both survive a crash (journal replay) and a clean restart.
func TestKeyMetadata(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	before := time.Now()
	commit(t, s, save("a", "f", "v"), save("a", "d/g", "w"))
	chmod := &Change{Agent: "a", Key: "f", Value: []byte("v"), Mode: proto.ModeSet | 0, Mod: past}
	if errs := commit(t, s, chmod); errs[0] != nil {
		t.Fatal(errs[0])
	}
	check := func(s *Store, when string) {
		t.Helper()
		rec, err := s.Stat("a", "f")
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if rec.Mode != proto.ModeSet|0 {
			t.Errorf("%s: mode %#o, want ModeSet|0", when, rec.Mode)
		}
		if !rec.Modified.Equal(past) {
			t.Errorf("%s: mtime %v, want %v", when, rec.Modified, past)
		}
		if rec.Changed.Before(before) {
			t.Errorf("%s: ctime %v is before the change", when, rec.Changed)
		}
		if g, _ := s.Stat("a", "d/g"); g.Mode != 0 || !g.Changed.Equal(g.Modified) {
			t.Errorf("%s: an untouched key has mode %#o, ctime %v != mtime %v", when, g.Mode, g.Changed, g.Modified)
		}
		if recs, _ := s.List("a", ""); len(recs) != 2 || recs[1].Key != "f" || recs[1].Mode != proto.ModeSet {
			t.Errorf("%s: list: %+v", when, recs)
		}
	}
	check(s, "at once")

	// A crash: the journal alone holds the change.
	s.Flush()
	crash := t.TempDir()
	copyTree(t, dir, crash)
	s.Close()
	s2, err := Open(crash, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(s2, "after replay")
	if fi, err := os.Stat(filepath.Join(crash, "repo", "agents", "a", "state", "f")); err != nil || !fi.ModTime().Equal(past) {
		t.Errorf("the key's file has mtime %v, %v", fi.ModTime(), err)
	}
	s2.Close()
	// A clean restart (key snapshot, DATA/index/meta).
	s3, err := Open(crash, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check(s3, "after a clean restart")

	// A plain save keeps the mode, and its time is its own again.
	commit(t, s3, save("a", "f", "new"))
	rec, _ := s3.Stat("a", "f")
	if rec.Mode != proto.ModeSet || rec.Modified.Equal(past) || !rec.Changed.Equal(rec.Modified) {
		t.Errorf("after a plain save: %+v", rec)
	}
	// A delete drops it: the key made again has no mode.
	commit(t, s3, del("a", "f"))
	commit(t, s3, save("a", "f", "again"))
	if rec, _ := s3.Stat("a", "f"); rec.Mode != 0 {
		t.Errorf("a key made again after a delete has mode %#o", rec.Mode)
	}
	// Folder times move when a name comes or goes.
	t0, ok := s3.FolderTime("a", "d")
	commit(t, s3, save("a", "d/h", "x"))
	t1, ok1 := s3.FolderTime("a", "d")
	if !ok1 || ok && !t1.After(t0) {
		t.Errorf("folder time after a new key: %v %v (before %v %v)", t1, ok1, t0, ok)
	}
	s3.Close()
}
