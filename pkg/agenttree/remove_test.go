package agenttree

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// live is a state store of tree paths and their values, as both a
// removal and a commit read it.
type live map[string][]byte

func (s live) keys(ref string) []string {
	space, agent := state.SplitRef(ref)
	var out []string
	for p := range s {
		if sp, a, k, _ := version.SplitSpacePath(p); sp == space && a == agent {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (s live) Keys(ref string) (int, int64) { return len(s.keys(ref)), 0 }

func (s live) List(ref, prefix string) ([]proto.StateRecord, error) {
	var out []proto.StateRecord
	for _, k := range s.keys(ref) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, proto.StateRecord{Key: k})
		}
	}
	return out, nil
}

func (s live) Refs() []string { return nil }

func (s live) Load(ref, key string) ([]byte, proto.StateRecord, error) {
	space, agent := state.SplitRef(ref)
	if v, ok := s[version.SpacePath(space, agent, key)]; ok {
		return v, proto.StateRecord{}, nil
	}
	return nil, proto.StateRecord{}, proto.Errorf(proto.ENOENT, "no %s", key)
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	r, paths, _, err := version.OpenWork(filepath.Join(dir, "repo"), filepath.Join(dir, "uncommitted"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	st := live{"agents/a/state/k": []byte("v\n"), "agents/a/mem/working/1.md": []byte("m\n"), "agents/b/state/k": []byte("w\n")}
	paths.Mark("agents/a/state/k", "agents/a/mem/working/1.md", "agents/b/state/k")
	w := &version.Work{Repo: r, Paths: paths, State: st, Rescan: func() error { return nil }, Head: func() (uint64, string) { return 1, "h" }}
	var audited []string
	au := func(op, target, result, event string, data any) (uint64, error) {
		audited = append(audited, op+" "+target+" "+result)
		return uint64(len(audited)), nil
	}
	var batch []*audit.Entry
	var event *proto.AgentRecord
	removing := func(chs []*state.Change, es []*audit.Entry, data *proto.AgentRecord) []error {
		batch, event = es, data
		for i, ch := range chs {
			if ch != nil {
				delete(st, version.SpacePath(ch.Space, ch.Agent, ch.Key))
				paths.Mark(version.SpacePath(ch.Space, ch.Agent, ch.Key))
			} else if i != len(chs)-1 {
				t.Errorf("a deletion without its change at %d", i)
			}
		}
		return make([]error, len(chs))
	}
	who := audit.Actor{UID: 0}
	rec := Record(st, "a", 0)
	rec.Restore, err = Before(w, "a", 0, "", au)
	if err != nil || rec.Restore == "" {
		t.Fatalf("Before: %q %v", rec.Restore, err)
	}
	rec, err = Remove(w, st, rec, who, 0, "", "dg", removing, au)
	if err != nil || !rec.Removed || rec.Restore == "" || rec.Commit == "" || rec.Commit == rec.Restore || rec.Text == "" {
		t.Fatalf("%+v %v", rec, err)
	}
	if len(batch) != 3 || batch[0].Op != proto.OpStateDelete || batch[1].Op != proto.OpMemForget ||
		*batch[2] != (audit.Entry{Actor: who, Op: proto.OpAgentRemove, Target: "a:", Args: "dg"}) {
		t.Fatalf("batch %+v", batch)
	}
	if event.Restore != rec.Restore || !event.Removed || event.Commit != "" {
		t.Errorf("the event's record %+v", event)
	}
	if st["agents/b/state/k"] == nil || len(st) != 1 {
		t.Errorf("left %v", st)
	}
	// The removal's commit holds a's deletion, not b's change.
	if cm, _ := r.Show(rec.Commit); len(cm.Changed) != 2 {
		t.Errorf("the removal's commit changed %+v", cm.Changed)
	}
	// A failed deletion fails the removal, audited.
	st["agents/a/state/k"] = []byte("again\n")
	boom := errors.New("boom")
	fails := func(chs []*state.Change, es []*audit.Entry, data *proto.AgentRecord) []error {
		return []error{boom, nil}
	}
	if _, err := Remove(w, st, Record(st, "a", 0), who, 0, "", "dg", fails, au); !errors.Is(err, boom) || !strings.HasPrefix(audited[len(audited)-1], proto.OpAgentRemove+" a EIO") {
		t.Fatalf("%v %q", err, audited)
	}
}
