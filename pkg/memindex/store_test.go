package memindex

import (
	"slices"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// store is a Store in memory: files by ref, by key.
type store map[string]map[string][]byte

func (s store) Refs() []string {
	var refs []string
	for ref := range s {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	return refs
}

func (s store) List(ref, prefix string) ([]proto.StateRecord, error) {
	if s[ref] == nil {
		return nil, proto.Errorf(proto.ENOENT, "no %s", ref)
	}
	var out []proto.StateRecord
	for k := range s[ref] {
		out = append(out, proto.StateRecord{Key: k})
	}
	return out, nil
}

func (s store) Load(ref, key string) ([]byte, proto.StateRecord, error) {
	v, ok := s[ref][key]
	if !ok {
		return nil, proto.StateRecord{}, proto.Errorf(proto.ENOENT, "no %s", key)
	}
	return v, proto.StateRecord{Key: key}, nil
}

func TestStoreSource(t *testing.T) {
	st := store{
		state.Ref(state.SpaceMem, "a"):   {"episodic/m1.md": []byte("one")},
		state.Ref(state.SpaceMem, "b"):   {},
		state.Ref(state.SpaceSys, "c"):   {"budget.json": []byte("{}")},
		state.Ref(state.SpaceState, "a"): {"x": []byte("y")},
	}
	if got := StoreAgents(st); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatal(got)
	}
	src := StoreSource(st)
	if keys := src.Keys("a"); !slices.Equal(keys, []string{"episodic/m1.md"}) {
		t.Fatal(keys)
	}
	if keys := src.Keys("none"); len(keys) != 0 {
		t.Fatal(keys)
	}
	if v, err := src.Read("a", "episodic/m1.md"); err != nil || string(v) != "one" {
		t.Fatal(v, err)
	}
	if _, err := StoreReader(st)("c", "budget.json"); err == nil {
		t.Fatal("a file of another space read as a memory")
	}
}
