package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/memindex"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Memories are files of the store's "mem" space, written through the same
// journal and group commit as state: one change and one audit entry per
// memory (target "agent:<kind>/<id>.md"), so a remember is durable,
// audited and versioned exactly like a save, and the audit log names every
// memory that changed (which is what lets the recall index catch up at
// start by re-reading just those files). A request's memories go into one
// tx with sub-transactions, so they commit in one group commit.
//
// The recall indexes are pkg/memindex's Set, updated by the committer
// right after a batch is durable (memPublish), before any reply: a recall
// after a remember's reply sees it.

// memPublish applies a durable batch's memory changes to the recall
// indexes and the expiry heap. Committer only.
func (k *Kernel) memPublish(batch []*tx) {
	n := 0
	for _, t := range batch {
		n += max(len(t.subs), 1)
	}
	chs := make([]memindex.Change, 0, n)
	one := func(t *tx) {
		ch := t.change
		if ch == nil || t.err != nil || ch.Space != state.SpaceMem {
			return
		}
		chs = append(chs, memindex.Change{Agent: ch.Agent, Key: ch.Key, Delete: ch.Delete, Value: ch.Value, Doc: t.mem})
	}
	for _, t := range batch {
		if t.subs == nil {
			one(t)
		}
		for _, s := range t.subs {
			one(s)
		}
	}
	if len(chs) > 0 {
		k.ttl.Add(k.mem.Apply(chs, k.auditSeq)...)
	}
}

// loadIndexes makes every agent's recall index ready and arms the
// memories' expiries, before the committer starts.
func (k *Kernel) loadIndexes() error {
	src := k.memSource()
	src.Agents = memindex.StoreAgents(k.state)
	es, err := k.mem.Load(src)
	if err != nil {
		return err
	}
	k.ttl.Reset(es)
	return nil
}

// memSource reads the memory files and the audit log for the recall
// indexes (Agents left to the caller).
func (k *Kernel) memSource() memindex.Source {
	src := memindex.StoreSource(k.state)
	src.Head = k.auditSeq
	src.Scan = func(from uint64, fn func(line []byte) error) error {
		k.audit.Publish(k.auditSeq)
		return k.audit.ScanLines(from, fn)
	}
	return src
}

// MemRemember stores a batch of memories of one agent, durably, in one
// group commit: all are stored or none (a bad memory fails the request
// with its position).
func (k *Kernel) MemRemember(ctx context.Context, c *Cred, a proto.MemRememberArgs, raw []byte) (proto.MemRememberResult, error) {
	return sysMemRemember.Call(k, ctx, c, a, raw)
}

