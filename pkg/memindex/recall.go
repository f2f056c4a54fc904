package memindex

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

// Reading memories the indexes know, for the kernel's memory syscalls:
// a recall's best memories with their files, a listing's, the memories
// a forget picks and the records of those it deletes.

// Reader reads agent's memory file key of the mem space.
type Reader func(agent, key string) ([]byte, error)

// Memory reads memory id of agent as the index knows it: an empty memory
// and false if it is gone or unreadable.
func (s *Set) Memory(agent, id string, read Reader) (*memory.Memory, bool) {
	mt, ok := s.Lookup(agent, id)
	if !ok {
		return &memory.Memory{}, false
	}
	v, err := read(agent, memory.Kinds[mt.Kind]+"/"+id+".md")
	if err != nil {
		return &memory.Memory{}, false
	}
	m, err := memory.Parse(v)
	if err != nil {
		return &memory.Memory{}, false
	}
	return m, true
}

// RecallK checks a recall's query and k, and returns k (0: 10).
func RecallK(query string, k int) (int, error) {
	if strings.TrimSpace(query) == "" {
		return 0, proto.Errorf(proto.EINVAL, "recall: the query is empty")
	}
	if !utf8.ValidString(query) {
		return 0, proto.Errorf(proto.EINVAL, "recall: the query is not valid UTF-8")
	}
	if k < 0 || k > 10000 {
		return 0, proto.Errorf(proto.EINVAL, "recall: k %d out of range (1 to 10000)", k)
	}
	if k == 0 {
		k = 10
	}
	return k, nil
}

