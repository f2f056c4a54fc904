package kernel

import (
	"context"
	"fmt"

	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// AgentExists reports whether agent exists: some tree of it (state,
// memories, the kernel's files: policy, budget, jobs) holds a key. A
// removed agent's trees are empty.
func (k *Kernel) AgentExists(agent string) bool { return agenttree.Exists(k.state, agent) }

// agentRecord describes agent as it is now.
func (k *Kernel) agentRecord(agent string) proto.AgentRecord {
	return agenttree.Record(k.state, agent, k.liveRuns(agent))
}

// liveRuns counts agent's runs that have not ended, queued ones too.
func (k *Kernel) liveRuns(agent string) int { return k.adm.Live(agent) }

// AgentList returns, sorted, the agents that exist and that c may act on.
func (k *Kernel) AgentList(ctx context.Context, c *Cred, emit func(*proto.AgentRecord) error) error {
	if err := k.gate(call{op: proto.OpAgentList, c: c}); err != nil {
		return err
	}
	for _, agent := range k.Agents(ctx, c) {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec := k.agentRecord(agent)
		rec.Describe()
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

// AgentShow describes one agent.
func (k *Kernel) AgentShow(ctx context.Context, c *Cred, agent string, raw []byte) (proto.AgentRecord, error) {
	if err := k.gate(call{op: proto.OpAgentShow, c: c, agent: agent, raw: raw}); err != nil {
		return proto.AgentRecord{}, err
	}
	rec := k.agentRecord(agent)
	rec.Describe()
	return rec, nil
}

// AgentRemove removes an agent: its state, memories, policy, budget and
// jobs, in one audited change, refused (EBUSY) while it has live runs.
// Its history stays: what it held is committed first, so the commit named
// in the record's Restore holds all of it (ox-commit restore brings back
// its state and memories) until the repository's history is rewritten;
// the removal itself is then committed. Admin only: an agent's kernel
// files are not its own to delete.
func (k *Kernel) AgentRemove(ctx context.Context, c *Cred, agent string, raw []byte) (proto.AgentRecord, error) {
	op := proto.OpAgentRemove
	if err := k.gate(call{op: op, c: c, agent: agent, raw: raw}); err != nil {
		return proto.AgentRecord{}, err
	}
	// A job's firing starts a run: none fires while the jobs go.
	held := k.sched.Lock()
	defer held.Unlock()
	if n := k.liveRuns(agent); n > 0 {
		err := proto.Errorf(proto.EBUSY, "agent %q has %d live runs: end them first (ox-ps -a %s | ox-kill)", agent, n, agent)
		k.auditDenied(c, op, agent, raw, err.Code)
		return proto.AgentRecord{}, err
	}
	k.flights.Wait(agent)
	// The inbox is not in the journal: moved aside first, it goes with
	// the agent or comes back, whatever the removal's outcome, a crash
	// included (openTalk settles it then).
	if err := k.inbox.Detach(agent); err != nil {
		return proto.AgentRecord{}, fmt.Errorf("removing the inbox of %s: %w", agent, err)
	}
	rec, err := onCommitter(k, ctx, func() (proto.AgentRecord, error) { return k.removeNow(c, agent, raw) })
	k.settleInbox(agent)
	if err != nil {
		return rec, err
	}
	held.RemoveAgent(agent)
	k.policyChanged(agent)
	k.budgets.Forget(agent)
	return rec, nil
}

// removeNow runs in the committer, alone (a barrier): commit what the agent
// holds, delete all of it with its audit entries, commit the removal
// (agenttree.Remove).
func (k *Kernel) removeNow(c *Cred, agent string, raw []byte) (proto.AgentRecord, error) {
	removing := func(chs []*state.Change, es []*audit.Entry, ev *proto.AgentRecord) []error {
		t := &tx{subs: make([]*tx, len(es))}
		for i, e := range es {
			t.subs[i] = &tx{change: chs[i], entry: e}
		}
		last := t.subs[len(es)-1]
		last.event, last.agent, last.data = proto.EventAgentRemoved, agent, ev
		k.commit([]*tx{t})
		errs := make([]error, len(t.subs))
		for i, s := range t.subs {
			errs[i] = s.err
		}
		return errs
	}
	return agenttree.Remove(k.work(), k.state, k.agentRecord(agent), c.Actor(), c.UID, c.Agent, audit.ArgsDigest(raw), removing, k.auditor(c, raw))
}
