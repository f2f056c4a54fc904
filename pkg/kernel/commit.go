package kernel

import (
	"context"
	"fmt"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// tx is one unit of the group commit: an optional state change and the
// audit entry that records it.
type tx struct {
	change *state.Change
	entry  *audit.Entry
	err    error
	done   chan struct{}
}

// maxBatch bounds a batch so one sync does not hold many megabytes of
// replies back.
const maxBatch = 1024

// submit queues t and, if wait, waits until it is durable (or failed).
func (k *Kernel) submit(ctx context.Context, t *tx, wait bool) error {
	if wait {
		t.done = make(chan struct{})
	}
	k.txmu.RLock()
	if k.closing {
		k.txmu.RUnlock()
		return proto.Errorf(proto.ESHUTDOWN, "oxiosd is shutting down")
	}
	k.txc <- t
	k.txmu.RUnlock()
	if !wait {
		return nil
	}
	// The transaction completes even if the client goes away: once queued
	// it is part of the log, and its outcome must be recorded.
	<-t.done
	return t.err
}

func (k *Kernel) committer() {
	defer close(k.stopped)
	batch := make([]*tx, 0, maxBatch)
	for t := range k.txc {
		batch = append(batch[:0], t)
	drain:
		for len(batch) < maxBatch {
			select {
			case t, ok := <-k.txc:
				if !ok {
					break drain
				}
				batch = append(batch, t)
			default:
				break drain
			}
		}
		k.commit(batch)
		for _, t := range batch {
			if t.done != nil {
				close(t.done)
			}
		}
		clear(batch)
	}
}

// commit makes a batch durable: stage -> journal write -> audit append ->
// both synced -> publish. On failure every transaction of the batch fails
// and nothing of it is visible or replayed.
func (k *Kernel) commit(batch []*tx) {
	b := k.state.Begin()
	entries := make([]*audit.Entry, 0, len(batch))
	for _, t := range batch {
		if t.change != nil {
			if perr := b.Add(t.change); perr != nil {
				t.err = perr
			}
		}
		if t.entry != nil {
			if t.entry.Result == "" {
				t.entry.Result = errCode(t.err)
			}
			entries = append(entries, t.entry)
		}
	}
	fail := func(err error) {
		k.log.Error("commit failed", "err", err, "batch", len(batch))
		for _, t := range batch {
			if t.err == nil {
				t.err = proto.Errorf(proto.EIO, "commit failed: %v", err)
			}
		}
	}
	if err := b.Write(); err != nil {
		fail(err)
		return
	}
	if err := k.audit.Append(entries); err != nil {
		b.Abort(err)
		fail(fmt.Errorf("audit append: %w", err))
		return
	}
	// Both files are made durable side by side: one sync's latency, not two.
	aerr := make(chan error, 1)
	go func() { aerr <- k.audit.Sync() }()
	serr := b.Sync()
	if err := <-aerr; err != nil {
		serr = fmt.Errorf("audit sync: %w", err)
	}
	if serr != nil {
		b.Abort(serr)
		fail(serr)
		return
	}
	b.Publish()
}