// Recall emits the k best memories of agents for query (qvec: its
// embedding, or nil; f: which memories) scoring at least minScore, best
// first, each read with read. It returns emit's error, ctx's when ctx
// ends, or the wire's error of the search's failure.
func (s *Set) Recall(ctx context.Context, agents []string, query string, k int, minScore float64, qvec []float32, f Filter, read Reader, emit func(*proto.MemoryRecord) error) error {
	// The memories read for the proximity signal, kept for the reply.
	got := map[string]*memory.Memory{}
	all, serr := s.Search(agents, query, k, qvec, f, func(agent, id string) (string, bool) {
		mm, ok := s.Memory(agent, id, read)
		if ok {
			got[agent+"/"+id] = mm
		}
		return mm.Text, ok
	})
	if serr != nil {
		return proto.AsError(serr)
	}
	sent := 0
	for _, x := range all {
		if sent == k {
			break
		}
		if x.Score < minScore {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		mm, ok := got[x.Agent+"/"+x.ID]
		if !ok {
			if mm, ok = s.Memory(x.Agent, x.ID, read); !ok {
				continue
			}
		}
		rec := mm.Record(x.Agent)
		rec.Score = x.Score
		if err := emit(&rec); err != nil {
			return err
		}
		sent++
	}
	return nil
}

// Forgotten is a memory a forget deletes: its key in the mem space and
// its record (without text).
type Forgotten struct {
	Key    string
	Record proto.MemoryRecord
}

// Forgettable is what forgetting ids of agent deletes: the memories the
// index knows (one already gone is skipped, not an error).
func (s *Set) Forgettable(agent string, ids []string) []Forgotten {
	var out []Forgotten
	for _, id := range ids {
		mt, ok := s.Lookup(agent, id)
		if !ok {
			continue
		}
		kind := memory.Kinds[mt.Kind]
		out = append(out, Forgotten{Key: kind + "/" + id + ".md", Record: proto.MemoryRecord{
			Type: proto.RecordMemory, ID: id, Agent: agent, Kind: kind, Forgotten: true,
			Created: time.Unix(0, mt.Created).UTC(), Tags: mt.Tags(), Importance: float64(mt.Importance),
		}})
	}
	return out
}

// Forgot is the records of fs whose deletions ended with errs (in the
// same order): those deleted, not those found gone already (ENOENT:
// forgotten meanwhile). Another error stops it, with the records before
// it.
func Forgot(fs []Forgotten, errs []error) ([]proto.MemoryRecord, error) {
	var out []proto.MemoryRecord
	for i, err := range errs {
		var pe *proto.Error
		switch {
		case err == nil:
			out = append(out, fs[i].Record)
		case errors.As(err, &pe) && pe.Code == proto.ENOENT:
		default:
			return out, err
		}
	}
	return out, nil
}

// StillDue is which of ids of agent are still due to expire at now (a
// memory forgotten or replaced meanwhile has no, or another, expiry).
func (s *Set) StillDue(agent string, ids []string, now int64) []string {
	var due []string
	for _, id := range ids {
		if mt, ok := s.Lookup(agent, id); ok && mt.Expires != 0 && mt.Expires <= now {
			due = append(due, id)
		}
	}
	return due
}

// Expire forgets with forget the memories of due (ids by agent, as the
// expiry timer hands them over) that are still due at now (StillDue),
// agent by agent in the order of their names. It stops once forget fails
// with ESHUTDOWN (the daemon stops); another failure is logged, and the
// next agent's go on.
func (s *Set) Expire(now int64, due map[string][]string, forget func(agent string, ids []string) error) {
	for _, agent := range slices.Sorted(maps.Keys(due)) {
		if err := forget(agent, s.StillDue(agent, due[agent], now)); err != nil {
			var pe *proto.Error
			if errors.As(err, &pe) && pe.Code == proto.ESHUTDOWN {
				return
			}
			s.log.Error("expiring memories failed", "agent", agent, "err", err)
		}
	}
}

// List emits the records of agent's memories that match f and whose kind
// ok allows (nil: every kind), oldest first. A memory gone or unreadable
// meanwhile is left out.
func (s *Set) List(ctx context.Context, agent string, f Filter, ok func(kind string) bool, read Reader, emit func(*proto.MemoryRecord) error) error {
	for _, id := range s.Select(agent, f) {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, found := s.Memory(agent, id, read)
		if !found || ok != nil && !ok(m.Kind) {
			continue
		}
		rec := m.Record(agent)
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

// ToForget is which memories of agent a forget of a deletes: those of
// a.IDs that match its tags and time, or without ids every one that
// does. An id that is not one, or names no memory, fails the forget:
// nothing is forgotten then.
func (s *Set) ToForget(agent string, a proto.MemForgetArgs) ([]string, error) {
	if len(a.IDs) == 0 && len(a.Tags) == 0 && a.Before.IsZero() {
		return nil, proto.Errorf(proto.EINVAL, "forget: give ids, tags or a time to forget memories before")
	}
	f, err := NewFilter("", a.Tags, time.Time{}, a.Before)
	if err != nil {
		return nil, err
	}
	if len(a.IDs) == 0 {
		return s.Select(agent, f), nil
	}
	for _, id := range a.IDs {
		if err := memory.CheckID(id); err != nil {
			return nil, proto.Errorf(proto.EINVAL, "forget: %v", err)
		}
	}
	var ids []string
	for _, id := range a.IDs {
		mt, ok := s.Lookup(agent, id)
		if !ok {
			return nil, proto.Errorf(proto.ENOENT, "%s: no memory %s; nothing was forgotten", agent, id)
		}
		if f.Match(&mt) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Stat is the file size of agent's memory id of kind; ENOENT if it has
// none of that kind.
func (s *Set) Stat(agent, kind, id string) (int64, error) {
	mt, ok := s.Lookup(agent, id)
	if !ok || memory.Kinds[mt.Kind] != kind {
		return 0, proto.Errorf(proto.ENOENT, "%s: no %s memory %s", agent, kind, id)
	}
	return int64(mt.Size), nil
}

// OfKinds is emit for the records of the kinds ok allows only (ok nil:
// emit itself).
func OfKinds(ok func(kind string) bool, emit func(*proto.MemoryRecord) error) func(*proto.MemoryRecord) error {
	if ok == nil {
		return emit
	}
	return func(r *proto.MemoryRecord) error {
		if !ok(r.Kind) {
			return nil
		}
		return emit(r)
	}
}

// KindFilter is which kinds of memory a policy's memory.kinds lets its
// agent use, as a test; nil when it lets every kind.
func KindFilter(kinds []string) func(kind string) bool {
	if len(kinds) >= len(memory.Kinds) {
		return nil
	}
	return func(kind string) bool { return slices.Contains(kinds, kind) }
}
