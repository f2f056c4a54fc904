package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// Forks. A fork copies an agent (state, memories, policy, budget limits)
// at a commit as a new agent. In git the copy is one graft: the new
// agent's folder points at the tree object of the old one, so the fork
// commit writes the folders on the path agents/NAME and nothing else,
// whatever the agent holds, and both share the history up to the fork
// point (a trailer of the fork commit names it). The live store copies
// the agent at the state now with one record whatever it holds (see
// state.Fork: the copy shares the values, and its files are linked in the
// background); a fork at an older commit writes the files read from git
// as one batch of changes. What the fork starts with otherwise, its
// budget used reset and its schedules copied disabled as FORK.JOB
// (ox-schedule enable FORK.JOB once it should run), is planned by
// agenttree.PlanFork.

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
	return k.inHead(agent)
}

// inHead reports whether HEAD has a folder for agent.
func (k *Kernel) inHead(agent string) (bool, error) {
	head, err := k.ver.repo.Head()
	if err != nil || head == "" {
		return false, err
	}
	t, err := k.ver.repo.Folder("HEAD", "agents/"+agent)
	return t != "", err
}

// Fork copies a.Agent at a.Rev (default: its state now, committed first)
// as the new agent a.Name.
func (k *Kernel) Fork(ctx context.Context, c *Cred, a proto.ForkArgs, raw []byte) (proto.ForkRecord, error) {
	tgt := a.Name + ":fork " + a.Agent
	deny := func(err *proto.Error) (proto.ForkRecord, error) {
		k.auditDenied(c, proto.OpAgentFork, strings.ToValidUTF8(tgt, "?"), raw, err.Code)
		return proto.ForkRecord{}, err
	}
	for _, ag := range []string{a.Agent, a.Name} {
		if err := k.gate(call{op: proto.OpAgentFork, c: c, agent: ag, raw: raw, target: tgt}); err != nil {
			return proto.ForkRecord{}, err
		}
	}
	if a.Name == a.Agent {
		return deny(proto.Errorf(proto.EEXIST, "a fork needs a new name, not %q itself", a.Agent))
	}
	// The jobs table is held before the committer is waited for, as a
	// schedule add holds it: the fork names its copies of the agent's
	// jobs and adds them, on the committer, with the table held.
	held := k.sched.Lock()
	defer held.Unlock()
	return onCommitter(k, ctx, func() (proto.ForkRecord, error) { return k.forkNow(c, a, raw, held) })
}

