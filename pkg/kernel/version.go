package kernel

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/uncommitted"
	"github.com/oxios/oxios/pkg/version"
)

// Versioning commits the work tree DATA/repo with pkg/version. What to
// commit comes from the set of paths changed since the last commit (the
// committer marks each accepted change), never from scanning the tree, so
// a commit costs what changed. The set survives restarts: each checkpoint
// saves it to DATA/index/uncommitted before the journal is recycled, and
// the journal's records of later changes are marked again when replayed.
// Without that file (deleted, unreadable) the first commit compares every
// key with HEAD instead: slower, never wrong.
//
// Commits, restores, tags and diffs against the live state run as
// barriers on the committer goroutine: no change lands while they read
// the state, so a commit is one point in time and never half a save.

// Audit trailer keys of commit messages.
const (
	TrailerAuditSeq  = version.TrailerAuditSeq
	TrailerAuditHash = version.TrailerAuditHash
)

type versioning struct {
	repo  *version.Repo
	paths *uncommitted.Set
}

func (k *Kernel) openVersioning() error {
	file := filepath.Join(k.cfg.Data, "index", "uncommitted")
	repo, paths, warn, err := version.OpenWork(filepath.Join(k.cfg.Data, "repo"), file)
	if err != nil {
		return fmt.Errorf("versioning: %w", err)
	}
	if warn != nil {
		k.log.Warn("the list of uncommitted changes is unreadable; the next commit compares every key with HEAD", "file", file, "err", warn)
	}
	k.ver = &versioning{repo: repo, paths: paths}
	return nil
}

// markDirty records uncommitted paths; the committer marks a batch's
// at once.
func (k *Kernel) markDirty(paths ...string) { k.ver.paths.Mark(paths...) }

// barrier runs fn on the committer, alone, and waits for it.
func (k *Kernel) barrier(ctx context.Context, fn func()) error {
	return k.submit(ctx, &tx{barrier: fn}, true)
}

// onCommitter runs fn at a barrier on the committer goroutine and returns
// its result: the barrier's own failure first, else fn's.
func onCommitter[T any](k *Kernel, ctx context.Context, fn func() (T, error)) (T, error) {
	var rec T
	var ferr error
	if err := k.barrier(ctx, func() { rec, ferr = fn() }); err != nil {
		return rec, err
	}
	return rec, ferr
}

// rescan finds every difference between HEAD and the state by
// hashing values: the dirty set when it was lost. Committer only.
func (k *Kernel) rescan() error {
	n, scanned, err := k.ver.repo.MarkChanged(k.state, k.ver.paths)
	if scanned {
		k.log.Info("compared the state with HEAD", "uncommitted", n)
	}
	return err
}

// versionScope checks who may act on the versions of agent ("" = all:
// the admin's).
func (k *Kernel) versionScope(c *Cred, op, agent string, raw []byte) *proto.Error {
	if agent == "" {
		if c.Admin {
			return nil
		}
		err := proto.Errorf(proto.EACCES, "%s of every agent is for the admin; name your agent with -a", op)
		k.auditDenied(c, op, "*", raw, err.Code)
		return err
	}
	if err := k.gate(call{op: op, c: c, agent: agent, raw: raw}); err != nil {
		return err
	}
	return nil
}

func (k *Kernel) signature(c *Cred, when time.Time) version.Signature {
	return version.Author(c.UID, c.Agent, when)
}

// Commit records the uncommitted changes of one agent (or all) as a
// commit whose message carries the audit head, and audits the commit.
func (k *Kernel) Commit(ctx context.Context, c *Cred, a proto.CommitArgs, raw []byte) (proto.CommitRecord, error) {
	if err := k.versionScope(c, proto.OpCommit, a.Agent, raw); err != nil {
		return proto.CommitRecord{}, err
	}
	if a.Tag != "" {
		// Tags name commits of the whole repository: the admin's.
		if err := k.versionScope(c, proto.OpCommitTag, "", raw); err != nil {
			return proto.CommitRecord{}, err
		}
	}
	if strings.TrimSpace(a.Message) == "" {
		a.Message = ""
	}
	return onCommitter(k, ctx, func() (proto.CommitRecord, error) { return k.commitNow(c, a, raw) })
}

