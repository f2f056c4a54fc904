package version

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// listStore is a memStore that lists its keys, as a rescan walks them.
type listStore struct{ memStore }

func (s listStore) Refs() []string {
	var refs []string
	for p := range s.memStore {
		space, agent, _, _ := SplitSpacePath(p)
		if ref := state.Ref(space, agent); !slices.Contains(refs, ref) {
			refs = append(refs, ref)
		}
	}
	return refs
}

func (s listStore) List(ref, prefix string) ([]proto.StateRecord, error) {
	var recs []proto.StateRecord
	for p := range s.memStore {
		space, agent, key, _ := SplitSpacePath(p)
		if state.Ref(space, agent) == ref {
			recs = append(recs, proto.StateRecord{Key: key})
		}
	}
	return recs, nil
}

func TestOpenWorkAndMarkChanged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "uncommitted")
	r, paths, warn, err := OpenWork(filepath.Join(dir, "repo"), file)
	if err != nil || warn != nil || paths.NeedRescan() {
		t.Fatalf("a new repository: %v %v, rescan %v", err, warn, paths.NeedRescan())
	}
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("1\n"), "agents/a/state/same": []byte("s\n")}, "one")
	r.Close()
	// With a commit and no saved set, the set is unknown: the state is
	// compared with HEAD.
	r, paths, _, err = OpenWork(filepath.Join(dir, "repo"), file)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !paths.NeedRescan() {
		t.Fatal("a lost set is not marked for a rescan")
	}
	live := listStore{memStore{"agents/a/state/k": []byte("2\n"), "agents/a/state/same": []byte("s\n")}}
	if n, scanned, err := r.MarkChanged(live, paths); err != nil || !scanned || n != 1 {
		t.Fatalf("marked %d (%v, %v), want the one changed", n, scanned, err)
	}
	if got, _ := paths.Under("agents/a/"); len(got) != 1 || got[0] != "agents/a/state/k" {
		t.Fatalf("uncommitted after the rescan: %v", got)
	}
	if _, scanned, _ := r.MarkChanged(live, paths); scanned {
		t.Fatal("a known set is scanned again")
	}
	files, err := r.LiveFilesUnder(live, paths, "agents/a/")
	if err != nil || files["agents/a/state/k"] != BlobHash([]byte("2\n")) || files["agents/a/state/same"] != BlobHash([]byte("s\n")) {
		t.Fatalf("live files: %v %v", files, err)
	}
}

func TestHistory(t *testing.T) {
	r := open(t)
	var recs []proto.CommitRecord
	collect := func(rec *proto.CommitRecord) error { recs = append(recs, *rec); return nil }
	if err := r.History(context.Background(), "", "", 0, collect); err != nil || len(recs) != 0 {
		t.Fatalf("no commits: %v %v", recs, err)
	}
	if err := r.History(context.Background(), "HEAD", "", 0, collect); !isErr(err, ErrUnknownRevision) {
		t.Fatalf("HEAD named, no commits: %v", err)
	}
	if err := r.History(context.Background(), "", "", -1, collect); proto.AsError(err).Code != proto.EINVAL {
		t.Fatalf("n < 0: %v", err)
	}
	one := change(t, r, map[string][]byte{"agents/a/state/k": []byte("1\n")}, "one").Hash
	if err := r.History(context.Background(), "", "agents/a/", 0, collect); err != nil || len(recs) != 1 || recs[0].Commit != one {
		t.Fatalf("one commit: %v %v", recs, err)
	}
}

func TestNothingAndRestoreRecords(t *testing.T) {
	when := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	rec := NothingRecord("h", when)
	if rec.Commit != "h" || rec.Message != "nothing to commit" || rec.Changed == nil || rec.Time != "2026-01-02T03:04:05.000000006Z" {
		t.Fatalf("%+v", rec)
	}
	if m := RestoreMessage("a", "v1", "0123456789abcdef"); m != "Restore the state of a to v1 (0123456789ab)" {
		t.Fatal(m)
	}
	if m := RestoreMessage("a", "v1", "0123"); m != "Restore the state of a to v1 (0123)" {
		t.Fatal(m)
	}
}
