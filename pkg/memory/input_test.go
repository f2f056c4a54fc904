package memory

import (
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
