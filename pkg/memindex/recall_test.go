package memindex

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

func TestRecallReadsAndForgettable(t *testing.T) {
	s := NewSet(NewFiles(t.TempDir()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now().UTC()
	m1 := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "the disk of nginx is full", Created: now}
	m2 := &memory.Memory{ID: memory.NewID(now.Add(time.Millisecond)), Kind: memory.Working, Text: "nginx restart later", Created: now, Expires: now.Add(time.Hour)}
	files := map[string][]byte{m1.Key(): m1.Encode(), m2.Key(): m2.Encode()}
	s.Apply([]Change{{Agent: "a", Key: m1.Key(), Value: files[m1.Key()]}, {Agent: "a", Key: m2.Key(), Value: files[m2.Key()]}}, 1)
	read := func(agent, key string) ([]byte, error) {
		if v, ok := files[key]; ok && agent == "a" {
			return v, nil
		}
		return nil, proto.Errorf(proto.ENOENT, "no %s", key)
	}
	if m, ok := s.Memory("a", m1.ID, read); !ok || m.Text != m1.Text {
		t.Fatal(m, ok)
	}
	if _, ok := s.Memory("a", "m-none", read); ok {
		t.Fatal("a memory the index does not know")
	}

	var got []proto.MemoryRecord
	emit := func(r *proto.MemoryRecord) error { got = append(got, *r); return nil }
	if err := s.Recall(context.Background(), []string{"a"}, "nginx disk", 1, 0, nil, Filter{kind: -1}, read, emit); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != m1.ID || got[0].Score <= 0 || got[0].Text != m1.Text {
		t.Fatalf("%+v", got)
	}
	// A memory whose file is gone is left out.
	delete(files, m1.Key())
	got = nil
	if err := s.Recall(context.Background(), []string{"a"}, "nginx disk", 10, 0, nil, Filter{kind: -1}, read, emit); err != nil || len(got) != 1 || got[0].ID != m2.ID {
		t.Fatalf("%+v %v", got, err)
	}
	var pe *proto.Error
	if err := s.Recall(context.Background(), []string{"a"}, "  ", 10, 0, nil, Filter{kind: -1}, read, emit); !errors.As(err, &pe) {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.Recall(context.Background(), []string{"a"}, "nginx", 10, 0, nil, Filter{kind: -1}, read, func(*proto.MemoryRecord) error { return boom }); err != boom {
		t.Fatal(err)
	}

	fs := s.Forgettable("a", []string{m2.ID, "m-none"})
	if len(fs) != 1 || fs[0].Key != m2.Key() || !fs[0].Record.Forgotten || fs[0].Record.Kind != memory.Working {
		t.Fatalf("%+v", fs)
	}
	if ids := s.StillDue("a", []string{m1.ID, m2.ID}, now.Add(2*time.Hour).UnixNano()); len(ids) != 1 || ids[0] != m2.ID {
		t.Fatal(ids)
	}
	if ids := s.StillDue("a", []string{m2.ID}, now.UnixNano()); len(ids) != 0 {
		t.Fatal(ids)
	}
}

func TestForgot(t *testing.T) {
	fs := []Forgotten{{Key: "k/1.md", Record: proto.MemoryRecord{ID: "1"}}, {Key: "k/2.md", Record: proto.MemoryRecord{ID: "2"}},
		{Key: "k/3.md", Record: proto.MemoryRecord{ID: "3"}}, {Key: "k/4.md", Record: proto.MemoryRecord{ID: "4"}}}
	gone := proto.Errorf(proto.ENOENT, "gone")
	recs, err := Forgot(fs, []error{nil, gone, nil, nil})
	if err != nil || len(recs) != 3 || recs[0].ID != "1" || recs[1].ID != "3" || recs[2].ID != "4" {
		t.Fatalf("%+v %v", recs, err)
	}
	boom := errors.New("boom")
	recs, err = Forgot(fs, []error{nil, gone, boom, nil})
	if err != boom || len(recs) != 1 || recs[0].ID != "1" {
		t.Fatalf("%+v %v", recs, err)
	}
}

func TestExpire(t *testing.T) {
	var logged bytes.Buffer
	s := NewSet(NewFiles(t.TempDir()), slog.New(slog.NewTextHandler(&logged, nil)))
	now := time.Now().UTC()
	var chs []Change
	ids := map[string]string{}
	for i, agent := range []string{"c", "a", "b"} {
		m := &memory.Memory{ID: memory.NewID(now.Add(time.Duration(i) * time.Millisecond)), Kind: memory.Working, Text: "later", Created: now, Expires: now.Add(time.Hour)}
		chs = append(chs, Change{Agent: agent, Key: m.Key(), Value: m.Encode()})
		ids[agent] = m.ID
	}
	s.Apply(chs, 1)
	due := map[string][]string{"c": {ids["c"]}, "a": {ids["a"], "m-gone"}, "b": {ids["b"]}}
	var got []string
	at := now.Add(2 * time.Hour).UnixNano()
	s.Expire(at, due, func(agent string, ids []string) error {
		got = append(got, agent+":"+strings.Join(ids, ","))
		if agent == "a" {
			return errors.New("disk")
		}
		return nil
	})
	if want := []string{"a:" + ids["a"], "b:" + ids["b"], "c:" + ids["c"]}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("forgot %v, want %v", got, want)
	}
	if !strings.Contains(logged.String(), "expiring memories failed") || !strings.Contains(logged.String(), "agent=a") {
		t.Fatalf("log:\n%s", logged.String())
	}
	// Not yet due: nothing to forget. A stop ends the pass.
	got = nil
	s.Expire(now.UnixNano(), due, func(agent string, ids []string) error {
		got = append(got, agent+":"+strings.Join(ids, ","))
		return proto.Errorf(proto.ESHUTDOWN, "stopping")
	})
	if len(got) != 1 || got[0] != "a:" {
		t.Fatalf("after a stop: %v", got)
	}
}

func TestRecallK(t *testing.T) {
	if k, err := RecallK("q", 0); err != nil || k != 10 {
		t.Fatal(k, err)
	}
	for _, c := range []struct {
		q string
		k int
	}{{" ", 1}, {"\xff", 1}, {"q", -1}, {"q", 10001}} {
		if _, err := RecallK(c.q, c.k); err == nil {
			t.Errorf("%q %d", c.q, c.k)
		}
	}
}

func TestListToForgetStat(t *testing.T) {
	s := NewSet(NewFiles(t.TempDir()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now().UTC()
	m1 := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "one", Tags: []string{"x"}, Created: now}
	m2 := &memory.Memory{ID: memory.NewID(now.Add(time.Millisecond)), Kind: memory.Semantic, Text: "two", Created: now}
	mems := []*memory.Memory{m1, m2}
	files := [][]byte{m1.Encode(), m2.Encode()}
	docs := NewDocs(mems, files, nil)
	if len(docs) != 2 || docs[0] == nil || docs[1].Expires != 0 {
		t.Fatalf("%+v", docs)
	}
	byKey := map[string][]byte{m1.Key(): files[0], m2.Key(): files[1]}
	s.Apply([]Change{{Agent: "a", Key: m1.Key(), Value: files[0]}, {Agent: "a", Key: m2.Key(), Value: files[1]}}, 1)
	read := func(agent, key string) ([]byte, error) {
		if v, ok := byKey[key]; ok {
			return v, nil
		}
		return nil, proto.Errorf(proto.ENOENT, "no %s", key)
	}

	var got []string
	emit := func(r *proto.MemoryRecord) error { got = append(got, r.Text); return nil }
	if err := s.List(context.Background(), "a", Filter{kind: -1}, nil, read, emit); err != nil || len(got) != 2 || got[0] != "one" {
		t.Fatal(got, err)
	}
	got = nil
	ok := KindFilter([]string{memory.Semantic})
	if err := s.List(context.Background(), "a", Filter{kind: -1}, ok, read, emit); err != nil || len(got) != 1 || got[0] != "two" {
		t.Fatal(got, err)
	}
	got = nil
	only := OfKinds(ok, emit)
	only(&proto.MemoryRecord{Kind: memory.Episodic, Text: "e"})
	only(&proto.MemoryRecord{Kind: memory.Semantic, Text: "s"})
	OfKinds(nil, emit)(&proto.MemoryRecord{Kind: memory.Episodic, Text: "all"})
	if len(got) != 2 || got[0] != "s" || got[1] != "all" {
		t.Fatal(got)
	}
	if KindFilter(memory.Kinds) != nil {
		t.Fatal("every kind is no filter")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.List(ctx, "a", Filter{kind: -1}, nil, read, emit); err != context.Canceled {
		t.Fatal(err)
	}

	code := func(err error) string {
		var pe *proto.Error
		if errors.As(err, &pe) {
			return pe.Code
		}
		return ""
	}
	if _, err := s.ToForget("a", proto.MemForgetArgs{}); code(err) != proto.EINVAL {
		t.Fatal(err)
	}
	if ids, err := s.ToForget("a", proto.MemForgetArgs{Tags: []string{"x"}}); err != nil || len(ids) != 1 || ids[0] != m1.ID {
		t.Fatal(ids, err)
	}
	if ids, err := s.ToForget("a", proto.MemForgetArgs{IDs: []string{m1.ID, m2.ID}, Tags: []string{"x"}}); err != nil || len(ids) != 1 || ids[0] != m1.ID {
		t.Fatal(ids, err)
	}
	if _, err := s.ToForget("a", proto.MemForgetArgs{IDs: []string{"bad id"}}); code(err) != proto.EINVAL {
		t.Fatal(err)
	}
	if _, err := s.ToForget("a", proto.MemForgetArgs{IDs: []string{m1.ID, memory.NewID(now.Add(time.Hour))}}); code(err) != proto.ENOENT {
		t.Fatal(err)
	}

	if n, err := s.Stat("a", memory.Episodic, m1.ID); err != nil || n != int64(len(files[0])) {
		t.Fatal(n, err)
	}
	if _, err := s.Stat("a", memory.Semantic, m1.ID); code(err) != proto.ENOENT {
		t.Fatal(err)
	}
}
