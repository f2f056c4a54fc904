package skill

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// memStore is a Store in a map whose failAt'th save fails.
type memStore struct {
	m      map[string][]byte
	saves  int
	failAt int
}

func (s *memStore) List(_ context.Context, prefix string, fn func(proto.StateRecord) error) error {
	for _, k := range slices.Sorted(maps.Keys(s.m)) {
		if strings.HasPrefix(k, prefix) {
			if err := fn(proto.StateRecord{Key: k, Size: int64(len(s.m[k]))}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *memStore) Load(_ context.Context, k string) ([]byte, error) {
	v, ok := s.m[k]
	if !ok {
		return nil, proto.Errorf(proto.ENOENT, "no key %s", k)
	}
	return v, nil
}

func (s *memStore) Save(_ context.Context, k string, v []byte) error {
	s.saves++
	if s.failAt > 0 && s.saves == s.failAt {
		return proto.Errorf(proto.EDQUOT, "state quota")
	}
	s.m[k] = v
	return nil
}

func (s *memStore) Delete(_ context.Context, k string) error {
	if _, ok := s.m[k]; !ok {
		return proto.Errorf(proto.ENOENT, "no key %s", k)
	}
	delete(s.m, k)
	return nil
}

func TestInstallListRemove(t *testing.T) {
	ctx := context.Background()
	st := &memStore{m: map[string][]byte{"notes/a": []byte("keep")}}
	v1 := []FileData{{"old.md", []byte("old")}, {"ref.md", []byte("r1")}, {File, []byte("---\nname: demo\ndescription: v1\n---\nbody 1\n")}}
	sk, _ := Parse(v1[2].Data)
	if err := Install(ctx, st, sk, v1, false); err != nil {
		t.Fatal(err)
	}
	if err := Install(ctx, st, sk, v1, false); err == nil || !strings.Contains(err.Error(), "EEXIST") {
		t.Fatalf("second install without replace: %v", err)
	}
	v2 := []FileData{{"ref.md", []byte("r2")}, {File, []byte("---\nname: demo\ndescription: v2\n---\nbody 2\n")}}
	sk2, _ := Parse(v2[1].Data)
	before := maps.Clone(st.m)
	// A save that fails halfway: the old version is put back whole.
	st.failAt = st.saves + 2
	if err := Install(ctx, st, sk2, v2, true); err == nil || !strings.Contains(err.Error(), "quota") {
		t.Fatalf("failing install: %v", err)
	}
	st.failAt = 0
	if !maps.EqualFunc(before, st.m, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("a failed replace left %q, want %q", st.m, before)
	}
	if err := Install(ctx, st, sk2, v2, true); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.m["skills/demo/old.md"]; ok {
		t.Fatal("replace kept a file the new version does not have")
	}
	list, err := List(ctx, st)
	if err != nil || len(list) != 1 || list[0].Description != "v2" || strings.Join(list[0].Files, ",") != "SKILL.md,ref.md" {
		t.Fatalf("List: %v %+v", err, list)
	}
	got, err := Get(ctx, st, "demo")
	if err != nil || got.Body != "body 2\n" {
		t.Fatalf("Get: %v %+v", err, got)
	}
	// A folder without SKILL.md is listed with what is wrong.
	st.m["skills/broken/x"] = []byte("x")
	list, _ = List(ctx, st)
	if len(list) != 2 || list[0].Name != "broken" || list[0].Err == nil {
		t.Fatalf("broken skill: %+v", list[0])
	}
	if n, err := Remove(ctx, st, "demo"); err != nil || n != 2 {
		t.Fatalf("Remove: %d %v", n, err)
	}
	if _, err := Remove(ctx, st, "demo"); err == nil || !strings.Contains(err.Error(), "ENOENT") {
		t.Fatalf("Remove again: %v", err)
	}
	if _, err := Remove(ctx, st, "../notes"); err == nil {
		t.Fatal("Remove of a name that leaves skills/")
	}
	if string(st.m["notes/a"]) != "keep" {
		t.Fatal("skills touched a key outside skills/")
	}
}