func (k *Kernel) memRemember(ctx context.Context, c *Cred, a proto.MemRememberArgs, raw []byte) (proto.MemRememberResult, error) {
	n := len(a.Memories)
	if err := memory.CheckBatch(n); err != nil {
		return proto.MemRememberResult{}, err
	}
	mems, files, err := memory.FromInputs(a.Agent, a.Memories, time.Now().UTC(), k.cfg.Memory.TTL(), int64(k.cfg.Limits.MaxValue))
	if err != nil {
		return proto.MemRememberResult{}, err
	}
	if err := k.permit(c, a.Agent, proto.OpMemRemember, a.Agent, raw, func(p *policy.Policy) error {
		if err := p.CheckMemories(memory.KindsOf(mems), k.mem.Count(a.Agent)+int64(n)); err != nil {
			return err
		}
		_, held := k.state.Keys(state.Ref(state.SpaceMem, a.Agent))
		for _, f := range files {
			held += int64(len(f))
		}
		if err := p.CheckMemoryBytes(held); err != nil {
			return err
		}
		for _, kind := range memory.KindsOf(mems) {
			if err := k.hook(ctx, p, c, proto.OpMemRemember, a.Agent, asking{ask: askRemember, key: kind}, false); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return proto.MemRememberResult{}, err
	}
	docs := memindex.NewDocs(mems, files, k.emb.Docs(ctx, memory.Texts(mems)))
	return memindex.Remember(ctx, k.group, c.Actor(), a.Agent, mems, files, docs)
}

// MemRecall emits the best memories for a query, best first.
func (k *Kernel) MemRecall(ctx context.Context, c *Cred, a proto.MemRecallArgs, raw []byte, emit func(*proto.MemoryRecord) error) error {
	return sysMemRecall.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) memRecall(ctx context.Context, c *Cred, a proto.MemRecallArgs, raw []byte, emit func(*proto.MemoryRecord) error) error {
	var agents []string
	if a.AllAgents {
		agents = k.mem.Agents()
	} else {
		if err := k.mayRecall(c, proto.OpMemRecall, a.Agent, a.Kind, raw); err != nil {
			return err
		}
		emit = memindex.OfKinds(k.kindsOf(c, a.Agent), emit)
		agents = []string{a.Agent}
	}
	return k.mem.Query(ctx, agents, a, k.emb.Query, memindex.StoreReader(k.state), emit)
}

// MemList emits the memories of an agent that match, oldest first.
func (k *Kernel) MemList(ctx context.Context, c *Cred, a proto.MemListArgs, raw []byte, emit func(*proto.MemoryRecord) error) error {
	return sysMemList.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) memList(ctx context.Context, c *Cred, a proto.MemListArgs, raw []byte, emit func(*proto.MemoryRecord) error) error {
	if err := k.mayRecall(c, proto.OpMemList, a.Agent, a.Kind, raw); err != nil {
		return err
	}
	return k.mem.ListArgs(ctx, a, k.kindsOf(c, a.Agent), memindex.StoreReader(k.state), emit)
}

// MemForget forgets memories of an agent by id, by tag and/or by age, in
// one group commit, and returns their records (without text).
func (k *Kernel) MemForget(ctx context.Context, c *Cred, a proto.MemForgetArgs, raw []byte) ([]proto.MemoryRecord, error) {
	return sysMemForget.Call(k, ctx, c, a, raw)
}

func (k *Kernel) memForget(ctx context.Context, c *Cred, a proto.MemForgetArgs, raw []byte) ([]proto.MemoryRecord, error) {
	// The op's question first, as the dry run asks it (may the agent use
	// memories at all), then of each kind the forgotten ones are of.
	if err := k.mayRecall(c, proto.OpMemForget, a.Agent, "", raw); err != nil {
		return nil, err
	}
	ids, err := k.mem.ToForget(a.Agent, a)
	if err != nil {
		return nil, err
	}
	for _, kind := range k.mem.KindsOutside(a.Agent, ids, k.kindsOf(c, a.Agent)) {
		if err := k.mayRecall(c, proto.OpMemForget, a.Agent, kind, raw); err != nil {
			return nil, err
		}
	}
	digest := audit.ArgsDigest(raw)
	if len(ids) <= memindex.ForgetChunk {
		return k.mem.Forget(ctx, k.group, c.Actor(), a.Agent, ids, digest)
	}
	// A forget of more than one group: its mark says what it forgets, so
	// that a crash between its groups is finished at the next start
	// (finishForgets), never left half done; and once its groups begin,
	// it ends even if its caller goes.
	mark, err := k.markForgetting(forgetMark{Agent: a.Agent, IDs: ids, Actor: c.Actor(), Digest: digest})
	if err != nil {
		return nil, proto.Errorf(proto.EIO, "%s: recording the forget of %d memories before it begins: %v", a.Agent, len(ids), err)
	}
	defer k.unmark(mark)
	return k.mem.Forget(context.WithoutCancel(ctx), k.group, c.Actor(), a.Agent, ids, digest)
}

// forgets numbers the marks of forgets (markForgetting).
var forgets atomic.Uint64

// forgetMark is what a forget of more than memindex.ForgetChunk memories
// writes before its first group: DATA/index/forgetting/AGENT.N, removed
// once its last group is durable.
type forgetMark struct {
	Agent  string      `json:"agent"`
	IDs    []string    `json:"ids"`
	Actor  audit.Actor `json:"actor"`
	Digest string      `json:"args_digest"`
}

func (k *Kernel) forgettingDir() string { return filepath.Join(k.cfg.Data, "index", "forgetting") }

// markForgetting writes m durably and returns its path.
func (k *Kernel) markForgetting(m forgetMark) (string, error) {
	dir := k.forgettingDir()
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s.%d-%d", m.Agent, time.Now().UnixNano(), forgets.Add(1))
	p := filepath.Join(dir, name)
	return p, durable.WriteFile(p, filepath.Join(dir, "."+name+".tmp"), b, 0o600)
}

func (k *Kernel) unmark(p string) {
	if err := durable.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		k.log.Warn("removing the mark of a forget", "mark", p, "err", err)
	}
}

// finishForgets ends, at start, the forgets in groups a crash cut short
// (markForgetting): the memories of the mark still there are forgotten
// by the same actor, audited as the forget's own entries were, and the
// mark removed. A damaged mark (a crash while writing it, before the
// forget began) is only removed.
func (k *Kernel) finishForgets() error {
	dir := k.forgettingDir()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") {
			os.Remove(p)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var m forgetMark
		if err := json.Unmarshal(b, &m); err != nil || proto.CheckAgent(m.Agent) != nil {
			k.log.Warn("a forget's mark is not readable: removed", "mark", p, "err", err)
			k.unmark(p)
			continue
		}
		left := k.mem.Forgettable(m.Agent, m.IDs)
		if len(left) > 0 {
			k.log.Warn("a forget was cut short by a crash: finishing it", "agent", m.Agent, "memories", len(m.IDs), "left", len(left))
			if _, err := k.mem.Forget(k.record(), k.group, m.Actor, m.Agent, m.IDs, m.Digest); err != nil {
				return fmt.Errorf("finishing the forget of %d memories of %s: %w", len(left), m.Agent, err)
			}
		}
		k.unmark(p)
	}
	return nil
}

