package kernel

import (
	"context"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/uncommitted"
	"github.com/oxios/oxios/pkg/version"
)

// Versioning is pkg/version's (OpenData, Work): the committer marks each
// accepted change uncommitted (markDirty). Commits, restores, tags and
// diffs against the live state run as barriers on the committer
// goroutine: no change lands while they read the state, so a commit is
// one point in time and never half a save.

type versioning struct {
	repo  *version.Repo
	paths *uncommitted.Set
}

func (k *Kernel) openVersioning() error {
	repo, paths, err := version.OpenData(k.cfg.Data, k.log)
	if err != nil {
		return err
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

func (k *Kernel) signature(c *Cred, when time.Time) version.Signature {
	return version.Author(c.UID, c.Agent, when)
}

// Commit records the uncommitted changes of one agent (or all) as a
// commit whose message carries the audit head, and audits the commit.
func (k *Kernel) Commit(ctx context.Context, c *Cred, a proto.CommitArgs, raw []byte) (proto.CommitRecord, error) {
	return sysCommit.Call(k, ctx, c, a, raw)
}

func (k *Kernel) commitCall(ctx context.Context, c *Cred, a proto.CommitArgs, raw []byte) (proto.CommitRecord, error) {
	return onCommitter(k, ctx, func() (proto.CommitRecord, error) { return k.commitNow(c, a, raw) })
}

// auditHead is the head of the audit log a commit's trailers name: its
// last entry. Every entry the log holds is durable already, in the
// journal if not yet in the log's own file (commit appends an entry only
// after the journal's sync, replay puts it back into the log after a
// crash, and a checkpoint syncs the log before it empties the journal):
// a commit need not wait for the log's fsync to name its head.
func (k *Kernel) auditHead() (seq uint64, hash string) { return k.audit.Last() }

// commitNow commits on the committer goroutine (version.Work.Commit).
func (k *Kernel) commitNow(c *Cred, a proto.CommitArgs, raw []byte) (proto.CommitRecord, error) {
	return k.work().Commit(a, c.UID, c.Agent, k.auditor(c, raw))
}

// work is the repository as the committer's commits, tags, restores and
// diffs use it.
func (k *Kernel) work() *version.Work {
	return &version.Work{Repo: k.ver.repo, Paths: k.ver.paths, State: k.state, Rescan: k.rescan, Head: k.auditHead,
		Apply: func(chs []*state.Change, es []*audit.Entry) []error {
			batch := changeTxs(chs, es)
			k.commit(batch)
			return txErrs(batch)
		}}
}

// changeTxs are the transactions of changes, each with its entry of es
// (none when es is nil).
func changeTxs(chs []*state.Change, es []*audit.Entry) []*tx {
	ts := make([]*tx, len(chs))
	var tv []tx // in blocks of 32, as memindex.Remember has its changes
	for i, ch := range chs {
		if i%32 == 0 {
			tv = make([]tx, min(32, len(chs)-i))
		}
		t := &tv[i%32]
		t.change = ch
		if es != nil {
			t.entry = es[i]
		}
		ts[i] = t
	}
	return ts
}

// txErrs are the errors of committed transactions, in their order.
func txErrs(ts []*tx) []error {
	errs := make([]error, len(ts))
	for i, t := range ts {
		errs[i] = t.err
	}
	return errs
}

// auditor audits c's versioning call with args raw (commitAudit).
func (k *Kernel) auditor(c *Cred, raw []byte) version.Auditor {
	return func(op, target, result, event string, data any) (uint64, error) {
		return k.commitAudit(c, op, target, raw, result, event, data)
	}
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
	return sysCommitLog.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) commitLog(ctx context.Context, c *Cred, a proto.CommitLogArgs, raw []byte, emit func(*proto.CommitRecord) error) error {
	if err := k.ver.repo.History(ctx, a.Rev, version.AgentPrefix(a.Agent), a.N, emit); err != nil {
		return version.WireError(err)
	}
	return nil
}

// CommitShow returns one commit with its changed paths (limited to agent
// when given).
func (k *Kernel) CommitShow(ctx context.Context, c *Cred, a proto.CommitShowArgs, raw []byte) (proto.CommitRecord, error) {
	return sysCommitShow.Call(k, ctx, c, a, raw)
}

func (k *Kernel) commitShow(ctx context.Context, c *Cred, a proto.CommitShowArgs, raw []byte) (proto.CommitRecord, error) {
	rec, err := k.ver.repo.ShowRecord(a.Rev, version.AgentPrefix(a.Agent))
	if err != nil {
		return proto.CommitRecord{}, version.WireError(err)
	}
	return rec, nil
}

// CommitTag names a commit.
func (k *Kernel) CommitTag(ctx context.Context, c *Cred, a proto.CommitTagArgs, raw []byte) (proto.CommitRecord, error) {
	return sysCommitTag.Call(k, ctx, c, a, raw)
}

func (k *Kernel) commitTag(ctx context.Context, c *Cred, a proto.CommitTagArgs, raw []byte) (proto.CommitRecord, error) {
	return onCommitter(k, ctx, func() (proto.CommitRecord, error) { return k.tagNow(c, a.Name, a.Rev, raw) })
}

// tagNow tags rev on the committer goroutine and audits it.
func (k *Kernel) tagNow(c *Cred, name, rev string, raw []byte) (proto.CommitRecord, error) {
	return k.work().Tag(name, rev, k.auditor(c, raw))
}

// CommitDiff emits the paths that differ between two commits, or between
// a commit and the live state, with their patches if asked.
func (k *Kernel) CommitDiff(ctx context.Context, c *Cred, a proto.CommitDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	return sysCommitDiff.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) commitDiff(ctx context.Context, c *Cred, a proto.CommitDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	out, err := k.work().Diff(a, func(fn func()) error { return k.barrier(ctx, fn) })
	if err != nil {
		return err
	}
	return proto.EmitAll(out, emit)
}

// CommitRestore makes the state of an agent equal to a commit's, as new
// changes (audited like saves and deletes), and commits them: history is
// never rewritten.
func (k *Kernel) CommitRestore(ctx context.Context, c *Cred, a proto.CommitRestoreArgs, raw []byte) (proto.CommitRecord, error) {
	return sysCommitRestore.Call(k, ctx, c, a, raw)
}

func (k *Kernel) commitRestore(ctx context.Context, c *Cred, a proto.CommitRestoreArgs, raw []byte) (proto.CommitRecord, error) {
	return onCommitter(k, ctx, func() (proto.CommitRecord, error) { return k.restoreNow(c, a, raw) })
}

func (k *Kernel) restoreNow(c *Cred, a proto.CommitRestoreArgs, raw []byte) (proto.CommitRecord, error) {
	return k.work().Restore(a, c.Actor(), c.UID, c.Agent, k.auditor(c, raw))
}
