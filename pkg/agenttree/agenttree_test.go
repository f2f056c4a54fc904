package agenttree

import (
	"reflect"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// store is a state store of refs and their keys (values of one byte).
type store map[string][]string

func (s store) Keys(ref string) (int, int64) { return len(s[ref]), int64(len(s[ref])) }

func (s store) List(ref, prefix string) ([]proto.StateRecord, error) {
	keys, ok := s[ref]
	if !ok {
		return nil, proto.Errorf(proto.ENOENT, "no %s", ref)
	}
	var out []proto.StateRecord
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, proto.StateRecord{Key: k})
		}
	}
	return out, nil
}

func TestExistsAndRecord(t *testing.T) {
	st := store{
		state.Ref(state.SpaceState, "a"): {"k2", "k1"},
		state.Ref(state.SpaceMem, "a"):   {"working/1.md"},
		state.Ref(state.SpaceSys, "a"):   {Policy, Budget, "schedules/nightly.json"},
		state.Ref(state.SpaceSys, "b"):   {Budget},
	}
	if !Exists(st, "a") || !Exists(st, "b") || Exists(st, "c") {
		t.Fatal("an agent exists when a tree of it holds a key")
	}
	rec := Record(st, "a", 2)
	want := proto.AgentRecord{Type: proto.RecordAgent, Agent: "a", Policy: "own", Keys: 2, Size: 2, Memories: 1, Budget: true, Jobs: []string{"nightly"}, Runs: 2}
	if !reflect.DeepEqual(rec, want) {
		t.Fatalf("record %+v, want %+v", rec, want)
	}
	if rec = Record(st, "b", 0); rec.Policy != "default" || !rec.Budget || rec.Keys != 0 {
		t.Fatalf("an agent of a budget only: %+v", rec)
	}
}

func TestListed(t *testing.T) {
	st := store{state.Ref(state.SpaceState, "a"): {"k"}, state.Ref(state.SpaceSys, "c"): {Policy}, state.Ref(state.SpaceState, "gone"): nil}
	got := Listed(st, []string{"a", "b", "c", "gone"}, func(agent string) bool { return agent != "c" })
	if !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatal(got)
	}
}

func TestCreation(t *testing.T) {
	ch, e := Creation("a", audit.Actor{UID: 7})
	if ch.Agent != "a" || ch.Space != state.SpaceSys || ch.Key != Policy || string(ch.Value) != string(policy.DefaultText()) || ch.Delete {
		t.Fatalf("%+v", ch)
	}
	if *e != (audit.Entry{Actor: audit.Actor{UID: 7}, Op: proto.OpAgentCreate, Target: "a:policy.toml", Args: audit.ArgsDigest(ch.Value)}) {
		t.Fatalf("%+v", e)
	}
}

func TestRemoval(t *testing.T) {
	st := store{
		state.Ref(state.SpaceState, "a"): {"k2", "k1"},
		state.Ref(state.SpaceMem, "a"):   {"working/1.md"},
		state.Ref(state.SpaceSys, "a"):   {Policy},
	}
	want := []Deletion{
		{state.SpaceState, "k1", proto.OpStateDelete, "a:k1"},
		{state.SpaceState, "k2", proto.OpStateDelete, "a:k2"},
		{state.SpaceMem, "working/1.md", proto.OpMemForget, "a:working/1.md"},
		{state.SpaceSys, Policy, proto.OpAgentRemove, "a:" + state.SpaceSys + "/" + Policy},
	}
	if got := Removal(st, "a"); !reflect.DeepEqual(got, want) {
		t.Fatalf("removal %+v, want %+v", got, want)
	}
	if got := Removal(st, "none"); len(got) != 0 {
		t.Fatalf("an agent of no trees: %+v", got)
	}
}
