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
	// CommitFirst commits agent's uncommitted state with message, as the
	// caller.
	CommitFirst func(agent, message string) error
	// Apply commits the fork's batch, in one group commit: e (published
	// as the event proto.EventAgentForked of agent name, with data), the
	// live copy when fork is not nil, then changes. It returns the first
	// error of the batch.
	Apply func(e *audit.Entry, name string, fork *state.Fork, data map[string]string, changes []*state.Change) error
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
	if err := w.Rescan(); err != nil {
		return fail(err)
	}
	cow := a.Rev == ""
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
	// The graft and the live copy are made side by side: both sync to
	// disk, neither needs the other. The graft begins now and checks the
	// name is free in HEAD and the agent has a folder at the point; the
	// live copy waits for that, and meanwhile the rest is worked out:
	// the copy of the agent's index (state.Fork), what the fork's commit
	// changes below the graft (the budget used reset, the schedules left
	// out). The commit's trailers name the audit log as it is now, before
	// the fork's own entry, as a commit's do (all it holds was recorded up
	// to there). A crash between the two leaves either the live copy
	// without its commit (the fork's entry, replayed, has the next commit
	// compare everything with HEAD: see ForkReplayed) or the commit without
	// the live copy (NAME exists with no files: ox-fork rm NAME).
	seq, hash := w.Head()
	trailers := append([]version.Trailer{
		{Key: version.TrailerForkOf, Value: a.Agent},
		{Key: version.TrailerForkPoint, Value: point},
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
		cm, err := w.Repo.Fork(version.ForkOptions{
			From: a.Agent, Name: a.Name, Point: point,
			Staged:   func(err error) { staged <- err },
			After:    func() []version.PathChange { return <-afterc },
			Trailers: trailers, Author: version.Author(uid, agent, now), When: now,
		})
		gitDone <- gitResult{cm, err}
	}()
	var live *state.Fork
	if cow {
		live = &state.Fork{From: a.Agent, To: a.Name, Skip: map[string][]string{state.SpaceSys: {jobs.Dir + "/"}}}
	}
	// unfork takes the graft back, if it was made, so that the name is
	// free again.
	unfork := func(g gitResult) {
		if g.cm.Hash == "" {
			return
		}
		if err := w.Repo.Unfork(a.Name, trailers[2:], version.Author(uid, agent, now), now); err != nil {
			f.Log.Error("fork: taking back the graft of a fork that failed", "fork", a.Name, "err", err)
		}
	}
	// A failure from here on takes the graft back.
	failGrafted := func(err error) (proto.ForkRecord, error) {
		afterc <- nil
		unfork(<-gitDone)
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
	// The copy of the agent's index (about 1 ms of CPU for 10k keys)
	// begins with the batch (state.Batch.AddFork), once the graft is
	// staged, not beside it: on two cores it held the graft back that
	// long, and the fork ends with the graft.
	err = f.Apply(fe, a.Name, live, map[string]string{"from": a.Agent, "point": point}, changes)
	g := <-gitDone
	if err != nil {
		unfork(g)
		return proto.ForkRecord{}, version.WireError(fmt.Errorf("forking %s: %w", a.Agent, err))
	}
	f.Forked(a.Name, cow)
	held.Adopt(copies)
	if g.err != nil {
		// The live copy stands without its commit: the next commit
		// compares everything with HEAD and records it.
		w.Paths.Lost()
		return proto.ForkRecord{}, version.WireError(g.err)
	}
	// The live state of the fork and its tree in HEAD are equal now.
	if dirty, err := w.Paths.Under(version.AgentPrefix(a.Name)); err == nil {
		w.Paths.Clean(dirty)
	}
	n := 0
	for _, sp := range Spaces {
		m, _ := f.Keys(state.Ref(sp, a.Name))
		n += m
	}
	return proto.ForkRecord{
		Type: proto.RecordFork, Agent: a.Name, From: a.Agent, Point: point, Commit: g.cm.Hash, Files: n,
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

// ForkReplayed is told of each audit entry replayed at start: a fork
// whose commit a crash may have cut off leaves the live state ahead of
// HEAD by paths no entry names, so the next commit compares everything
// with HEAD (it marks paths lost).
func ForkReplayed(op, result string, paths interface{ Lost() }) {
	if result == "ok" && op == proto.OpAgentFork {
		paths.Lost()
	}
}