func (k *Kernel) forkNow(c *Cred, a proto.ForkArgs, raw []byte, held *jobs.Held) (proto.ForkRecord, error) {
	tgt := a.Name + ":fork " + a.Agent
	fail := func(err error) (proto.ForkRecord, error) {
		err = version.WireError(err)
		k.commitAudit(c, proto.OpAgentFork, tgt, raw, proto.Result(err), "", nil)
		return proto.ForkRecord{}, err
	}
	// The name must be free: in the live state here, in HEAD when the
	// graft is staged (see below).
	if k.AgentExists(a.Name) {
		return fail(forkExists(a.Name))
	}
	if err := k.rescan(); err != nil {
		return fail(err)
	}
	cow := a.Rev == ""
	rev := a.Rev
	if cow {
		// The state now: what is uncommitted of the agent is committed
		// first, so the fork point is a commit like any other (when
		// nothing is, that commit would be empty: it is not made).
		dirty, err := k.ver.paths.Under(version.AgentPrefix(a.Agent))
		if err != nil {
			return fail(err)
		}
		if len(dirty) > 0 {
			// Not for a fork refused for its name: checked in HEAD first.
			if taken, err := k.inHead(a.Name); err != nil {
				return fail(err)
			} else if taken {
				return fail(forkExists(a.Name))
			}
			if _, err := k.commitNow(c, proto.CommitArgs{Agent: a.Agent, Message: fmt.Sprintf("Commit the state of %s to fork it as %s", a.Agent, a.Name)}, raw); err != nil {
				return fail(err)
			}
		}
		rev = "HEAD"
	}
	point, err := k.ver.repo.Resolve(rev)
	if err != nil {
		return fail(err)
	}
	// The graft and the live copy are made side by side: both sync to
	// disk, neither needs the other. The graft begins now and checks the
	// name is free in HEAD and the agent has a folder at the point; the
	// live copy waits for that, and meanwhile the rest is worked out:
	// the copy of the agent's index (state.Fork), what the fork's commit
	// changes below the graft (the budget used reset, the schedules left
	// out). The commit's trailers name the audit log as
	// it is now, before the fork's own entry, as a commit's do (all it
	// holds was recorded up to there; see auditHead). A crash between the
	// two leaves either the live copy without its commit (the fork's
	// entry, replayed, has the next commit compare everything with HEAD)
	// or the commit without the live copy (NAME exists with no files:
	// ox-fork rm NAME).
	seq, hash := k.auditHead()
	trailers := append([]version.Trailer{
		{Key: TrailerForkOf, Value: a.Agent},
		{Key: TrailerForkPoint, Value: point},
	}, version.AuditTrailers(seq, hash)...)
	type gitResult struct {
		cm  version.Commit
		err error
	}
	gitDone := make(chan gitResult, 1)
	afterc := make(chan []version.PathChange, 1)
	staged := make(chan error, 1)
	now := time.Now().UTC()
	go func() {
		cm, err := k.ver.repo.Fork(version.ForkOptions{
			From: a.Agent, Name: a.Name, Point: point,
			Staged:   func(err error) { staged <- err },
			After:    func() []version.PathChange { return <-afterc },
			Trailers: trailers, Author: k.signature(c, now), When: now,
		})
		gitDone <- gitResult{cm, err}
	}()
	var live *state.Fork
	if cow {
		live = &state.Fork{From: a.Agent, To: a.Name, Skip: map[string][]string{state.SpaceSys: {sysSchedules + "/"}}}
	}
	// A failure from here on takes the graft back, if it was made.
	failGrafted := func(err error) (proto.ForkRecord, error) {
		afterc <- nil
		if g := <-gitDone; g.cm.Hash != "" {
			k.unfork(c, a.Name, trailers, now)
		}
		return fail(err)
	}
	// The files the fork starts with changed (agenttree.PlanFork), and
	// their values: at the state now, from the store; at an older
	// commit, from git.
	files, err := k.ver.repo.Files(point, agenttree.ForkFolder(a.Agent, cow))
	if err != nil {
		return failGrafted(err)
	}
	plan := agenttree.PlanFork(files, a.Name, cow)
	vals, err := k.ver.repo.ReadFork(k.state, a.Agent, plan.Files, cow)
	if err != nil {
		return failGrafted(err)
	}
	short := point[:12]
	fe := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpAgentFork, Target: tgt + " at " + point, Args: audit.ArgsDigest(raw)},
		event: EventAgentForked, agent: a.Name, data: map[string]string{"from": a.Agent, "point": point}}
	fe.fork = live
	batch := []*tx{fe}
	changes, copies := plan.Changes(vals, now, held.Taken)
	for _, ch := range changes {
		batch = append(batch, &tx{change: ch})
	}
	// The live copy is made once the graft is known to be possible.
	if err := <-staged; err != nil {
		afterc <- nil
		<-gitDone
		switch {
		case errors.Is(err, version.ErrExists):
			err = forkExists(a.Name)
		case errors.Is(err, version.ErrUnknownRevision):
			err = proto.Errorf(proto.ENOENT, "agent %q has nothing committed at %s: nothing to fork", a.Agent, rev)
		}
		return fail(err)
	}
	afterc <- plan.After
	// The copy of the agent's index (about 1 ms of CPU for 10k keys)
	// begins with the batch (state.Batch.AddFork), once the graft is
	// staged, not beside it: on two cores it held the graft back that
	// long, and the fork ends with the graft.
	k.commit(batch)
	g := <-gitDone
	for _, t := range batch {
		if t.err != nil {
			if g.cm.Hash != "" {
				k.unfork(c, a.Name, trailers, now)
			}
			return proto.ForkRecord{}, version.WireError(fmt.Errorf("forking %s: %w", a.Agent, t.err))
		}
	}
	if cow {
		k.forkMemories(a.Name)
	}
	k.policyChanged(a.Name)
	held.Adopt(copies)
	if g.err != nil {
		// The live copy stands without its commit: the next commit
		// compares everything with HEAD and records it.
		k.ver.paths.Lost()
		return proto.ForkRecord{}, version.WireError(g.err)
	}
	cm := g.cm
	// The live state of the fork and its tree in HEAD are equal now.
	if dirty, err := k.ver.paths.Under(version.AgentPrefix(a.Name)); err == nil {
		k.ver.paths.Clean(dirty)
	}
	n := 0
	for _, sp := range agenttree.Spaces {
		m, _ := k.state.Keys(state.Ref(sp, a.Name))
		n += m
	}
	rec := proto.ForkRecord{
		Type: proto.RecordFork, Agent: a.Name, From: a.Agent, Point: point, Commit: cm.Hash, Files: n,
		AuditSeq: fe.entry.Seq, Time: now.Format(time.RFC3339),
		Text: fmt.Sprintf("forked %s at %s as %s (%d files)", a.Agent, short, a.Name, n),
	}
	return rec, nil
}

