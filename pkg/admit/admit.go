// Package admit is the run queue (issue 8): at most a number of runs run
// at once, and at most a limit of one agent's; an entry beyond them waits,
// higher priority first, then first come first served. While the host is
// overloaded, queued entries stay queued.
//
// Nothing polls: a slot that frees, an entry that leaves the queue and a
// new entry wake the one goroutine that starts entries (Serve); only
// while entries wait on an overloaded host is the load read again, each
// second. What an entry is (a run's spec, its caller) is the user's: T.
package admit

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
)

// ErrClosed is returned by Admit once the queue is closed.
var ErrClosed = closedError{}

type closedError struct{}

func (closedError) Error() string { return "the run queue is closed" }

// Ticket is an entry of the queue.
type Ticket[T any] struct {
	ID    string
	Agent string
	Prio  int
	// AgentMax is the agent's limit when it was admitted; 0: none.
	AgentMax int
	Item     T

	seq   uint64
	ready bool // its queueing is durable: it may start
	taken bool // out of the queue, being started
}

// Queued reports whether t waited in the queue (it did not start at
// once).
func (t *Ticket[T]) Queued() bool { return t.seq != 0 }

// Queue is the run queue.
type Queue[T any] struct {
	mu      sync.Mutex
	max     int // runs at once; 0: no limit
	running int
	agents  map[string]int
	queue   []*Ticket[T] // sorted: priority, then seq
	byID    map[string]*Ticket[T]
	seq     uint64
	closed  bool
	kick    chan struct{}
	recheck *time.Timer
	// overload says why the host is overloaded ("" if it is not).
	overload func() string
}

// Recheck is how often the load is read while entries wait on an
// overloaded host.
const Recheck = time.Second

// New returns a queue that runs at most max at once (0: no limit) and
// holds entries while overload says why.
func New[T any](max int, overload func() string) *Queue[T] {
	return &Queue[T]{max: max, agents: map[string]int{}, byID: map[string]*Ticket[T]{}, kick: make(chan struct{}, 1), overload: overload}
}

func (q *Queue[T]) kickLocked() {
	if q.closed {
		return
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

func (q *Queue[T]) fitsLocked(t *Ticket[T]) bool {
	if q.max > 0 && q.running >= q.max {
		return false
	}
	return t.AgentMax == 0 || q.agents[t.Agent] < t.AgentMax
}

// MaxQueuedPerAgent is how many runs of one agent wait in the queue at
// most: a run that spawns runs without end (each waiting for a slot of
// its agent) would otherwise grow the queue, and the daemon's memory,
// without end.
const MaxQueuedPerAgent = 256

// ErrQueueFull refuses an entry whose agent has MaxQueuedPerAgent
// waiting.
var ErrQueueFull = errors.New("the agent's queue is full")

// Admit takes a slot for t now (true) if it fits and the host is not
// overloaded, or queues it (false): it may start once Ready says its
// queueing is recorded. An agent with MaxQueuedPerAgent entries waiting
// is refused (ErrQueueFull).
func (q *Queue[T]) Admit(t *Ticket[T]) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, ErrClosed
	}
	if q.overload() == "" && q.fitsLocked(t) {
		q.running++
		q.agents[t.Agent]++
		return true, nil
	}
	waiting := 0
	for _, o := range q.queue {
		if o.Agent == t.Agent {
			waiting++
		}
	}
	if waiting >= MaxQueuedPerAgent {
		return false, ErrQueueFull
	}
	q.seq++
	t.seq = q.seq
	i := sort.Search(len(q.queue), func(i int) bool {
		o := q.queue[i]
		return o.Prio < t.Prio || (o.Prio == t.Prio && o.seq > t.seq)
	})
	q.queue = append(q.queue, nil)
	copy(q.queue[i+1:], q.queue[i:])
	q.queue[i] = t
	q.byID[t.ID] = t
	return false, nil
}

// Ready lets the queued t start.
func (q *Queue[T]) Ready(t *Ticket[T]) {
	q.mu.Lock()
	t.ready = true
	q.kickLocked()
	q.mu.Unlock()
}

// Unqueue takes t out of the queue; false if it was not in it (it is
// being started, or has left).
func (q *Queue[T]) Unqueue(t *Ticket[T]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.taken || q.byID[t.ID] != t {
		return false
	}
	delete(q.byID, t.ID)
	for i, o := range q.queue {
		if o == t {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			break
		}
	}
	return true
}

// Release gives back the slot of a run of agent that ended (or did not
// start) and wakes Serve.
func (q *Queue[T]) Release(agent string) {
	q.mu.Lock()
	q.running--
	if q.agents[agent]--; q.agents[agent] <= 0 {
		delete(q.agents, agent)
	}
	if len(q.queue) > 0 {
		q.kickLocked()
	}
	q.mu.Unlock()
}

// Lookup returns the entry id while it is queued or being started.
func (q *Queue[T]) Lookup(id string) *Ticket[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.byID[id]
}

// Queued returns the queued entries in the order they will start.
func (q *Queue[T]) Queued() []*Ticket[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]*Ticket[T](nil), q.queue...)
}

// State returns how many run and how many wait.
func (q *Queue[T]) State() (running, queued int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running, len(q.queue)
}

// Serve starts queued entries with start as slots free, one at a time
// and in queue order, so that runs start in the order they were
// admitted, until the queue is closed or ctx is done. start owns the
// entry's slot: it releases it if the entry does not start.
func (q *Queue[T]) Serve(ctx context.Context, start func(context.Context, *Ticket[T])) {
	for {
		select {
		case _, ok := <-q.kick:
			if !ok {
				return
			}
		case <-ctx.Done():
			return
		}
		for {
			t := q.next()
			if t == nil {
				break
			}
			start(ctx, t)
			q.mu.Lock()
			delete(q.byID, t.ID)
			q.mu.Unlock()
		}
	}
}

// next takes the first queued entry that may start now, with its slot;
// nil if none (then, on an overloaded host, a recheck is armed).
func (q *Queue[T]) next() *Ticket[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.queue) == 0 {
		return nil
	}
	if why := q.overload(); why != "" {
		if q.recheck == nil {
			q.recheck = time.AfterFunc(Recheck, func() {
				q.mu.Lock()
				q.recheck = nil
				q.kickLocked()
				q.mu.Unlock()
			})
		}
		return nil
	}
	for i, t := range q.queue {
		if t.ready && q.fitsLocked(t) {
			// Out of the queue, still found by id until it has started.
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			t.taken = true
			q.running++
			q.agents[t.Agent]++
			return t
		}
		if q.max > 0 && q.running >= q.max {
			return nil
		}
	}
	return nil
}

// Close closes the queue and returns the entries that were waiting
// (they never start); Serve returns.
func (q *Queue[T]) Close() []*Ticket[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	ts := q.queue
	q.queue = nil
	clear(q.byID)
	if q.recheck != nil {
		q.recheck.Stop()
	}
	close(q.kick)
	return ts
}
