package version

import (
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