// auditHead is the head of the audit log a commit's trailers name: its
// last entry. Every entry the log holds is durable already, in the
// journal if not yet in the log's own file (commit appends an entry only
// after the journal's sync, replay puts it back into the log after a
// crash, and a checkpoint syncs the log before it empties the journal):
// a commit need not wait for the log's fsync to name its head.
func (k *Kernel) auditHead() (seq uint64, hash string) { return k.audit.Last() }

// commitNow commits on the committer goroutine.
func (k *Kernel) commitNow(c *Cred, a proto.CommitArgs, raw []byte) (proto.CommitRecord, error) {
	target := "*"
	if a.Agent != "" {
		target = a.Agent
	}
	fail := func(err error) (proto.CommitRecord, error) {
		err = version.WireError(err)
		k.commitAudit(c, proto.OpCommit, target, raw, proto.Result(err), "", nil)
		return proto.CommitRecord{}, err
	}
	if err := k.rescan(); err != nil {
		return fail(err)
	}
	// The trailer names the log as it is now: everything this commit
	// contains was recorded up to this head.
	seq, hash := k.auditHead()
	now := time.Now().UTC()
	saved, err := k.ver.repo.SaveUncommitted(k.state, k.ver.paths, version.SaveOptions{
		Agent: a.Agent, Message: a.Message, Trailers: version.AuditTrailers(seq, hash),
		Author: k.signature(c, now), When: now, Tag: a.Tag,
	})
	if err != nil {
		return fail(err)
	}
	if saved.Nothing {
		// The paths were saved back to what HEAD holds: nothing to do, and
		// nothing to record.
		if a.Tag != "" && saved.Head != "" {
			// The state is HEAD's: the tag names HEAD.
			return k.tagNow(c, a.Tag, saved.Head, raw)
		}
		return version.NothingRecord(saved.Head, now), nil
	}
	cm := saved.Commit
	rec := version.Record(cm)
	if a.Tag != "" {
		rec.Tags = append(rec.Tags, a.Tag)
	}
	ev := rec // the event's own copy: subscribers encode it after this returns
	rec.AuditSeq, err = k.commitAudit(c, proto.OpCommit, target+":"+cm.Hash, raw, "ok", "commit.created", &ev)
	return rec, err
}

// commitAudit appends the entry of a versioning syscall (from the
// committer goroutine) and publishes its event; it returns the entry's seq.
func (k *Kernel) commitAudit(c *Cred, op, target string, raw []byte, result, event string, data any) (uint64, error) {
	agent, _, _ := strings.Cut(target, ":")
	if agent == "*" {
		agent = ""
	}
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: op, Target: target, Args: audit.ArgsDigest(raw), Result: result}, event: event, agent: agent, data: data}
	k.commit([]*tx{t})
	return t.entry.Seq, t.err
}

// CommitLog emits the commits that changed agent (or anything), newest
// first.
func (k *Kernel) CommitLog(ctx context.Context, c *Cred, a proto.CommitLogArgs, raw []byte, emit func(*proto.CommitRecord) error) error {
	if err := k.versionScope(c, proto.OpCommitLog, a.Agent, raw); err != nil {
		return err
	}
	if err := k.ver.repo.History(ctx, a.Rev, version.AgentPrefix(a.Agent), a.N, emit); err != nil {
		return version.WireError(err)
	}
	return nil
}

// CommitShow returns one commit with its changed paths (limited to agent
// when given).
func (k *Kernel) CommitShow(ctx context.Context, c *Cred, a proto.CommitShowArgs, raw []byte) (proto.CommitRecord, error) {
	if err := k.versionScope(c, proto.OpCommitShow, a.Agent, raw); err != nil {
		return proto.CommitRecord{}, err
	}
	rec, err := k.ver.repo.ShowRecord(a.Rev, version.AgentPrefix(a.Agent))
	if err != nil {
		return proto.CommitRecord{}, version.WireError(err)
	}
	return rec, nil
}

// CommitTag names a commit.
func (k *Kernel) CommitTag(ctx context.Context, c *Cred, a proto.CommitTagArgs, raw []byte) (proto.CommitRecord, error) {
	if err := k.versionScope(c, proto.OpCommitTag, "", raw); err != nil {
		return proto.CommitRecord{}, err
	}
	rev := a.Rev
	if rev == "" {
		rev = "HEAD"
	}
	return onCommitter(k, ctx, func() (proto.CommitRecord, error) { return k.tagNow(c, a.Name, rev, raw) })
}

