package memindex

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/memory"
)

func TestSetApplySaveLoad(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	s := NewSet(NewFiles(dir), log)
	now := time.Now().UTC()
	m1 := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "the disk of nginx is full", Tags: []string{"disk"}, Created: now}
	m2 := &memory.Memory{ID: memory.NewID(now.Add(time.Millisecond)), Kind: memory.Working, Text: "restart nginx later", Created: now, Expires: now.Add(time.Hour)}
	f2 := m2.Encode()
	exps := s.Apply([]Change{
		{Agent: "a", Key: m1.Key(), Doc: NewDoc(m1, 100, nil)},
		{Agent: "a", Key: m2.Key(), Value: f2}, // no Doc: parsed from the file
		{Agent: "a", Key: "not a memory"},
	}, 7)
	if len(exps) != 1 || exps[0].ID != m2.ID || exps[0].Agent != "a" {
		t.Fatalf("expiries: %+v", exps)
	}
	if s.Count("a") != 2 || s.Count("b") != 0 {
		t.Fatalf("count: %d", s.Count("a"))
	}
	if k, ok := s.Kind("a", m2.ID); !ok || k != memory.Working {
		t.Fatalf("kind: %q %v", k, ok)
	}
	f, _ := NewFilter("", []string{"disk"}, time.Time{}, time.Time{})
	if ids := s.Select("a", f); len(ids) != 1 || ids[0] != m1.ID {
		t.Fatalf("select: %v", ids)
	}
	if ids, sizes := s.IDs("a", memory.Episodic); len(ids) != 1 || sizes[0] != 100 {
		t.Fatalf("ids: %v %v", ids, sizes)
	}
	hits, err := s.Search([]string{"a", "none"}, "nginx disk", 10, nil, Filter{kind: -1}, func(agent, id string) (string, bool) { return "", false })
	if err != nil || len(hits) == 0 || hits[0].Agent != "a" || hits[0].ID != m1.ID {
		t.Fatalf("search: %+v %v", hits, err)
	}
	s.Apply([]Change{{Agent: "a", Key: m1.Key(), Delete: true}}, 8)
	s.SaveAll()

	// Loaded back, then caught up: nothing to scan after seq 8.
	s2 := NewSet(NewFiles(dir), log)
	es, err := s2.Load(Source{Head: 8, Scan: func(uint64, func([]byte) error) error { t.Error("scanned"); return nil }})
	if err != nil || s2.Count("a") != 1 || len(es) != 1 {
		t.Fatalf("load: %v count %d expiries %v", err, s2.Count("a"), es)
	}
	// An index ahead of the log is rebuilt from the files.
	s3 := NewSet(NewFiles(dir), log)
	_, err = s3.Load(Source{Head: 3,
		Keys: func(string) []string { return []string{m2.Key()} },
		Read: func(_, key string) ([]byte, error) { return f2, nil }})
	if err != nil || s3.Count("a") != 1 {
		t.Fatalf("rebuild: %v count %d", err, s3.Count("a"))
	}
}

func TestOpenSet(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	s := NewSet(NewFiles(dir), log)
	now := time.Now().UTC()
	m := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "one", Created: now}
	s.Apply([]Change{{Agent: "a", Key: m.Key(), Value: m.Encode()}}, 3)
	s.SaveAll()
	s2 := OpenSet(dir, log)
	if _, err := s2.Load(Source{Agents: []string{"a"}, Head: 3}); err != nil || s2.Count("a") != 1 {
		t.Fatalf("%v count %d", err, s2.Count("a"))
	}
}
