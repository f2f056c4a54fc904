package version

import (
	"context"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestSpacePaths(t *testing.T) {
	p := SpacePath("", "a", "x/y")
	if p != "agents/a/state/x/y" {
		t.Fatal(p)
	}
	if sp, a, k, ok := SplitSpacePath("agents/a/mem/working/1.md"); !ok || sp != "mem" || a != "a" || k != "working/1.md" {
		t.Fatal(sp, a, k, ok)
	}
	for _, bad := range []string{"x/a/state/k", "agents//state/k", "agents/a/other/k", "agents/a/state/"} {
		if _, _, _, ok := SplitSpacePath(bad); ok {
			t.Errorf("%q split", bad)
		}
	}
	if AgentPrefix("") != "agents/" || AgentPrefix("a") != "agents/a/" {
		t.Error("prefix")
	}
	chs := OnlyUnder([]proto.PathChange{{Path: "agents/a/state/k"}, {Path: "agents/b/state/k"}}, "agents/a/")
	if len(chs) != 1 {
		t.Error(chs)
	}
}

func TestWireError(t *testing.T) {
	for err, code := range map[error]string{ErrUnknownRevision: proto.ENOENT, ErrBadName: proto.EINVAL, ErrExists: proto.EEXIST} {
		if pe, ok := WireError(err).(*proto.Error); !ok || pe.Code != code {
			t.Errorf("%v: %v", err, WireError(err))
		}
	}
}

func TestRecordReadsTheAuditTrailers(t *testing.T) {
	rec := Record(Commit{Hash: "h", Trailers: []Trailer{{Key: TrailerAuditSeq, Value: "12"}, {Key: TrailerAuditHash, Value: "abc"}}})
	if rec.AuditHead == nil || rec.AuditHead.Seq != 12 || rec.AuditHead.Hash != "abc" || rec.Changed == nil {
		t.Fatalf("%+v", rec)
	}
}

func TestDiffBetweenCommitsAndAgainstTheLiveState(t *testing.T) {
	r := open(t)
	one := change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n"), "agents/a/state/gone": []byte("x\n"), "agents/b/state/k": []byte("b\n")}, "one").Hash
	two := change(t, r, map[string][]byte{"agents/a/state/k": []byte("w\n"), "agents/a/state/gone": nil}, "two").Hash
	recs, err := r.Diff(nil, nil, one, two, "agents/a/", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Path != "agents/a/state/gone" || recs[0].Action != Deleted || recs[1].Action != Modified ||
		recs[0].Type != proto.RecordDiff || !strings.Contains(recs[1].Patch, "+w") {
		t.Fatalf("between commits: %+v", recs)
	}
	// Live: the uncommitted paths are read from the state, the new side
	// of a patch too.
	live := memStore{"agents/a/state/k": []byte("w\n"), "agents/a/state/new": []byte("n\n")}
	under := func(prefix string) ([]string, error) {
		if prefix != "agents/a/" {
			t.Fatalf("under %q", prefix)
		}
		return []string{"agents/a/state/new"}, nil
	}
	recs, err = r.Diff(live, under, two, "", "agents/a/", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Path != "agents/a/state/new" || recs[0].Action != Added || !strings.Contains(recs[0].Patch, "+n") {
		t.Fatalf("against the live state: %+v", recs)
	}
	if _, err := r.Diff(nil, nil, "nosuch", two, "", false); !isErr(err, ErrUnknownRevision) {
		t.Fatalf("unknown revision: %v", err)
	}
}

func TestRecordsAndShowRecord(t *testing.T) {
	r := open(t)
	one := change(t, r, map[string][]byte{"agents/a/state/k": []byte("1\n"), "agents/b/state/k": []byte("1\n")}, "one").Hash
	two := change(t, r, map[string][]byte{"agents/b/state/k": []byte("2\n")}, "two").Hash
	if _, err := r.Tag("v1", one); err != nil {
		t.Fatal(err)
	}
	var recs []proto.CommitRecord
	collect := func(rec *proto.CommitRecord) error { recs = append(recs, *rec); return nil }
	if err := r.Records(context.Background(), "HEAD", "agents/a/", 0, collect); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Commit != one || len(recs[0].Changed) != 1 || recs[0].Changed[0].Path != "agents/a/state/k" || len(recs[0].Tags) != 1 || recs[0].Tags[0] != "v1" {
		t.Fatalf("the commits of a: %+v", recs)
	}
	recs = nil
	if err := r.Records(context.Background(), "HEAD", "", 1, collect); err != nil || len(recs) != 1 || recs[0].Commit != two {
		t.Fatalf("the last commit: %+v %v", recs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Records(ctx, "HEAD", "", 0, collect); err != context.Canceled {
		t.Fatalf("after ctx ended: %v", err)
	}
	rec, err := r.ShowRecord(one, "agents/b/")
	if err != nil || rec.Commit != one || len(rec.Changed) != 1 || rec.Changed[0].Path != "agents/b/state/k" {
		t.Fatalf("show: %+v %v", rec, err)
	}
	if _, err := r.ShowRecord("nosuch", ""); !isErr(err, ErrUnknownRevision) {
		t.Fatalf("show of an unknown revision: %v", err)
	}
}
