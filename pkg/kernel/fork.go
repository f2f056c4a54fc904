package kernel

import (
	"context"
	"strings"

	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// Forks: agenttree.Forker makes them (a graft in git, a copy of the live
// state); the kernel gates the call, holds the jobs table, and hands the
// forker its committer's batch.

// Trailers of a fork commit.
const (
	TrailerForkOf    = version.TrailerForkOf
	TrailerForkPoint = version.TrailerForkPoint
)

// agentExists reports whether agent has any file, live or committed.
func (k *Kernel) agentExists(agent string) (bool, error) {
	if k.AgentExists(agent) {
		return true, nil
	}
	return agenttree.InHead(k.ver.repo, agent)
}

// Fork copies a.Agent at a.Rev (default: its state now, committed first)
// as the new agent a.Name.
func (k *Kernel) Fork(ctx context.Context, c *Cred, a proto.ForkArgs, raw []byte) (proto.ForkRecord, error) {
	return sysAgentFork.Call(k, ctx, c, a, raw)
}

// fork gates itself: the forked agent and the new one, each gated.
func (k *Kernel) fork(ctx context.Context, c *Cred, a proto.ForkArgs, raw []byte) (proto.ForkRecord, error) {
	tgt := a.Name + ":fork " + a.Agent
	for _, ag := range []string{a.Agent, a.Name} {
		if err := k.gate(call{op: proto.OpAgentFork, c: c, agent: ag, raw: raw, target: tgt}); err != nil {
			return proto.ForkRecord{}, err
		}
	}
	if a.Name == a.Agent {
		err := proto.Errorf(proto.EEXIST, "a fork needs a new name, not %q itself", a.Agent)
		k.auditDenied(c, proto.OpAgentFork, strings.ToValidUTF8(tgt, "?"), raw, err.Code)
		return proto.ForkRecord{}, err
	}
	// The jobs table is held before the committer is waited for, as a
	// schedule add holds it: the fork names its copies of the agent's
	// jobs and adds them, on the committer, with the table held.
	held := k.sched.Lock()
	defer held.Unlock()
	return onCommitter(k, ctx, func() (proto.ForkRecord, error) {
		return k.forker(c, raw).Fork(a, raw, c.Actor(), c.UID, c.Agent, held, k.auditor(c, raw))
	})
}

// forker is the fork's view of the kernel, for caller c.
func (k *Kernel) forker(c *Cred, raw []byte) *agenttree.Forker {
	return &agenttree.Forker{W: k.work(), Exists: k.AgentExists, Keys: k.state.Keys, Prepare: k.state.PrepareFork, Log: k.log,
		CommitFirst: func(agent, message string) error {
			_, err := k.commitNow(c, proto.CommitArgs{Agent: agent, Message: message}, raw)
			return err
		},
		Apply: func(e *audit.Entry, name string, fork *state.Fork, data map[string]string, changes []*state.Change, commit []byte) error {
			batch := append([]*tx{{entry: e, event: proto.EventAgentForked, agent: name, data: data, fork: fork, commit: commit}}, changeTxs(changes, nil)...)
			k.commit(batch)
			for _, err := range txErrs(batch) {
				if err != nil {
					return err
				}
			}
			return nil
		},
		Forked: func(name string, live bool) {
			if live {
				k.forkMemories(name)
			}
			k.policyChanged(name)
		},
	}
}

// AgentDiff emits the files that differ between a.Other (or a.Agent's
// fork point) and a.Agent, live state included. The committed trees are
// compared first, skipping what both share, then the uncommitted paths of
// either side are compared by content: the cost is what differs, not the
// size of the agents.
func (k *Kernel) AgentDiff(ctx context.Context, c *Cred, a proto.AgentDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	return sysAgentDiff.Stream(k, ctx, c, a, raw, emit)
}

// agentDiff gates itself: two agents, each gated.
func (k *Kernel) agentDiff(ctx context.Context, c *Cred, a proto.AgentDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	if err := k.gate(call{op: proto.OpAgentDiff, c: c, agent: a.Agent, raw: raw}); err != nil {
		return err
	}
	if a.Other != "" {
		if err := k.gate(call{op: proto.OpAgentDiff, c: c, agent: a.Other, raw: raw}); err != nil {
			return err
		}
	}
	out, err := k.work().AgentDiff(a, func(fn func()) error { return k.barrier(ctx, fn) })
	if err != nil {
		return err
	}
	return proto.EmitAll(out, emit)
}

// forkReplayed: see agenttree.ForkReplayed.
func (k *Kernel) forkReplayed(op, result string) { agenttree.ForkReplayed(op, result, k.ver.paths) }

// forkMemories builds the recall index of a fork the live store copied
// (see state.Fork), from its memory files, with their expiries.
// Committer only.
func (k *Kernel) forkMemories(agent string) {
	if n, _ := k.state.Keys(state.Ref(state.SpaceMem, agent)); n == 0 {
		return
	}
	es, err := k.mem.Rebuild(agent, k.memSource(), k.auditSeq)
	if err != nil {
		k.log.Error("recall index of a fork not built; it is rebuilt at the next start", "agent", agent, "err", err)
		return
	}
	k.ttl.Add(es...)
}
