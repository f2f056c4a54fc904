// Package groupcommit is the queue of a group commit: callers queue
// transactions, and one goroutine at a time (the leader) takes what is
// queued and commits it as one batch. It knows nothing of what a
// transaction holds: its owner says which are barriers, how a group of
// the others commits, and what to do once each is done.
//
// Whoever commits a batch leads. A caller that waits for its
// transaction and finds nobody leading leads itself and commits its own
// transaction with whatever queued with it, on its own goroutine: an
// idle daemon's save is one pwrite and one fdatasync with no goroutine
// hand-off on the way there or back (two thread wake-ups fewer). A
// caller leads only the group its own transaction is in; then, if more
// is queued, it hands the lead to the committer goroutine, which commits
// until the queue is empty. So under load the batches grow as they
// would with the committer goroutine alone, and no caller's answer waits
// for a barrier queued behind it. A caller that does not wait never
// leads.
package groupcommit

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// MaxBatch bounds a batch so one sync does not hold many megabytes of
// replies back.
const MaxBatch = 1024

// MaxQueue bounds the transactions waiting for the group commit: past it
// Submit blocks, so callers that do not wait cannot grow the queue
// without bound.
const MaxQueue = 4096

// ErrClosed is Submit's error once the queue is shut.
var ErrClosed = errors.New("the group commit is shut")

// Hooks are what a queue asks of its owner. Each runs on the leader's
// goroutine, one leader at a time.
type Hooks[T any] struct {
	// Barrier returns the work of a barrier transaction, nil for a plain
	// one. A barrier runs alone, after every transaction queued before
	// it and before any queued after it, so it sees (and may change) the
	// state at one point in time.
	Barrier func(T) func()
	// Commit commits a run of plain transactions as one group commit.
	Commit func(group []T)
	// Done is called for each transaction once it is committed (a
	// barrier once it ran), in order: the caller may have its answer.
	Done func(T)
	// Published is called with a group once Done was called for each of
	// its transactions.
	Published func(group []T)
	// Log hears of a panic while leading.
	Log *slog.Logger
}

// Queue is the queue of a group commit of transactions of type T.
type Queue[T comparable] struct {
	h  Hooks[T]
	mu sync.Mutex
	q  []T
	// leading: someone leads (or the lead is handed to the committer
	// goroutine: handed). Invariant: a non-empty queue has a leader.
	leading, handed bool
	// open: the queue is started; until then transactions only queue,
	// and the committer goroutine leads first.
	open    bool
	closing bool
	kick    chan struct{} // cap 1: the lead is handed to the committer goroutine
	room    sync.Cond     // the queue is below MaxQueue
	idle    sync.Cond     // nobody leads
	stopped chan struct{} // the committer goroutine ended
	// moved is when the queue last made progress (unix ns): a group or a
	// barrier done, or work come to a queue that had none (Stalled).
	moved atomic.Int64
}

