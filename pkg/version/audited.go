package version

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/uncommitted"
)

// Auditor appends the audit entry of a versioning syscall, from the
// kernel's committer: op on target (agent:what, "*" for every agent) with
// its result, and event, when not "", the bus event published with data.
// It returns the entry's seq.
type Auditor func(op, target, result, event string, data any) (uint64, error)

// Work is the repository as the kernel's commits, tags, restores and
// diffs against the live state use it: with the set of uncommitted paths
// and the state they are read from. Its methods run on the kernel's
// committer goroutine, alone (a barrier), so that they see the state at
// one point in time; each audits what it did, refusals too, with the
// Auditor of its caller.
type Work struct {
	Repo  *Repo
	Paths *uncommitted.Set
	State Store
	// Rescan marks every difference between HEAD and the state when the
	// set of paths was lost (MarkChanged).
	Rescan func() error
	// Head is the head of the audit log a commit's trailers name.
	Head func() (seq uint64, hash string)
	// Apply commits changes, each with its audit entry, in one batch of
	// the committer; the entries get their seqs. It returns each change's
	// error.
	Apply func(chs []*state.Change, es []*audit.Entry) []error
}

// Commit records the uncommitted changes of a.Agent (every agent's when
// "") as a commit by uid (and agent, a run's) whose message (a.Message;
// blank: the default) carries the audit head, tags it a.Tag when given,
// and audits it (commit, published as commit.created with the record). A
// commit that finds the paths saved back to what HEAD holds records
// nothing, and returns NothingRecord (or, with a tag, tags HEAD).
func (w *Work) Commit(a proto.CommitArgs, uid uint32, agent string, au Auditor) (proto.CommitRecord, error) {
	if strings.TrimSpace(a.Message) == "" {
		a.Message = ""
	}
	target := "*"
	if a.Agent != "" {
		target = a.Agent
	}
	fail := func(err error) (proto.CommitRecord, error) {
		err = WireError(err)
		au(proto.OpCommit, target, proto.Result(err), "", nil)
		return proto.CommitRecord{}, err
	}
	if err := w.Rescan(); err != nil {
		return fail(err)
	}
	// The trailer names the log as it is now: everything this commit
	// contains was recorded up to this head.
	seq, hash := w.Head()
	now := time.Now().UTC()
	saved, err := w.Repo.SaveUncommitted(w.State, w.Paths, SaveOptions{
		Agent: a.Agent, Message: a.Message, Trailers: AuditTrailers(seq, hash),
		Author: Author(uid, agent, now), When: now, Tag: a.Tag,
	})
	if err != nil {
		return fail(err)
	}
	if saved.Nothing {
		// The paths were saved back to what HEAD holds: nothing to do, and
		// nothing to record.
		if a.Tag != "" && saved.Head != "" {
			// The state is HEAD's: the tag names HEAD.
			return w.Tag(a.Tag, saved.Head, au)
		}
		return NothingRecord(saved.Head, now), nil
	}
	cm := saved.Commit
	rec := Record(cm)
	if a.Tag != "" {
		rec.Tags = append(rec.Tags, a.Tag)
	}
	ev := rec // the event's own copy: subscribers encode it after this returns
	rec.AuditSeq, err = au(proto.OpCommit, target+":"+cm.Hash, "ok", "commit.created", &ev)
	return rec, err
}

// Tag names rev (HEAD when "") name and audits it (commit.tag, published
// as commit.tagged with the record).
func (w *Work) Tag(name, rev string, au Auditor) (proto.CommitRecord, error) {
	if rev == "" {
		rev = "HEAD"
	}
	hash, err := w.Repo.Tag(name, rev)
	if err != nil {
		err = WireError(err)
		au(proto.OpCommitTag, "*:"+name, proto.Result(err), "", nil)
		return proto.CommitRecord{}, err
	}
	cm, err := w.Repo.Show(hash)
	if err != nil {
		return proto.CommitRecord{}, WireError(err)
	}
	rec := Record(cm)
	rec.Tags = w.Repo.TagsAt(hash)
	ev := rec // the event's own copy: subscribers encode it after this returns
	rec.AuditSeq, err = au(proto.OpCommitTag, "*:"+name, "ok", "commit.tagged", &ev)
	return rec, err
}

