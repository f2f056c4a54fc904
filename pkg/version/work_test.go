package version

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

func TestSaveUncommitted(t *testing.T) {
	dir := t.TempDir()
	r, paths, _, err := OpenWork(filepath.Join(dir, "repo"), filepath.Join(dir, "uncommitted"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := memStore{"agents/a/state/k": []byte("v"), "agents/b/state/k": []byte("w")}
	paths.Mark("agents/a/state/k", "agents/b/state/k")
	s, err := r.SaveUncommitted(st, paths, SaveOptions{Agent: "a", When: testTime})
	if err != nil || s.Nothing || s.Commit.Hash == "" {
		t.Fatalf("%+v %v", s, err)
	}
	if got, _ := paths.Under(""); len(got) != 1 || got[0] != "agents/b/state/k" {
		t.Fatalf("after a's commit, uncommitted: %v", got)
	}
	// Saved back to what HEAD holds: nothing committed, the path clean.
	paths.Mark("agents/a/state/k")
	s2, err := r.SaveUncommitted(st, paths, SaveOptions{Agent: "a", When: testTime})
	if err != nil || !s2.Nothing || s2.Head != s.Commit.Hash {
		t.Fatalf("%+v %v", s2, err)
	}
	if got, _ := paths.Under("agents/a/"); len(got) != 0 {
		t.Fatalf("uncommitted: %v", got)
	}
}

func TestPlanRestore(t *testing.T) {
	dir := t.TempDir()
	r, paths, _, err := OpenWork(filepath.Join(dir, "repo"), filepath.Join(dir, "uncommitted"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	one := change(t, r, map[string][]byte{"agents/a/state/k": []byte("1\n")}, "one").Hash
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("2\n")}, "two")
	st := memStore{"agents/a/state/k": []byte("3\n"), "agents/a/state/new": []byte("n\n")}
	paths.Mark("agents/a/state/k", "agents/a/state/new")
	rescans := 0
	hash, plan, err := r.PlanRestore(st, paths, "a", one[:12], func() error { rescans++; return nil })
	if err != nil || hash != one || rescans != 1 {
		t.Fatalf("%s %v (rescans %d)", hash, err, rescans)
	}
	if len(plan) != 2 || !plan[0].Delete || plan[0].Key != "new" || plan[1].Key != "k" || string(plan[1].Value) != "1\n" {
		t.Fatalf("plan: %+v", plan)
	}
	if _, _, err := r.PlanRestore(st, paths, "a", "nope", func() error { rescans++; return nil }); err == nil || rescans != 1 {
		t.Fatalf("an unknown revision: %v (rescans %d)", err, rescans)
	}
	boom := errors.New("boom")
	if _, _, err := r.PlanRestore(st, paths, "a", one, func() error { return boom }); err != boom {
		t.Fatalf("the rescan's error: %v", err)
	}
}

func TestOpenData(t *testing.T) {
	data := t.TempDir()
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	r, paths, err := OpenData(data, log)
	if err != nil || paths == nil || paths.NeedRescan() {
		t.Fatalf("%v %v", paths, err)
	}
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("1\n")}, "one")
	r.Close()
	// A lost set of paths is logged, and will be rescanned.
	os.MkdirAll(filepath.Join(data, "index"), 0o700)
	if err := os.WriteFile(filepath.Join(data, "index", "uncommitted"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, paths, err = OpenData(data, log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !paths.NeedRescan() || !strings.Contains(logged.String(), "unreadable") {
		t.Fatalf("rescan %v, logged %q", paths.NeedRescan(), logged.String())
	}
}
