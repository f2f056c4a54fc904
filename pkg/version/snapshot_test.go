package version

import (
	"errors"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// memStore is a live state in a map of tree paths.
type memStore map[string][]byte

func (m memStore) Refs() []string { return nil }

func (m memStore) List(ref, prefix string) ([]proto.StateRecord, error) { return nil, nil }

func (m memStore) Load(ref, key string) ([]byte, proto.StateRecord, error) {
	space, agent := state.SplitRef(ref)
	if v, ok := m[SpacePath(space, agent, key)]; ok {
		return v, proto.StateRecord{}, nil
	}
	return nil, proto.StateRecord{}, proto.Errorf(proto.ENOENT, "no %s", key)
}

func TestSaveCommitsThePathsWithTheAuditHead(t *testing.T) {
	r := open(t)
	st := memStore{"agents/a/state/k": []byte("v")}
	paths := []string{"agents/a/state/k", "agents/a/state/gone"}
	cm, err := r.Save(st, paths, SaveOptions{Agent: "a", Trailers: AuditTrailers(7, "abc"), Author: opts("").Author, When: testTime})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cm.Message, "Commit the state of a") || len(cm.Trailers) != 2 || cm.Trailers[0].Value != "7" || cm.Committer.Name != "oxiosd" {
		t.Fatalf("%+v", cm)
	}
	if fs := mustFiles(t, r, "HEAD", "agents/"); len(fs) != 1 || fs["agents/a/state/k"] != BlobHash([]byte("v")) {
		t.Fatal(fs)
	}
	if _, err := r.Save(st, paths, SaveOptions{When: testTime}); !errors.Is(err, ErrNothingToCommit) {
		t.Fatalf("saved again: %v", err)
	}
}

func TestRestoreChangeAndEntry(t *testing.T) {
	ch := Restore{Space: state.SpaceMem, Key: "m/1.md", Value: []byte("m"), Op: proto.OpMemRemember}
	c := ch.Change("a")
	if c.Agent != "a" || c.Space != state.SpaceMem || c.Key != "m/1.md" || string(c.Value) != "m" || c.Delete {
		t.Fatalf("%+v", c)
	}
	who := audit.Actor{UID: 5}
	e := ch.Entry(who, "a", "c0ffee")
	if e.Actor != who || e.Op != proto.OpMemRemember || e.Target != "a:m/1.md" || e.Args != audit.ArgsDigest([]byte("a:c0ffee")) {
		t.Fatalf("%+v", e)
	}
	del := Restore{Space: state.SpaceState, Key: "k", Delete: true, Op: proto.OpStateDelete}
	if c := del.Change("a"); !c.Delete || c.Value != nil || c.Space != state.SpaceState {
		t.Fatalf("%+v", c)
	}
}

func TestRestorePlanDeletesFirstAndLeavesSysAlone(t *testing.T) {
	r := open(t)
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("old"), "agents/a/mem/m/1.md": []byte("m")}, "one")
	want := mustFiles(t, r, "HEAD", "agents/a/")
	have := map[string]string{
		"agents/a/state/k":      BlobHash([]byte("new")),
		"agents/a/state/x":      BlobHash([]byte("x")),
		"agents/a/sys/budget":   BlobHash([]byte("{}")),
		"agents/a/mem/m/1.md":   want["agents/a/mem/m/1.md"],
		"agents/a/mem/m/2.md":   BlobHash([]byte("2")),
		"agents/a/other/ignore": BlobHash([]byte("i")),
	}
	plan, err := r.RestorePlan(have, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 3 || !plan[0].Delete || !plan[1].Delete || plan[2].Delete {
		t.Fatalf("%+v", plan)
	}
	for _, ch := range plan {
		switch ch.Key {
		case "x":
			if ch.Op != proto.OpStateDelete || ch.Space != state.SpaceState {
				t.Errorf("%+v", ch)
			}
		case "m/2.md":
			if ch.Op != proto.OpMemForget {
				t.Errorf("%+v", ch)
			}
		case "k":
			if ch.Op != proto.OpStateSave || string(ch.Value) != "old" {
				t.Errorf("%+v", ch)
			}
		default:
			t.Errorf("%+v", ch)
		}
	}
	var rec proto.CommitRecord
	RestoredRecord(&rec, "a", "HEAD", plan)
	if len(rec.Changed) != 3 || rec.Changed[2].Action != Modified || !strings.HasPrefix(rec.Message, "restored 3 keys of a to HEAD") {
		t.Fatalf("%+v", rec)
	}
}