// Restore makes the state of a.Agent equal to revision a.Rev's, as new
// changes by who (each audited like a save or a delete: PlanRestore),
// and commits them (Commit, by uid and agent): history is never
// rewritten.
func (w *Work) Restore(a proto.CommitRestoreArgs, who audit.Actor, uid uint32, agent string, au Auditor) (proto.CommitRecord, error) {
	fail := func(err error) (proto.CommitRecord, error) {
		err = WireError(err)
		au(proto.OpCommitRestore, a.Agent+":"+a.Rev, proto.Result(err), "", nil)
		return proto.CommitRecord{}, err
	}
	hash, plan, err := w.Repo.PlanRestore(w.State, w.Paths, a.Agent, a.Rev, w.Rescan)
	if err != nil {
		return fail(err)
	}
	chs := make([]*state.Change, len(plan))
	es := make([]*audit.Entry, len(plan))
	for i, ch := range plan {
		chs[i], es[i] = ch.Change(a.Agent), ch.Entry(who, a.Agent, hash)
	}
	if len(plan) > 0 {
		for i, err := range w.Apply(chs, es) {
			if err != nil {
				return fail(fmt.Errorf("restoring %s: %w", chs[i].Key, err))
			}
		}
	}
	// The agent's state now equals the commit's: committing everything
	// uncommitted of the agent makes its tree equal too.
	rec, err := w.Commit(proto.CommitArgs{Agent: a.Agent, Message: RestoreMessage(a.Agent, a.Rev, hash)}, uid, agent, au)
	if err == nil && rec.AuditSeq == 0 && len(plan) > 0 {
		// Uncommitted changes were undone and the state is HEAD's again:
		// no commit, but the record says what the restore changed.
		RestoredRecord(&rec, a.Agent, a.Rev, plan)
		rec.AuditSeq = es[len(es)-1].Seq
	}
	return rec, err
}

// Push pushes the branch, with its tags, to remote (CheckRemote,
// Repo.Push) and audits it (version.push, target "*:REMOTE", with the
// commit pushed once it went). Unlike the other methods of Work it runs
// on its caller's goroutine: it reads the repository alone, and au must
// not be one that commits on the committer itself.
func (w *Work) Push(ctx context.Context, remote string, au Auditor) (proto.PushRecord, error) {
	if err := CheckRemote(remote); err != nil {
		return proto.PushRecord{}, err
	}
	target := "*:" + remote
	rec, err := w.Repo.Push(ctx, remote)
	if err != nil {
		au(proto.OpVersionPush, target, proto.Result(err), "", nil)
		return rec, err
	}
	_, err = au(proto.OpVersionPush, target+" "+rec.Commit, "ok", "", nil)
	return rec, err
}

// Diff is the diff of a (Repo.Diff). Against the live state (no a.To) it
// runs at barrier, after Rescan: it must see one point in time, and the
// set of uncommitted paths (the committer's) is read there; between
// commits it reads history only.
func (w *Work) Diff(a proto.CommitDiffArgs, barrier func(fn func()) error) ([]proto.DiffRecord, error) {
	if a.From == "" {
		return nil, proto.Errorf(proto.EINVAL, "diff needs a revision to compare from")
	}
	var out []proto.DiffRecord
	var derr error
	diff := func() {
		out, derr = w.Repo.Diff(w.State, w.Paths.Under, a.From, a.To, AgentPrefix(a.Agent), a.Patch)
	}
	if a.To == "" {
		if err := barrier(func() {
			if derr = w.Rescan(); derr == nil {
				diff()
			}
		}); err != nil {
			return nil, err
		}
	} else {
		diff()
	}
	if derr != nil {
		return nil, WireError(derr)
	}
	return out, nil
}

// AgentDiff is Repo.AgentDiff of a, live state included, in a barrier
// (after a rescan, if the paths were lost).
func (w *Work) AgentDiff(a proto.AgentDiffArgs, barrier func(fn func()) error) ([]proto.DiffRecord, error) {
	var out []proto.DiffRecord
	var derr error
	if err := barrier(func() {
		if derr = w.Rescan(); derr == nil {
			out, derr = w.Repo.AgentDiff(w.State, w.Paths.Under, a.Agent, a.Other, a.Patch)
		}
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, WireError(derr)
	}
	return out, nil
}