// New returns a queue that commits with h. Transactions submitted before
// Start wait for it.
func New[T comparable](h Hooks[T]) *Queue[T] {
	q := &Queue[T]{h: h, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	q.room.L, q.idle.L = &q.mu, &q.mu
	return q
}

// hand gives the lead to the committer goroutine. Called with q.mu held
// by the leader (or by one taking the lead for it).
func (q *Queue[T]) hand() {
	q.leading, q.handed = true, true
	select {
	case q.kick <- struct{}{}:
	default: // a kick is on its way
	}
}

// Submit queues t. With wait, the caller waits for t: when nobody leads
// it leads itself, and Submit returns once t's group is committed (and
// Done was called for t) or, if another leads, at once; the caller then
// waits for its Done. Without wait, Submit only queues t. Submit blocks
// while the queue is full, and returns ErrClosed once it is shut.
func (q *Queue[T]) Submit(t T, wait bool) error {
	q.mu.Lock()
	for len(q.q) >= MaxQueue && !q.closing {
		q.room.Wait()
	}
	if q.closing {
		q.mu.Unlock()
		return ErrClosed
	}
	if len(q.q) == 0 && !q.leading {
		q.moved.Store(time.Now().UnixNano()) // idle until now
	}
	q.q = append(q.q, t)
	lead := false
	if !q.leading && q.open {
		if wait {
			q.leading, lead = true, true
		} else {
			q.hand() // a caller that does not wait does not lead
		}
	}
	q.mu.Unlock()
	if lead {
		q.lead(t, true)
	}
	return nil
}

// Start opens the queue and starts the committer goroutine.
func (q *Queue[T]) Start() {
	q.mu.Lock()
	q.open = true
	if len(q.q) > 0 {
		q.hand()
	}
	q.mu.Unlock()
	go q.committer()
}

// committer leads whenever the lead is handed to it, until Stop.
func (q *Queue[T]) committer() {
	defer close(q.stopped)
	for range q.kick {
		q.mu.Lock()
		mine := q.handed
		q.handed = false
		q.mu.Unlock()
		if mine {
			var none T
			q.lead(none, false)
		}
	}
}

// lead commits batches while the queue has transactions: all of them
// when it has no own transaction (the committer goroutine), else until
// own is done, then hands the rest to the committer goroutine.
func (q *Queue[T]) lead(own T, hasOwn bool) {
	defer q.crashOnPanic()
	var batch []T
	ownDone := false
	for {
		q.mu.Lock()
		if len(q.q) > 1 {
			// Clients acknowledged by the last batch are on their way
			// back: yielding while the queue still grows lets them join
			// this batch instead of the next (measured by the audit
			// package's AppendSync64Writers: 39-71k/s drained at once,
			// 81-100k/s so).
			for i, n := 0, len(q.q); i < 4; i++ {
				q.mu.Unlock()
				runtime.Gosched()
				q.mu.Lock()
				if len(q.q) == n {
					break
				}
				n = len(q.q)
			}
		}
		switch {
		case len(q.q) == 0:
			q.leading = false
			q.idle.Broadcast()
			q.mu.Unlock()
			return
		case ownDone:
			// The caller has its answer: the committer goroutine goes on.
			q.hand()
			q.mu.Unlock()
			return
		}
		n := min(len(q.q), MaxBatch)
		if hasOwn {
			// A caller leads only the group its own transaction is in
			// (it came first): a barrier queued behind it, a commit of
			// ten thousand files, is the committer goroutine's to run.
			if q.h.Barrier(q.q[0]) != nil {
				n = 1
			}
			for i := 1; i < n; i++ {
				if q.h.Barrier(q.q[i]) != nil {
					n = i
					break
				}
			}
		}
		batch = append(batch[:0], q.q[:n]...)
		full := len(q.q) >= MaxQueue
		q.q = append(q.q[:0], q.q[n:]...)
		if full {
			q.room.Broadcast()
		}
		q.mu.Unlock()
		if q.commitBatch(batch, own, hasOwn) {
			ownDone = true
		}
		clear(batch)
	}
}

// crashOnPanic stops the process on a panic while leading. The queue
// and what it commits to are in an unknown state then, and the process
// must restart and recover, as it did when only the committer goroutine
// committed; on a caller's goroutine a recovery of the caller's panics
// (a server answering EIO to a request) would instead leave the queue
// with a leader that is gone, and every later transaction waiting
// forever.
func (q *Queue[T]) crashOnPanic() {
	p := recover()
	if p == nil {
		return
	}
	if q.h.Log != nil {
		q.h.Log.Error("panic in the group commit: stopping", "panic", p, "stack", string(debug.Stack()))
	}
	go func() { panic(fmt.Sprintf("group commit: %v", p)) }()
	select {}
}

// commitBatch commits the transactions of batch in order: each run of
// plain transactions is one group commit; a barrier runs alone, after
// what came before it and before what comes after. It reports whether
// own (when hasOwn) was in batch. Leader only.
func (q *Queue[T]) commitBatch(batch []T, own T, hasOwn bool) (ownDone bool) {
	for len(batch) > 0 {
		if t := batch[0]; q.h.Barrier(t) != nil {
			q.h.Barrier(t)()
			q.moved.Store(time.Now().UnixNano())
			ownDone = ownDone || hasOwn && t == own
			q.h.Done(t)
			batch = batch[1:]
			continue
		}
		n := 1
		for n < len(batch) && q.h.Barrier(batch[n]) == nil {
			n++
		}
		group := batch[:n]
		batch = batch[n:]
		q.h.Commit(group)
		q.moved.Store(time.Now().UnixNano())
		for _, t := range group {
			ownDone = ownDone || hasOwn && t == own
			q.h.Done(t)
		}
		// The replies go first: waking every subscriber before the
		// callers put their replies behind the fan-out's writes.
		q.h.Published(group)
	}
	return ownDone
}

// Stalled reports whether transactions wait (queued, or a batch being
// committed) and the queue made no progress for d: no group and no
// barrier done, the last of them (or the work's arrival at an idle
// queue) longer ago than d. The daemon's watchdog pings only while it is
// not (issue 45: the pings went on through a stall of every write, so
// systemd could not see it).
func (q *Queue[T]) Stalled(d time.Duration) bool {
	q.mu.Lock()
	waiting := len(q.q) > 0 || q.leading
	q.mu.Unlock()
	return waiting && time.Since(time.Unix(0, q.moved.Load())) > d
}

// Shut refuses new transactions; false if the queue was already shut.
func (q *Queue[T]) Shut() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		return false
	}
	q.closing = true
	q.room.Broadcast()
	return true
}

// Stop, once the queue is shut, waits until what is queued is committed
// and stops the committer goroutine.
func (q *Queue[T]) Stop() {
	q.mu.Lock()
	if len(q.q) > 0 && !q.leading {
		q.hand() // queued before Start
	}
	for q.leading {
		q.idle.Wait()
	}
	close(q.kick)
	q.mu.Unlock()
	<-q.stopped
}