// forkExists is the refusal of a fork as name when that agent exists.
func forkExists(name string) error {
	return proto.Errorf(proto.EEXIST, "agent %q exists; pick another name, or remove it first (ox-fork rm %s)", name, name)
}

// unfork takes back the graft of a fork that failed after it was made
// (its commit may have failed too), so that the name is free
// again.
func (k *Kernel) unfork(c *Cred, name string, trailers []version.Trailer, now time.Time) {
	if err := k.ver.repo.Unfork(name, trailers[2:], k.signature(c, now), now); err != nil {
		k.log.Error("fork: taking back the graft of a fork that failed", "fork", name, "err", err)
	}
}

// AgentDiff emits the files that differ between a.Other (or a.Agent's
// fork point) and a.Agent, live state included. The committed trees are
// compared first, skipping what both share, then the uncommitted paths of
// either side are compared by content: the cost is what differs, not the
// size of the agents.
func (k *Kernel) AgentDiff(ctx context.Context, c *Cred, a proto.AgentDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	if err := k.versionScope(c, proto.OpAgentDiff, a.Agent, raw); err != nil {
		return err
	}
	if a.Other != "" {
		if err := k.versionScope(c, proto.OpAgentDiff, a.Other, raw); err != nil {
			return err
		}
	}
	var out []proto.DiffRecord
	var derr error
	run := func() {
		if derr = k.rescan(); derr != nil {
			return
		}
		out, derr = k.ver.repo.AgentDiff(k.state, k.ver.paths.Under, a.Agent, a.Other, a.Patch)
	}
	if err := k.barrier(ctx, run); err != nil {
		return err
	}
	if derr != nil {
		return version.WireError(derr)
	}
	for i := range out {
		if err := emit(&out[i]); err != nil {
			return err
		}
	}
	return nil
}

// Events of forks.
const (
	EventAgentForked = "agent.forked"
)

// forkReplayed, called for each audit entry replayed at start: a fork
// whose commit a crash may have cut off leaves the live state ahead of
// HEAD by paths no entry names, so the next commit compares everything
// with HEAD.
func (k *Kernel) forkReplayed(op, result string) {
	if result == "ok" && op == proto.OpAgentFork {
		k.ver.paths.Lost()
	}
}

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
