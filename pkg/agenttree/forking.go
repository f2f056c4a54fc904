package agenttree

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

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
// PlanFork.

// Forker makes forks for the kernel, on its committer (a barrier: the
// origin does not change meanwhile), with what it hands it.
type Forker struct {
	// W is the repository with the uncommitted paths and the live state.
	W *version.Work
	// Exists reports whether agent has live keys.
	Exists func(agent string) bool
	// Keys counts the keys of a tree (state.Store.Keys).
	Keys func(ref string) (int, int64)
	// Prepare begins the copy of a fork's index (state.Store.PrepareFork).
	Prepare func(*state.Fork)
	// CommitFirst commits agent's uncommitted state with message, as the
	// caller.
	CommitFirst func(agent, message string) error
	// Apply commits the fork's batch, in one group commit: e (published
	// as the event proto.EventAgentForked of agent name, with data), the
	// live copy when fork is not nil, then changes, and commit (the
	// record of the fork's git commit: version.Prepared.Record), which is
	// durable with the batch only if all of it is. It returns the first
	// error of the batch.
	Apply func(e *audit.Entry, name string, fork *state.Fork, data map[string]string, changes []*state.Change, commit []byte) error
	// Forked is told of a fork whose live copy stands (live: a copy of
	// the state now, whose memories the store copied).
	Forked func(name string, live bool)
	Log    *slog.Logger
}

// Fork copies a.Agent at a.Rev (default: its state now, committed first)
// as the new agent a.Name, for who (uid, and agent for a run), auditing
// what fails with au. held is the jobs table, held by the caller: the
// fork's copies of the agent's jobs are named against it and adopted.
func (f *Forker) Fork(a proto.ForkArgs, raw []byte, who audit.Actor, uid uint32, agent string, held *jobs.Held, au version.Auditor) (proto.ForkRecord, error) {
	w := f.W
	tgt := a.Name + ":fork " + a.Agent
	fail := func(err error) (proto.ForkRecord, error) {
		err = version.WireError(err)
		au(proto.OpAgentFork, tgt, proto.Result(err), "", nil)
		return proto.ForkRecord{}, err
	}
	// The name must be free: in the live state here, in HEAD when the
	// graft is staged (see below).
	if f.Exists(a.Name) {
		return fail(ForkExists(a.Name))
	}
	cow := a.Rev == ""
	var live *state.Fork
	if cow {
		// The copy of the agent's index (about 1 ms of CPU for 10k keys)
		// begins now, on goroutines of its own, while the rest is worked
		// out: the batch (state.Batch.AddFork) takes it as it stands.
		// The agent does not change meanwhile (the committer runs
		// nothing else), and a fork that fails first leaves the copy to
		// the collector.
		live = &state.Fork{From: a.Agent, To: a.Name, Skip: map[string][]string{state.SpaceSys: {jobs.Dir + "/"}}}
		f.Prepare(live)
	}
	if err := w.Rescan(); err != nil {
		return fail(err)
	}
	rev := a.Rev
	if cow {
		// The state now: what is uncommitted of the agent is committed
		// first, so the fork point is a commit like any other (when
		// nothing is, that commit would be empty: it is not made).
		dirty, err := w.Paths.Under(version.AgentPrefix(a.Agent))
		if err != nil {
			return fail(err)
		}
		if len(dirty) > 0 {
			// Not for a fork refused for its name: checked in HEAD first.
			if taken, err := InHead(w.Repo, a.Name); err != nil {
				return fail(err)
			} else if taken {
				return fail(ForkExists(a.Name))
			}
			if err := f.CommitFirst(a.Agent, fmt.Sprintf("Commit the state of %s to fork it as %s", a.Agent, a.Name)); err != nil {
				return fail(err)
			}
		}
		rev = "HEAD"
	}
	point, err := w.Repo.Resolve(rev)
	if err != nil {
		return fail(err)
	}
	// The graft's commit is prepared while the rest is worked out: the
	// graft begins now and checks that the name is free in HEAD and the
	// agent has a folder at the point, and meanwhile the fork's plan is
	// made (what its commit changes below the graft: the budget used
	// reset, the schedules left out). The commit is not written: its
	// record goes into the journal batch of the fork's live copy, one
	// fdatasync for both, and it is published once the batch stands (see
	// version's pending.go), so a crash leaves both or neither. The
	// commit's trailers name the audit log as it is now, before the
	// fork's own entry, as a commit's do (all it holds was recorded up to
	// there).
	seq, hash := w.Head()
	trailers := append([]version.Trailer{
		{Key: version.TrailerForkOf, Value: a.Agent},
		{Key: version.TrailerForkPoint, Value: point},
	}, version.AuditTrailers(seq, hash)...)
	type gitResult struct {
		p   *version.Prepared
		err error
	}
	gitDone := make(chan gitResult, 1)
	afterc := make(chan []version.PathChange, 1)
	staged := make(chan error, 1)
	now := time.Now().UTC()
	go func() {
		p, err := w.Repo.PrepareFork(version.ForkOptions{
			From: a.Agent, Name: a.Name, Point: point,
			Staged:   func(err error) { staged <- err },
			After:    func() []version.PathChange { return <-afterc },
			Trailers: trailers, Author: version.Author(uid, agent, now), When: now,
		})
		gitDone <- gitResult{p, err}
	}()
	// A failure from here on drops the prepared commit.
	failGrafted := func(err error) (proto.ForkRecord, error) {
		afterc <- nil
		if g := <-gitDone; g.p != nil {
			g.p.Abort()
		}
		return fail(err)
	}
	// The files the fork starts with changed (PlanFork), and their
	// values: at the state now, from the store (whose files are HEAD's:
	// the agent was committed first); at an older commit, from git.
	var files map[string]string
	if cow {
		files, err = liveKernelFiles(w.State, a.Agent)
	} else {
		files, err = w.Repo.Files(point, version.AgentPrefix(a.Agent))
	}
	if err != nil {
		return failGrafted(err)
	}
	plan := PlanFork(files, a.Name, cow)
	vals, err := w.Repo.ReadFork(w.State, a.Agent, plan.Files, cow)
	if err != nil {
		return failGrafted(err)
	}
	fe := &audit.Entry{Actor: who, Op: proto.OpAgentFork, Target: tgt + " at " + point, Args: audit.ArgsDigest(raw)}
	changes, copies := plan.Changes(vals, now, held.Taken)
	// The live copy is made once the graft is known to be possible.
	if err := <-staged; err != nil {
		afterc <- nil
		<-gitDone
		switch {
		case errors.Is(err, version.ErrExists):
			err = ForkExists(a.Name)
		case errors.Is(err, version.ErrUnknownRevision):
			err = proto.Errorf(proto.ENOENT, "agent %q has nothing committed at %s: nothing to fork", a.Agent, rev)
		}
		return fail(err)
	}
	afterc <- plan.After
	g := <-gitDone
	if g.err != nil {
		return fail(g.err)
	}
	err = f.Apply(fe, a.Name, live, map[string]string{"from": a.Agent, "point": point}, changes, g.p.Record())
	if err != nil {
		g.p.Abort()
		return proto.ForkRecord{}, version.WireError(fmt.Errorf("forking %s: %w", a.Agent, err))
	}
	cm := g.p.Publish()
	f.Forked(a.Name, cow)
	held.Adopt(copies)
	// The live state of the fork and its tree in HEAD are equal now.
	if dirty, err := w.Paths.Under(version.AgentPrefix(a.Name)); err == nil {
		w.Paths.Clean(dirty)
	}
	// The files of the fork: what the live copy copies (its index may
	// still be on its way in: see state.Store.PrepareFork), and the
	// kernel's files as the batch left them.
	n := 0
	for _, sp := range Spaces {
		if live != nil && sp != state.SpaceSys {
			n += live.Copied(sp)
			continue
		}
		m, _ := f.Keys(state.Ref(sp, a.Name))
		n += m
	}
	return proto.ForkRecord{
		Type: proto.RecordFork, Agent: a.Name, From: a.Agent, Point: point, Commit: cm.Hash, Files: n,
		AuditSeq: fe.Seq, Time: now.Format(time.RFC3339),
		Text: fmt.Sprintf("forked %s at %s as %s (%d files)", a.Agent, point[:12], a.Name, n),
	}, nil
}

