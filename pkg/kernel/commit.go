package kernel

import (
	"context"
	"errors"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/groupcommit"
	"github.com/oxios/oxios/pkg/memindex"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// tx is one unit of the group commit: an optional state change and the
// audit entry that records it.
type tx struct {
	change *state.Change
	entry  *audit.Entry
	err    error
	done   chan struct{}
	// event, agent and data name the bus event of a tx that is not a
	// state change (a commit...). data is shared with subscribers, which
	// encode it after the caller has its answer: it must not change once
	// submitted (give the event its own copy of a record the caller
	// completes afterwards).
	event string
	agent string
	data  any
	// key, when set, is the event's key instead of the target's or the
	// change's (a job's name rather than its file).
	key string
	// subs, when set, are the parts of one request that must be durable
	// together (a batch of memories): each carries its change and entry and
	// gets its own err; the parent only waits. mem is a memory's analysed
	// document, so the committer only inserts it into the recall index.
	subs []*tx
	mem  *memindex.Doc
	// barrier, when set, is the whole tx: the committer runs it alone,
	// after every tx queued before it and before any queued after it, so
	// it sees (and may change) the state at one point in time. It may call
	// k.commit itself.
	barrier func()
	// flight: queued by the mount without waiting (see flights).
	flight bool
	// fork, when set, is staged before the change: see fork.go.
	fork *state.Fork
	// commit, when set, is the record of a git commit that this batch
	// makes durable (version.Prepared.Record): journaled only if every
	// transaction of the batch stages, replayed by replayAux.
	commit []byte
}

// staged reports whether every transaction of batch staged.
func staged(batch []*tx) bool {
	for _, t := range batch {
		if t.err != nil {
			return false
		}
		for _, s := range t.subs {
			if s.err != nil {
				return false
			}
		}
	}
	return true
}

// submit queues t and, if wait, waits until it is durable (or failed),
// leading the commit itself when nobody else does (see groupcommit).
func (k *Kernel) submit(ctx context.Context, t *tx, wait bool) error {
	if wait {
		t.done = make(chan struct{})
	}
	if err := k.txq.Submit(t, wait); err != nil {
		return proto.Errorf(proto.ESHUTDOWN, "oxiosd is shutting down")
	}
	if !wait {
		return nil
	}
	// The transaction completes even if the client goes away: once queued
	// it is part of the log, and its outcome must be recorded.
	<-t.done
	return t.err
}

// note submits e, an audit entry a subsystem made, and waits until it is
// durable: event (when not "", else the op's), agent and key name it on
// the bus, data is the event's (audit.Recorder).
func (k *Kernel) note(ctx context.Context, e *audit.Entry, event, agent, key string, data any) error {
	return k.submit(ctx, &tx{entry: e, event: event, agent: agent, key: key, data: data}, true)
}

// openCommitter makes the queue of the group commit: a barrier runs
// alone, a run of other transactions is applied with one fdatasync, and
// each caller has its answer before the bus hears of its group. The
// hooks run on the leader, one at a time: what this package marks
// "committer only" runs there.
func (k *Kernel) openCommitter() {
	k.txq = groupcommit.New(groupcommit.Hooks[*tx]{
		Barrier: func(t *tx) func() { return t.barrier },
		Commit:  k.apply,
		Done: func(t *tx) {
			if t.done != nil {
				close(t.done)
			}
			if t.flight {
				k.flights.Land(t.change.Agent, t.change.Key, t.done)
			}
		},
		Published: k.publish,
		Log:       k.log,
	})
}

// commit is apply and then the events of the batch, for the committer's
// own batches (a fork, a commit's entry): their callers are the
// committer, and answer after.
func (k *Kernel) commit(batch []*tx) {
	k.apply(batch)
	k.publish(batch)
}

// apply makes a batch durable with one fdatasync: the state changes and
// the audit entries that record them go into the journal, which is synced;
// then the entries are appended to the audit log (its segments are synced
// at checkpoints: until then the journal holds them) and the changes are
// made visible. On failure every transaction of the batch fails and
// nothing of it is visible, in the audit log or in the state, now or
// after replay. The bus hears of the batch from publish, after.
func (k *Kernel) apply(batch []*tx) {
	b := k.state.Begin()
	entries := make([]*audit.Entry, 0, len(batch))
	var dirty []string
	now := time.Now().UTC()
	stage := func(t *tx) {
		if t.fork != nil {
			if perr := b.AddFork(t.fork); perr != nil {
				t.err = perr
			}
		}
		if t.change != nil {
			if perr := b.Add(t.change); perr != nil {
				t.err = perr
			} else {
				// Marked before the journal write: a checkpoint after it
				// must find the path in the set it saves (a failed batch
				// leaves a harmless extra path).
				dirty = append(dirty, version.SpacePath(t.change.Space, t.change.Agent, t.change.Key))
			}
		}
		if e := t.entry; e != nil {
			if e.Result == "" {
				e.Result = proto.Result(t.err)
			}
			e.Time = now
			e.Seq = k.auditSeq + uint64(len(entries)) + 1
			b.AddAux(audit.AppendStaged(nil, e))
			entries = append(entries, e)
		}
	}
	var commits [][]byte
	for _, t := range batch {
		if t.commit != nil {
			commits = append(commits, t.commit)
		}
		if t.subs == nil {
			stage(t)
			continue
		}
		for _, s := range t.subs {
			stage(s)
		}
	}
	if commits != nil && staged(batch) {
		for _, c := range commits {
			b.AddAux(c)
		}
	}
	fail := func(err error) {
		k.log.Error("commit failed", "err", err, "batch", len(batch))
		// A refusal of the store's (ENOSPC, its data directory gone)
		// reaches the client as it is.
		var perr *proto.Error
		switch {
		case errors.As(err, &perr):
		case proto.OutOfSpace(err):
			perr = proto.Errorf(proto.ENOSPC, "commit failed: %v", err)
		default:
			perr = proto.Errorf(proto.EIO, "commit failed: %v", err)
		}
		for _, t := range batch {
			if t.err == nil {
				t.err = perr
			}
			for _, s := range t.subs {
				if s.err == nil {
					s.err = t.err
				}
			}
		}
	}
	k.markDirty(dirty...)
	if err := b.Write(); err != nil {
		fail(err)
		return
	}
	// A failed sync or audit append leaves files in an unknown state:
	// the batch fails and the daemon is told to restart and recover. (A
	// failed write was undone by Write itself and is not fatal.)
	fatal := func(err error) {
		b.Abort(err)
		fail(err)
		select {
		case k.fatal <- err:
		default:
		}
	}
	if err := b.Sync(); err != nil {
		fatal(err)
		return
	}
	if err := k.appendAudit(entries); err != nil {
		fatal(err)
		return
	}
	b.Publish()
	k.audit.Publish(k.auditSeq)
	k.memPublish(batch)
}

// publish tells the bus what a durable batch did.
func (k *Kernel) publish(batch []*tx) {
	if k.bus.Subscribers() == 0 {
		return
	}
	evs := make([]bus.Event, 0, len(batch))
	var flat []*tx
	for _, t := range batch {
		if t.subs != nil {
			if flat == nil {
				flat = append(flat, batch...)
			}
			flat = append(flat, t.subs...)
		}
	}
	if flat != nil {
		batch = flat
	}
	for _, t := range batch {
		e := t.entry
		if e == nil {
			continue
		}
		ev := bus.Event{Seq: e.Seq, Time: e.Time, Op: e.Op, Result: e.Result, Data: t.data}
		ev.Agent, ev.Key = bus.SplitTarget(e.Target)
		if ev.Agent == "" {
			ev.Agent = e.Actor.Agent
		}
		ev.Name = eventName(e.Op, e.Result)
		switch {
		case t.change != nil && t.err == nil && t.change.Space == state.SpaceMem:
			ev.Name, ev.Agent, ev.Key, ev.Deleted = proto.EventMemoryAdded, t.change.Agent, t.change.Key, t.change.Delete
			if t.change.Delete {
				ev.Name = proto.EventMemoryForgotten
			}
		case t.change != nil && t.err == nil:
			ev.Agent, ev.Key, ev.Deleted = t.change.Agent, t.change.Key, t.change.Delete
		case ev.Name != proto.EventPolicyDenied && t.event != "":
			ev.Name = t.event
		}
		if t.agent != "" {
			ev.Agent = t.agent
		}
		if t.key != "" {
			ev.Key = t.key
		}
		evs = append(evs, ev)
	}
	k.bus.Publish(evs...)
}

// appendAudit writes entries to the audit log with the seqs the journal
// recorded for them (audit.Log.AppendAt).
func (k *Kernel) appendAudit(entries []*audit.Entry) error {
	if err := k.audit.AppendAt(entries); err != nil || len(entries) == 0 {
		return err
	}
	k.auditSeq = entries[len(entries)-1].Seq
	return nil
}

// replayAux restores, at start, an audit entry that the journal holds
// (audit.Log.Restore), and marks again what it changed; or publishes
// again a commit whose record it holds and git may not (a fork's: see
// version.Repo.ReplayCommit).
func (k *Kernel) replayAux(payload []byte) error {
	if version.IsCommitRecord(payload) {
		if ok, err := k.ver.repo.ReplayCommit(payload); err != nil {
			return err
		} else if ok {
			head, _ := k.ver.repo.Head()
			k.log.Info("a commit the journal held was published again", "head", head)
		}
		return nil
	}
	e, err := audit.ParseStaged(payload)
	if err != nil {
		return err
	}
	k.forkReplayed(e.Op, e.Result)
	// What the entry changed is uncommitted again, as when it was made.
	if sc := syscalls[e.Op]; sc != nil && sc.Dirties != nil {
		if p := sc.Dirties(e); p != "" {
			k.markDirty(p)
		}
	}
	return k.restoreEntry(e)
}
