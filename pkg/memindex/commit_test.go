package memindex

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// applying is a Group that applies each change to s, as the kernel's
// committer does once the group is durable, and fails the changes errs
// names (by position).
func applying(s *Set, got *[]*audit.Entry, errs map[int]error) Group {
	return func(ctx context.Context, chs []*state.Change, es []*audit.Entry, docs []*Doc) ([]error, error) {
		out := make([]error, len(chs))
		var apply []Change
		for i, ch := range chs {
			*got = append(*got, es[i])
			if out[i] = errs[i]; out[i] != nil {
				continue
			}
			c := Change{Agent: ch.Agent, Key: ch.Key, Delete: ch.Delete, Value: ch.Value}
			if docs != nil {
				c.Doc = docs[i]
			}
			apply = append(apply, c)
		}
		s.Apply(apply, 1)
		return out, nil
	}
}

func TestRememberAndForget(t *testing.T) {
	s := NewSet(NewFiles(t.TempDir()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now().UTC()
	m1 := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "one", Created: now}
	m2 := &memory.Memory{ID: memory.NewID(now.Add(time.Millisecond)), Kind: memory.Semantic, Text: "two", Created: now}
	mems := []*memory.Memory{m1, m2}
	files := [][]byte{m1.Encode(), m2.Encode()}
	who := audit.Actor{UID: 1000}
	var got []*audit.Entry
	res, err := Remember(context.Background(), applying(s, &got, nil), who, "a", mems, files, NewDocs(mems, files, nil))
	if err != nil || len(res.Memories) != 2 || s.Count("a") != 2 {
		t.Fatalf("%+v %v (count %d)", res, err, s.Count("a"))
	}
	if len(got) != 2 || *got[0] != (audit.Entry{Actor: who, Op: proto.OpMemRemember, Target: "a:" + m1.Key(), Args: audit.ArgsDigest(files[0])}) {
		t.Fatalf("entries %+v", got)
	}
	// A change that fails fails the request.
	boom := proto.Errorf(proto.EIO, "boom")
	if _, err := Remember(context.Background(), applying(s, &got, map[int]error{1: boom}), who, "a", mems, files, nil); err != boom {
		t.Fatalf("a failed change: %v", err)
	}
	// The group's own failure.
	stop := errors.New("stopping")
	fail := func(context.Context, []*state.Change, []*audit.Entry, []*Doc) ([]error, error) { return nil, stop }
	if _, err := Remember(context.Background(), fail, who, "a", mems, files, nil); err != stop {
		t.Fatalf("the group's failure: %v", err)
	}

	got = nil
	recs, err := s.Forget(context.Background(), applying(s, &got, nil), who, "a", []string{m1.ID, "gone"}, "d")
	if err != nil || len(recs) != 1 || recs[0].ID != m1.ID || !recs[0].Forgotten || s.Count("a") != 1 {
		t.Fatalf("%+v %v (count %d)", recs, err, s.Count("a"))
	}
	if len(got) != 1 || *got[0] != (audit.Entry{Actor: who, Op: proto.OpMemForget, Target: "a:" + m1.Key(), Args: "d"}) {
		t.Fatalf("entries %+v", got)
	}
	// Nothing to forget: no group.
	if recs, err := s.Forget(context.Background(), fail, who, "a", []string{m1.ID}, "d"); err != nil || recs != nil {
		t.Fatalf("%+v %v", recs, err)
	}
	// One forgotten meanwhile (ENOENT) is skipped.
	gone := map[int]error{0: proto.Errorf(proto.ENOENT, "gone")}
	if recs, err := s.Forget(context.Background(), applying(s, &got, gone), who, "a", []string{m2.ID}, "d"); err != nil || len(recs) != 0 {
		t.Fatalf("%+v %v", recs, err)
	}
}

func TestKindsOutside(t *testing.T) {
	s := NewSet(NewFiles(t.TempDir()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now().UTC()
	m1 := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "one", Created: now}
	m2 := &memory.Memory{ID: memory.NewID(now.Add(time.Millisecond)), Kind: memory.Semantic, Text: "two", Created: now}
	s.Apply([]Change{{Agent: "a", Key: m1.Key(), Value: m1.Encode()}, {Agent: "a", Key: m2.Key(), Value: m2.Encode()}}, 1)
	ids := []string{m1.ID, m2.ID, m1.ID}
	if got := s.KindsOutside("a", ids, nil); got != nil {
		t.Fatal(got)
	}
	got := s.KindsOutside("a", ids, KindFilter([]string{memory.Semantic}))
	if len(got) != 2 || got[0] != memory.Episodic || got[1] != memory.Episodic {
		t.Fatal(got)
	}
}

func TestQueryAndListArgs(t *testing.T) {
	s := NewSet(NewFiles(t.TempDir()), slog.New(slog.NewTextHandler(io.Discard, nil)))
	now := time.Now().UTC()
	m1 := &memory.Memory{ID: memory.NewID(now), Kind: memory.Episodic, Text: "the disk of nginx is full", Created: now}
	m2 := &memory.Memory{ID: memory.NewID(now.Add(time.Millisecond)), Kind: memory.Semantic, Text: "nginx serves the site", Created: now}
	files := map[string][]byte{m1.Key(): m1.Encode(), m2.Key(): m2.Encode()}
	s.Apply([]Change{{Agent: "a", Key: m1.Key(), Value: files[m1.Key()]}, {Agent: "a", Key: m2.Key(), Value: files[m2.Key()]}}, 1)
	read := func(agent, key string) ([]byte, error) { return files[key], nil }
	asked := 0
	embed := func(ctx context.Context, text string) []float32 { asked++; return nil }
	var got []string
	emit := func(r *proto.MemoryRecord) error { got = append(got, r.ID); return nil }
	if err := s.Query(context.Background(), []string{"a"}, proto.MemRecallArgs{Query: "nginx", Kind: memory.Semantic}, embed, read, emit); err != nil || asked != 1 || len(got) != 1 || got[0] != m2.ID {
		t.Fatalf("%v %v (embedded %d)", got, err, asked)
	}
	// A bad request is refused before the embedding is asked for.
	if err := s.Query(context.Background(), []string{"a"}, proto.MemRecallArgs{Query: " "}, embed, read, emit); err == nil || asked != 1 {
		t.Fatalf("an empty query: %v (embedded %d)", err, asked)
	}
	if err := s.Query(context.Background(), []string{"a"}, proto.MemRecallArgs{Query: "x", Kind: "nope"}, embed, read, emit); err == nil || asked != 1 {
		t.Fatalf("a bad kind: %v (embedded %d)", err, asked)
	}
	got = nil
	if err := s.ListArgs(context.Background(), proto.MemListArgs{Agent: "a", Kind: memory.Episodic}, nil, read, emit); err != nil || len(got) != 1 || got[0] != m1.ID {
		t.Fatalf("%v %v", got, err)
	}
	if err := s.ListArgs(context.Background(), proto.MemListArgs{Agent: "a", Kind: "nope"}, nil, read, emit); err == nil {
		t.Fatal("a bad kind listed")
	}
}
