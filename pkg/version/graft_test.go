package version

import (
	"fmt"
	"maps"
	"strings"
	"testing"
)

// relative keeps the files under prefix/, with the prefix cut off.
func relative(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for p, h := range m {
		if rest, ok := strings.CutPrefix(p, prefix+"/"); ok {
			out[rest] = h
		}
	}
	return out
}

func graft(t *testing.T, r *Repo, fn func(tx *Tx) error) Commit {
	t.Helper()
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := fn(tx); err != nil {
		tx.Abort()
		t.Fatal(err)
	}
	c, err := tx.Commit(opts("graft"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGraftForksAtHeadAndOlder(t *testing.T) {
	r := open(t)
	old := change(t, r, map[string][]byte{"agents/a/state/x": []byte("1"), "agents/a/state/d/y": []byte("2"), "agents/z/keep": []byte("z")}, "one")
	change(t, r, map[string][]byte{"agents/a/state/x": []byte("1b"), "agents/a/state/new": []byte("3")}, "two")

	packsBefore := packCount(t, r)
	c := graft(t, r, func(tx *Tx) error { return tx.Graft("agents/b", "HEAD", "agents/a") })
	if len(c.Changed) != 1 || c.Changed[0].Path != "agents/b" || c.Changed[0].Action != Added {
		t.Fatalf("fork commit changes: %+v", c.Changed)
	}
	// No blob was written: one pack of the commit, the root and agents/.
	if n := packCount(t, r) - packsBefore; n != 1 {
		t.Fatalf("%d packs written", n)
	}
	head := mustFiles(t, r, "HEAD", "")
	if a, b := relative(head, "agents/a"), relative(head, "agents/b"); !maps.Equal(a, b) || len(a) != 3 {
		t.Fatalf("fork at HEAD: a %v b %v", a, b)
	}
	// At an older commit.
	graft(t, r, func(tx *Tx) error { return tx.Graft("agents/c", old.Hash, "agents/a") })
	oldA := relative(mustFiles(t, r, old.Hash, ""), "agents/a")
	if c := relative(mustFiles(t, r, "HEAD", ""), "agents/c"); !maps.Equal(oldA, c) {
		t.Fatalf("fork at %s: %v, want %v", old.Hash[:8], c, oldA)
	}
	// Diverge, then diff b against a, and b against its fork point.
	change(t, r, map[string][]byte{"agents/b/state/x": []byte("changed"), "agents/b/state/d/y": nil, "agents/b/state/only-b": []byte("b")}, "diverge")
	ds, err := r.DiffFolders("HEAD", "agents/a", "HEAD", "agents/b")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(ds)
	for _, want := range []string{"state/d/y deleted", "state/only-b added", "state/x modified"} {
		f := strings.Fields(want)
		found := false
		for _, d := range ds {
			found = found || d.Path == f[0] && d.Action == f[1]
		}
		if !found {
			t.Errorf("diff a..b lacks %s: %s", want, got)
		}
	}
	if len(ds) != 3 {
		t.Errorf("diff a..b: %s", got)
	}
	same, err := r.DiffFolders(c.Hash, "agents/a", "HEAD", "agents/a")
	if err != nil || len(same) != 0 {
		t.Errorf("a did not change since the fork: %v %v", same, err)
	}
	// Removing a fork is one change too.
	rm := graft(t, r, func(tx *Tx) error { return tx.DeleteTree("agents/c") })
	if len(rm.Changed) != 1 || rm.Changed[0].Action != Deleted {
		t.Fatalf("remove: %+v", rm.Changed)
	}
	if len(relative(mustFiles(t, r, "HEAD", ""), "agents/c")) != 0 {
		t.Fatal("agents/c still there")
	}
	// Plain git agrees with what this package reads.
	if !maps.Equal(lsTree(t, r.Dir(), "HEAD"), mustFiles(t, r, "HEAD", "")) {
		t.Fatal("git ls-tree differs")
	}
	fsck(t, r.Dir())
	// The committer's cache stays right after a graft: a later put below
	// the fork lands in the forked folder.
	change(t, r, map[string][]byte{"agents/b/state/after": []byte("x")}, "after")
	if !maps.Equal(lsTree(t, r.Dir(), "HEAD"), mustFiles(t, r, "HEAD", "")) {
		t.Fatal("git ls-tree differs after a put below a graft")
	}
}

func TestGraftRefusals(t *testing.T) {
	r := open(t)
	change(t, r, map[string][]byte{"agents/a/f": []byte("1")}, "one")
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort()
	if err := tx.Graft("agents/b", "HEAD", "agents/nope"); !isErr(err, ErrUnknownRevision) {
		t.Errorf("graft of a missing folder: %v", err)
	}
	if err := tx.Graft("agents/b", "HEAD", "agents/a/f"); !isErr(err, ErrUnknownRevision) {
		t.Errorf("graft of a file: %v", err)
	}
	if err := tx.Graft("agents/b", "nope", "agents/a"); !isErr(err, ErrUnknownRevision) {
		t.Errorf("graft at an unknown revision: %v", err)
	}
	if err := tx.Graft("../b", "HEAD", "agents/a"); !isErr(err, ErrBadName) {
		t.Errorf("graft to ../b: %v", err)
	}
	if err := tx.Put("agents/b/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Graft("agents/b", "HEAD", "agents/a"); !isErr(err, ErrBadName) {
		t.Errorf("graft over a pending put: %v", err)
	}
	if err := tx.Graft("agents/c", "HEAD", "agents/a"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Put("agents/c", []byte("y")); !isErr(err, ErrBadName) {
		t.Errorf("put over a graft: %v", err)
	}
	if err := tx.DeleteTree("agents"); !isErr(err, ErrBadName) {
		t.Errorf("nested grafts: %v", err)
	}
}

func packCount(t *testing.T, r *Repo) int {
	t.Helper()
	r.db.mu.RLock()
	defer r.db.mu.RUnlock()
	return len(r.db.packs)
}

// Files changed below a folder set whole, in the same transaction,
// change the folder set: a fork's own changes are part of its commit.
func TestGraftWithChangesBelow(t *testing.T) {
	r := open(t)
	point := change(t, r, map[string][]byte{
		"agents/a/state/x": []byte("1"), "agents/a/sys/budget.json": []byte("used"),
		"agents/a/sys/schedules/j.json": []byte("job"), "agents/a/sys/schedules/k.json": []byte("job2"),
	}, "one")
	c := graft(t, r, func(tx *Tx) error {
		if err := tx.Graft("agents/b", point.Hash, "agents/a"); err != nil {
			return err
		}
		for p, v := range map[string][]byte{"agents/b/sys/budget.json": []byte("zero"), "agents/b/state/d/new": []byte("n")} {
			if err := tx.Put(p, v); err != nil {
				return err
			}
		}
		for _, p := range []string{"agents/b/sys/schedules/j.json", "agents/b/sys/schedules/k.json", "agents/b/state/absent"} {
			if err := tx.Delete(p); err != nil {
				return err
			}
		}
		// A folder removed whole can be given new files.
		if err := tx.DeleteTree("agents/gone"); err != nil {
			return err
		}
		return tx.Put("agents/gone/f", []byte("f"))
	})
	want := map[string]string{
		"agents/b":                      Added,
		"agents/b/state/d/new":          Added,
		"agents/b/sys/budget.json":      Modified,
		"agents/b/sys/schedules/j.json": Deleted,
		"agents/b/sys/schedules/k.json": Deleted,
		"agents/gone/f":                 Added,
	}
	got := map[string]string{}
	for _, ch := range c.Changed {
		got[ch.Path] = ch.Action
	}
	if !maps.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	b := relative(mustFiles(t, r, "HEAD", ""), "agents/b")
	wantB := map[string]string{"state/x": BlobHash([]byte("1")), "state/d/new": BlobHash([]byte("n")), "sys/budget.json": BlobHash([]byte("zero"))}
	if !maps.Equal(b, wantB) {
		t.Fatalf("agents/b %v, want %v", b, wantB)
	}
	// The origin is untouched, and plain git reads the same trees (the
	// emptied schedules folder is gone, as git stores no empty folder).
	if a := relative(mustFiles(t, r, "HEAD", ""), "agents/a"); len(a) != 4 {
		t.Fatalf("agents/a %v", a)
	}
	if !maps.Equal(lsTree(t, r.Dir(), "HEAD"), mustFiles(t, r, "HEAD", "")) {
		t.Fatal("git ls-tree differs")
	}
	fsck(t, r.Dir())
}