// tagNow tags rev on the committer goroutine and audits it.
func (k *Kernel) tagNow(c *Cred, name, rev string, raw []byte) (proto.CommitRecord, error) {
	hash, err := k.ver.repo.Tag(name, rev)
	if err != nil {
		err = version.WireError(err)
		k.commitAudit(c, proto.OpCommitTag, "*:"+name, raw, proto.Result(err), "", nil)
		return proto.CommitRecord{}, err
	}
	cm, err := k.ver.repo.Show(hash)
	if err != nil {
		return proto.CommitRecord{}, version.WireError(err)
	}
	rec := version.Record(cm)
	rec.Tags = k.ver.repo.TagsAt(hash)
	ev := rec // the event's own copy: subscribers encode it after this returns
	rec.AuditSeq, err = k.commitAudit(c, proto.OpCommitTag, "*:"+name, raw, "ok", "commit.tagged", &ev)
	return rec, err
}

// CommitDiff emits the paths that differ between two commits, or between
// a commit and the live state, with their patches if asked.
func (k *Kernel) CommitDiff(ctx context.Context, c *Cred, a proto.CommitDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	if err := k.versionScope(c, proto.OpCommitDiff, a.Agent, raw); err != nil {
		return err
	}
	if a.From == "" {
		return proto.Errorf(proto.EINVAL, "diff needs a revision to compare from")
	}
	var out []proto.DiffRecord
	var derr error
	// Against the live state the diff is a barrier: it must see one point
	// in time, and the set of uncommitted paths (the committer's) is read
	// there. Between commits it reads history only.
	diff := func() {
		out, derr = k.ver.repo.Diff(k.state, k.ver.paths.Under, a.From, a.To, version.AgentPrefix(a.Agent), a.Patch)
	}
	if a.To == "" {
		if err := k.barrier(ctx, func() {
			if derr = k.rescan(); derr == nil {
				diff()
			}
		}); err != nil {
			return err
		}
	} else {
		diff()
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

// CommitRestore makes the state of an agent equal to a commit's, as new
// changes (audited like saves and deletes), and commits them: history is
// never rewritten.
func (k *Kernel) CommitRestore(ctx context.Context, c *Cred, a proto.CommitRestoreArgs, raw []byte) (proto.CommitRecord, error) {
	if a.Agent == "" {
		return proto.CommitRecord{}, proto.Errorf(proto.EINVAL, "restore needs the agent to restore (-a AGENT)")
	}
	if err := k.versionScope(c, proto.OpCommitRestore, a.Agent, raw); err != nil {
		return proto.CommitRecord{}, err
	}
	return onCommitter(k, ctx, func() (proto.CommitRecord, error) { return k.restoreNow(c, a, raw) })
}

func (k *Kernel) restoreNow(c *Cred, a proto.CommitRestoreArgs, raw []byte) (proto.CommitRecord, error) {
	fail := func(err error) (proto.CommitRecord, error) {
		err = version.WireError(err)
		k.commitAudit(c, proto.OpCommitRestore, a.Agent+":"+a.Rev, raw, proto.Result(err), "", nil)
		return proto.CommitRecord{}, err
	}
	hash, plan, err := k.ver.repo.PlanRestore(k.state, k.ver.paths, a.Agent, a.Rev, k.rescan)
	if err != nil {
		return fail(err)
	}
	batch := make([]*tx, len(plan))
	for i, ch := range plan {
		batch[i] = &tx{change: ch.Change(a.Agent), entry: ch.Entry(c.Actor(), a.Agent, hash)}
	}
	if len(batch) > 0 {
		k.commit(batch)
		for _, t := range batch {
			if t.err != nil {
				return fail(fmt.Errorf("restoring %s: %w", t.change.Key, t.err))
			}
		}
	}
	// The agent's state now equals the commit's: committing everything
	// uncommitted of the agent makes its tree equal too.
	rec, err := k.commitNow(c, proto.CommitArgs{Agent: a.Agent, Message: version.RestoreMessage(a.Agent, a.Rev, hash)}, raw)
	if err == nil && rec.AuditSeq == 0 && len(batch) > 0 {
		// Uncommitted changes were undone and the state is HEAD's again:
		// no commit, but the record says what the restore changed.
		version.RestoredRecord(&rec, a.Agent, a.Rev, plan)
		rec.AuditSeq = batch[len(batch)-1].entry.Seq
	}
	return rec, err
}
