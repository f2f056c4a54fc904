package kernel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/durable"
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
	return sysAgentList.Stream(k, ctx, c, struct{}{}, nil, emit)
}

func (k *Kernel) agentList(ctx context.Context, c *Cred, _ struct{}, _ []byte, emit func(*proto.AgentRecord) error) error {
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
	return sysAgentShow.Call(k, ctx, c, proto.AgentArgs{Agent: agent}, raw)
}

func (k *Kernel) agentShow(_ context.Context, _ *Cred, a proto.AgentArgs, _ []byte) (proto.AgentRecord, error) {
	rec := k.agentRecord(a.Agent)
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
	return sysAgentRemove.Call(k, ctx, c, proto.AgentArgs{Agent: agent}, raw)
}

func (k *Kernel) agentRemove(ctx context.Context, c *Cred, a proto.AgentArgs, raw []byte) (proto.AgentRecord, error) {
	op, agent := proto.OpAgentRemove, a.Agent
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
	rec, err := k.removeAgent(ctx, c, agent, raw)
	k.settleInbox(agent)
	if err != nil {
		return rec, err
	}
	held.RemoveAgent(agent)
	k.policyChanged(agent)
	k.budgets.Forget(agent)
	return rec, nil
}

// removeAgent removes agent in the steps agenttree describes: its commit
// and its kernel files on the committer alone, its state and memories in
// groups between others' changes.
func (k *Kernel) removeAgent(ctx context.Context, c *Cred, agent string, raw []byte) (proto.AgentRecord, error) {
	au := k.auditor(c, raw)
	fail := func(err error) (proto.AgentRecord, error) {
		au(proto.OpAgentRemove, agent, proto.Result(err), "", nil)
		return proto.AgentRecord{}, err
	}
	var rec proto.AgentRecord
	restore, err := onCommitter(k, ctx, func() (string, error) {
		rec = k.agentRecord(agent)
		return agenttree.Before(k.work(), agent, c.UID, c.Agent, au)
	})
	if err != nil {
		return fail(err)
	}
	rec.Restore = restore
	var ds []agenttree.Deletion
	for _, d := range agenttree.Removal(k.state, agent) {
		if d.Space != state.SpaceSys {
			ds = append(ds, d)
		}
	}
	// The last group goes with the kernel files and the removal's entry.
	// A removal of more groups is noted durably first: a crash among them
	// leaves an agent partly removed, which the next start finishes
	// (finishRemovals), so that a removal cut short is whole too.
	if len(ds) > agenttree.RemoveChunk {
		if err := k.markRemoving(agent); err != nil {
			return fail(err)
		}
		defer k.unmarkRemoving(agent)
	}
	digest := audit.ArgsDigest(raw)
	for len(ds) > agenttree.RemoveChunk {
		part := ds[:agenttree.RemoveChunk]
		ds = ds[len(part):]
		chs, es := agenttree.Changes(agent, part, c.Actor(), digest)
		t := &tx{subs: changeTxs(chs, es)}
		if err := k.submit(k.record(), t, true); err != nil {
			return fail(err)
		}
		for i, err := range txErrs(t.subs) {
			if err != nil {
				return fail(fmt.Errorf("removing %s: %s: %w", agent, chs[i].Key, err))
			}
		}
	}
	// Once its groups began, the removal ends even if its caller goes.
	return onCommitter(k, k.record(), func() (proto.AgentRecord, error) { return k.removeNow(c, agent, raw, rec) })
}

// removeNow runs in the committer, alone (a barrier): delete what is left
// of agent with its audit entries, commit the removal (agenttree.Remove).
func (k *Kernel) removeNow(c *Cred, agent string, raw []byte, rec proto.AgentRecord) (proto.AgentRecord, error) {
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
	return agenttree.Remove(k.work(), k.state, rec, c.Actor(), c.UID, c.Agent, audit.ArgsDigest(raw), removing, k.auditor(c, raw))
}

// removingDir holds a file per agent whose removal in groups has begun
// and not ended: DATA/index/removing/NAME.
func (k *Kernel) removingDir() string { return filepath.Join(k.cfg.Data, "index", "removing") }

func (k *Kernel) markRemoving(agent string) error {
	dir := k.removingDir()
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(dir, agent), filepath.Join(dir, "."+agent+".tmp"), nil, 0o600)
}

func (k *Kernel) unmarkRemoving(agent string) {
	if err := durable.Remove(filepath.Join(k.removingDir(), agent)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		k.log.Warn("removing the mark of an agent's removal", "agent", agent, "err", err)
	}
}

// finishRemovals ends, at start, the removals in groups a crash cut
// short (markRemoving): an agent still there is removed again, by the
// daemon, which deletes what is left of it; one already gone only loses
// its mark.
func (k *Kernel) finishRemovals() error {
	ents, err := os.ReadDir(k.removingDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	daemon := &Cred{UID: k.uid, GID: uint32(os.Getgid()), PID: int32(os.Getpid()), Admin: true}
	for _, e := range ents {
		agent := e.Name()
		if strings.HasPrefix(agent, ".") || proto.CheckAgent(agent) != nil {
			continue
		}
		if !k.AgentExists(agent) {
			k.unmarkRemoving(agent)
			continue
		}
		k.log.Warn("the removal of an agent was cut short by a crash: finishing it", "agent", agent)
		if _, err := k.AgentRemove(k.record(), daemon, agent, nil); err != nil {
			return fmt.Errorf("finishing the removal of %s: %w", agent, err)
		}
	}
	return nil
}