// liveKernelFiles lists the kernel's files of agent (its sys space) in
// the live store as Repo.Files lists a folder (tree path -> blob),
// without their blobs: all a fork at the state now needs of them (its
// budget and jobs, which it starts with changed: PlanFork), as it reads
// their values from the store. Listing the store costs microseconds where
// reading the trees from git took a sixth of a millisecond, before the
// graft's commit could begin.
func liveKernelFiles(st version.Store, agent string) (map[string]string, error) {
	recs, err := st.List(state.Ref(state.SpaceSys, agent), "")
	var pe *proto.Error
	if errors.As(err, &pe) && pe.Code == proto.ENOENT {
		return nil, nil // no kernel files
	}
	if err != nil {
		return nil, err
	}
	files := make(map[string]string, len(recs))
	for _, r := range recs {
		files[version.SpacePath(state.SpaceSys, agent, r.Key)] = ""
	}
	return files, nil
}

// ForkExists is the refusal of a fork as name when that agent exists.
func ForkExists(name string) error {
	return proto.Errorf(proto.EEXIST, "agent %q exists; pick another name, or remove it first (ox-fork rm %s)", name, name)
}

// InHead reports whether HEAD of r has a folder for agent.
func InHead(r *version.Repo, agent string) (bool, error) {
	head, err := r.Head()
	if err != nil || head == "" {
		return false, err
	}
	t, err := r.Folder("HEAD", "agents/"+agent)
	return t != "", err
}

// ForkReplayed is told of each audit entry replayed at start. The fork's
// commit is replayed with it (its record is in the same batch), so the
// fork's live state and its tree in HEAD agree; the paths are marked
// lost all the same, so that the next commit compares everything with
// HEAD (what a crash cut short is found whatever it was), a cost paid
// once, after a crash.
func ForkReplayed(op, result string, paths interface{ Lost() }) {
	if result == "ok" && op == proto.OpAgentFork {
		paths.Lost()
	}
}