// group submits changes of the mem space, each with its audit entry
// (and its memory's document), as one tx of sub-transactions, durable
// together, and waits for it (memindex.Group).
func (k *Kernel) group(ctx context.Context, chs []*state.Change, es []*audit.Entry, docs []*memindex.Doc) ([]error, error) {
	t := &tx{subs: changeTxs(chs, es)}
	for i := range docs {
		t.subs[i].mem = docs[i]
	}
	if err := k.submit(ctx, t, true); err != nil {
		return nil, err
	}
	return txErrs(t.subs), nil
}

// MemRead returns the file of a memory (for the FUSE view).
func (k *Kernel) MemRead(ctx context.Context, c *Cred, agent, kind, id string) ([]byte, error) {
	if err := sysMemList.enter(k, c, proto.MemListArgs{Agent: agent}, nil); err != nil {
		return nil, err
	}
	if _, err := k.mem.Stat(agent, kind, id); err != nil {
		return nil, err
	}
	if err := k.mayRecall(c, proto.OpMemList, agent, kind, nil); err != nil {
		return nil, err
	}
	v, _, err := k.state.Load(state.Ref(state.SpaceMem, agent), kind+"/"+id+".md")
	if err != nil {
		return nil, proto.AsError(err)
	}
	return v, nil
}

// MemIDs lists the ids and file sizes of agent's memories of a kind (for
// the FUSE view).
func (k *Kernel) MemIDs(c *Cred, agent, kind string) ([]string, []int64) {
	if c.Authorize(agent) != nil {
		return nil, nil
	}
	return k.mem.IDs(agent, kind)
}

// MemStat returns the file size of agent's memory id of kind (for the
// FUSE view's lookups). Like AgentVisible, nothing is audited: the mount
// asks on every path walk, and the read that follows is its own syscall.
func (k *Kernel) MemStat(c *Cred, agent, kind, id string) (int64, error) {
	if err := c.Authorize(agent); err != nil {
		return 0, err
	}
	return k.mem.Stat(agent, kind, id)
}

// expire forgets every memory of due whose time has come, as the kernel
// (the expiry timer calls it; memindex.Set.Expire).
func (k *Kernel) expire(now int64, due map[string][]string) {
	who := k.daemonActor()
	k.mem.Expire(now, due, func(agent string, ids []string) error {
		_, err := k.mem.Forget(k.root, k.group, who, agent, ids, audit.ArgsDigest([]byte("ttl")))
		return err
	})
}

// mayRecall asks agent's policy whether c may use memories of kind ("":
// any kind it is given).
func (k *Kernel) mayRecall(c *Cred, op, agent, kind string, raw []byte) *proto.Error {
	return k.permit(c, agent, op, agent, raw, func(p *policy.Policy) error {
		return k.hooked(k.root, p, c, op, agent, asking{ask: askRecall, key: kind})
	})
}

// kindsOf returns, for a caller bound by agent's policy, which kinds it
// may see; nil means all.
func (k *Kernel) kindsOf(c *Cred, agent string) func(string) bool {
	return k.pol.Bound(agent, c.Admin, func(p *policy.Policy) func(string) bool { return memindex.KindFilter(p.Memory.Kinds) })
}
