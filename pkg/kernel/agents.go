package kernel

import (
	"context"
	"fmt"
	"strings"

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
	for _, agent := range k.state.Agents() {
		if c.Authorize(agent) != nil || !k.AgentExists(agent) {
			continue
		}
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
	if err := proto.CheckAgent(agent); err != nil {
		k.auditDenied(c, op, strings.ToValidUTF8(agent, "?"), raw, err.Code)
		return proto.AgentRecord{}, err
	}
	if !c.Admin {
		err := proto.Errorf(proto.EACCES, "%s: removing an agent is for the admin (uid %d is not one; see [access] in oxios.toml(5))", op, c.UID)
		k.auditDenied(c, op, agent, raw, err.Code)
		return proto.AgentRecord{}, err
	}
	if !k.AgentExists(agent) {
		return proto.AgentRecord{}, proto.NoAgent(agent)
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
	rec, err := onCommitter(k, ctx, func() (proto.AgentRecord, error) { return k.removeNow(c, agent, raw) })
	if err != nil {
		return rec, err
	}
	held.RemoveAgent(agent)
	k.policyChanged(agent)
	k.budgets.Forget(agent)
	k.removeInbox(agent)
	return rec, nil
}

// removeNow runs in the committer, alone (a barrier): commit what the agent
// holds, delete all of it with its audit entries, commit the removal.
func (k *Kernel) removeNow(c *Cred, agent string, raw []byte) (proto.AgentRecord, error) {
	rec := k.agentRecord(agent)
	rec.Removed = true
	fail := func(err error) (proto.AgentRecord, error) {
		k.commitAudit(c, proto.OpAgentRemove, agent, raw, proto.Result(err), "", nil)
		return proto.AgentRecord{}, err
	}
	before, err := k.commitNow(c, proto.CommitArgs{Agent: agent, Message: fmt.Sprintf("Agent %s as it was before its removal", agent)}, raw)
	if err != nil {
		return fail(err)
	}
	rec.Restore = before.Commit
	who := c.Actor()
	digest := audit.ArgsDigest(raw)
	t := &tx{}
	for _, d := range agenttree.Removal(k.state, agent) {
		e := &audit.Entry{Actor: who, Op: d.Op, Target: d.Target, Args: digest}
		t.subs = append(t.subs, &tx{change: &state.Change{Agent: agent, Space: d.Space, Key: d.Key, Delete: true}, entry: e})
	}
	// The target "NAME:" (no key) names the agent the same way to a live
	// subscriber and to one replaying the log.
	ev := rec // the event's own: rec is completed below
	t.subs = append(t.subs, &tx{entry: &audit.Entry{Actor: who, Op: proto.OpAgentRemove, Target: target(agent, ""), Args: digest}, event: proto.EventAgentRemoved, agent: agent, data: &ev})
	k.commit([]*tx{t})
	for _, s := range t.subs {
		if s.err != nil {
			return fail(fmt.Errorf("removing %s: %w", agent, s.err))
		}
	}
	after, err := k.commitNow(c, proto.CommitArgs{Agent: agent, Message: fmt.Sprintf("Remove agent %s (restore: ox-commit restore %.12s -a %s)", agent, rec.Restore, agent)}, raw)
	if err != nil {
		return rec, err
	}
	rec.Commit = after.Commit
	rec.Runs = 0
	rec.Describe()
	return rec, nil
}
