package memindex

import (
	"context"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Group commits changes of the store's mem space, each with its audit
// entry and (a memory remembered) its analysed document, as one group,
// durable together, and waits for it: it returns each change's error, or
// the group's own (nothing was committed). It is the kernel's group
// commit, which applies each durable change to the recall index (Apply).
type Group func(ctx context.Context, chs []*state.Change, es []*audit.Entry, docs []*Doc) ([]error, error)

// Remember commits mems of agent, by who, with their files and docs
// (NewDocs), in one group: all are stored or none, the first error is the
// request's. Each is one change and one audit entry (mem.remember, target
// "agent:<kind>/<id>.md", args the file's digest).
func Remember(ctx context.Context, group Group, who audit.Actor, agent string, mems []*memory.Memory, files [][]byte, docs []*Doc) (proto.MemRememberResult, error) {
	chs := make([]*state.Change, len(mems))
	es := make([]*audit.Entry, len(mems))
	// The changes and entries come in blocks of 32: an allocation each
	// for 32 of them, from the collector's small size classes. One array
	// for a whole batch was half a MiB of fresh pages a request, and
	// their faults (copy-on-write of the zero page that the write
	// barrier's read had mapped) cost more than the allocations saved.
	var chv []state.Change
	var ev []audit.Entry
	for i, m := range mems {
		if i%32 == 0 {
			n := min(32, len(mems)-i)
			chv, ev = make([]state.Change, n), make([]audit.Entry, n)
		}
		key := m.Key()
		c, e := &chv[i%32], &ev[i%32]
		*c = state.Change{Agent: agent, Space: state.SpaceMem, Key: key, Value: files[i]}
		*e = audit.Entry{Actor: who, Op: proto.OpMemRemember, Target: agent + ":" + key, Args: audit.ArgsDigest(files[i])}
		chs[i], es[i] = c, e
	}
	errs, err := group(ctx, chs, es, docs)
	if err != nil {
		return proto.MemRememberResult{}, err
	}
	for _, err := range errs {
		if err != nil {
			return proto.MemRememberResult{}, err
		}
	}
	return memory.Remembered(agent, mems), nil
}

// Query is a recall's request as mem.recall has it, over agents: its k
// (RecallK) and its filter (NewFilter) are checked before embed is asked
// for the query's embedding (nil: none); then Recall.
func (s *Set) Query(ctx context.Context, agents []string, a proto.MemRecallArgs, embed func(ctx context.Context, text string) []float32, read Reader, emit func(*proto.MemoryRecord) error) error {
	k, err := RecallK(a.Query, a.K)
	if err != nil {
		return err
	}
	f, err := NewFilter(a.Kind, a.Tags, a.Since, time.Time{})
	if err != nil {
		return err
	}
	return s.Recall(ctx, agents, a.Query, k, a.MinScore, embed(ctx, a.Query), f, read, emit)
}

// ListArgs is List with the filter of a, mem.list's args (NewFilter).
func (s *Set) ListArgs(ctx context.Context, a proto.MemListArgs, ok func(kind string) bool, read Reader, emit func(*proto.MemoryRecord) error) error {
	f, err := NewFilter(a.Kind, a.Tags, a.Since, time.Time{})
	if err != nil {
		return err
	}
	return s.List(ctx, a.Agent, f, ok, read, emit)
}

// KindsOutside is the kind of each of ids of agent (in order, one per
// id) that ok does not allow (nil: every kind is allowed): those a forget
// asks the policy about.
func (s *Set) KindsOutside(agent string, ids []string, ok func(kind string) bool) []string {
	if ok == nil {
		return nil
	}
	var out []string
	for _, id := range ids {
		if kind, _ := s.Kind(agent, id); !ok(kind) {
			out = append(out, kind)
		}
	}
	return out
}

// ForgetChunk is how many memories one group of a forget deletes: a
// forget of more commits them in groups of this many, one after another,
// so that the changes of others wait for one group (a few milliseconds),
// not for all (issue 45: a forget of 100k memories held every other
// agent's save for its whole time).
const ForgetChunk = 512

// Forget commits the deletion of ids of agent, by who (args digest), in
// groups of ForgetChunk, and returns the records (without text) of those
// it deleted (Forgot). A memory already gone (forgotten meanwhile) is
// skipped, not an error. Each group is durable (and audited) on its own:
// a failure, or a crash, leaves the groups before it forgotten, and
// returns their records with the error.
func (s *Set) Forget(ctx context.Context, group Group, who audit.Actor, agent string, ids []string, digest string) ([]proto.MemoryRecord, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	fs := s.Forgettable(agent, ids)
	if len(fs) == 0 {
		return nil, nil
	}
	var out []proto.MemoryRecord
	for len(fs) > 0 {
		part := fs[:min(len(fs), ForgetChunk)]
		fs = fs[len(part):]
		chs := make([]*state.Change, len(part))
		es := make([]*audit.Entry, len(part))
		for i, fm := range part {
			chs[i] = &state.Change{Agent: agent, Space: state.SpaceMem, Key: fm.Key, Delete: true}
			es[i] = &audit.Entry{Actor: who, Op: proto.OpMemForget, Target: agent + ":" + fm.Key, Args: digest}
		}
		errs, err := group(ctx, chs, es, nil)
		if err != nil {
			return out, err
		}
		recs, err := Forgot(part, errs)
		out = append(out, recs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
