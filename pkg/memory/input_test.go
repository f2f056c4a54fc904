package memory

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func TestFromInput(t *testing.T) {
	now := time.Now().UTC()
	m, err := FromInput(proto.MemoryInput{Kind: Working, Text: "x", Tags: []string{"b", "a", "b"}}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Tags) != 2 || m.Tags[0] != "a" || !m.Expires.Equal(now.Add(time.Hour)) || m.ID == "" {
		t.Fatalf("%+v", m)
	}
	if m, _ := FromInput(proto.MemoryInput{Text: "x"}, now, time.Hour); m.Kind != Episodic || !m.Expires.IsZero() {
		t.Fatalf("default kind: %+v", m)
	}
	for _, in := range []proto.MemoryInput{{Text: " "}, {Text: "\xff"}, {Text: "x", TTL: "soon"}, {Text: "x", Kind: "nope"}} {
		if _, err := FromInput(in, now, 0); err == nil {
			t.Errorf("%+v accepted", in)
		}
	}
	if r := m.Record("a"); r.Agent != "a" || r.Expires == nil || r.Type != proto.RecordMemory {
		t.Errorf("record: %+v", r)
	}
}

func TestFromInputsAllOrNone(t *testing.T) {
	now := time.Now().UTC()
	ms, files, err := FromInputs("a", []proto.MemoryInput{{Text: "one"}, {Text: "two", Kind: Working}}, now, time.Hour, 1<<20)
	if err != nil || len(ms) != 2 || len(files) != 2 || ms[1].Kind != Working || string(files[0]) != string(ms[0].Encode()) {
		t.Fatal(ms, err)
	}
	_, _, err = FromInputs("a", []proto.MemoryInput{{Text: "one"}, {Text: "two", Kind: "nope"}}, now, time.Hour, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "a: memory 2 of 2: ") || !strings.Contains(err.Error(), "nothing was remembered") {
		t.Fatal(err)
	}
	_, _, err = FromInputs("a", []proto.MemoryInput{{Text: strings.Repeat("x", 600)}}, now, time.Hour, 1024)
	if pe, ok := err.(*proto.Error); !ok || pe.Code != proto.E2BIG || strings.Contains(pe.Message, "memory 1 of") {
		t.Fatal(err)
	}
}

func TestCheckBatchAndTexts(t *testing.T) {
	for n, want := range map[int]string{0: proto.EINVAL, 1: "", proto.MaxRememberBatch: "", proto.MaxRememberBatch + 1: proto.E2BIG} {
		err := CheckBatch(n)
		var pe *proto.Error
		if want == "" && err != nil || want != "" && (!errors.As(err, &pe) || pe.Code != want) {
			t.Errorf("%d: %v, want %q", n, err, want)
		}
	}
	if got := Texts([]*Memory{{Text: "a"}, {Text: "b"}}); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatal(got)
	}
}

func TestKindsOfAndRemembered(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mems := []*Memory{{ID: NewID(now), Kind: Working, Text: "a", Created: now}, {ID: NewID(now.Add(time.Millisecond)), Kind: Semantic, Text: "b", Created: now}}
	if got := KindsOf(mems); len(got) != 2 || got[0] != Working || got[1] != Semantic {
		t.Fatal(got)
	}
	res := Remembered("ops", mems)
	if len(res.Memories) != 2 {
		t.Fatalf("%+v", res)
	}
	for i, r := range res.Memories {
		want := mems[i].Record("ops")
		want.Text = ""
		if r.ID != mems[i].ID || r.Text != "" || r.Agent != "ops" || r.Kind != want.Kind || r.Created != want.Created {
			t.Errorf("%d: %+v, want %+v", i, r, want)
		}
	}
}
