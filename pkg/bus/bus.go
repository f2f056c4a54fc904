// Package bus is the kernel's in-process event bus: the kernel publishes
// what each syscall did once it is durable, and subscribers (the mount's
// cache invalidation, `ox-audit tail -f`, `ox-events`) take events at their
// own pace. Publishing never blocks: each subscriber has a bounded buffer,
// and when it is full the events that do not fit are counted as lost and
// reported with the next Take, so a slow reader can say so and recover
// (for instance by rereading the audit log) while the kernel goes on.
// An event's record (Event.Record) reads the same as the one replayed
// from the audit log for a subscriber that catches up (Replayed); Stream
// is a subscriber's stream of both, the replay first.
package bus

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Event is one thing that happened, in the order the kernel committed it.
type Event struct {
	// Name is the kind: "state.changed", "policy.denied", "commit.created"...
	Name string
	// Seq is the audit entry that records the event (0 if none).
	Seq  uint64
	Time time.Time
	// Agent and Key say what changed: Key is a state key, a memory id...
	Agent string
	Key   string
	// Op and Result are the syscall and its outcome ("ok" or an errno code).
	Op     string
	Result string
	// Deleted is set when the change removed Key.
	Deleted bool
	// Data carries what a kind of event adds (a commit record...); it is
	// shared between subscribers and must not be changed.
	Data any

	memo *memo // the encoding subscribers share (Encoded)
}

type memo struct {
	once sync.Once
	b    []byte
	err  error
}

// Encoded returns enc's encoding of the event, computed once for all the
// subscribers that get it: with many subscribers, the kernel encodes an
// event once, not once each.
func (e *Event) Encoded(enc func() ([]byte, error)) ([]byte, error) {
	if e.memo == nil {
		return enc()
	}
	e.memo.once.Do(func() { e.memo.b, e.memo.err = enc() })
	return e.memo.b, e.memo.err
}

// Bus fans events out to subscribers. The zero value is not usable; call
// New.
type Bus struct {
	mu   sync.Mutex
	subs atomic.Pointer[[]*Sub] // copy-on-write, read without the lock
}

// New returns a bus with no subscribers.
func New() *Bus {
	b := &Bus{}
	b.subs.Store(&[]*Sub{})
	return b
}

// Sub is one subscriber's queue.
type Sub struct {
	bus   *Bus
	match func(*Event) bool
	max   int
	ready chan struct{}

	mu     sync.Mutex
	queue  []Event
	lost   uint64
	closed bool
}

// Subscribe starts a queue of at most size events (at least 1) holding
// the events for which match returns true (all events if match is nil).
// match runs in the publisher: it must be quick and must not block.
func (b *Bus) Subscribe(size int, match func(*Event) bool) *Sub {
	s := &Sub{bus: b, match: match, max: max(size, 1), ready: make(chan struct{}, 1)}
	b.mu.Lock()
	old := *b.subs.Load()
	subs := make([]*Sub, len(old), len(old)+1)
	copy(subs, old)
	subs = append(subs, s)
	b.subs.Store(&subs)
	b.mu.Unlock()
	return s
}

// Publish hands evs to every subscriber that wants them. It never blocks
// on a subscriber.
func (b *Bus) Publish(evs ...Event) {
	subs := *b.subs.Load()
	if len(subs) > 1 {
		for i := range evs {
			evs[i].memo = &memo{}
		}
	}
	for _, s := range subs {
		s.push(evs)
	}
}

// Subscribers is the number of open subscriptions.
func (b *Bus) Subscribers() int { return len(*b.subs.Load()) }

func (s *Sub) push(evs []Event) {
	n := 0
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	for i := range evs {
		if s.match != nil && !s.match(&evs[i]) {
			continue
		}
		if len(s.queue) >= s.max {
			s.lost++
		} else {
			s.queue = append(s.queue, evs[i])
		}
		n++
	}
	s.mu.Unlock()
	if n > 0 {
		select {
		case s.ready <- struct{}{}:
		default:
		}
	}
}

// Ready is signalled when events (or a loss) are waiting for Take.
func (s *Sub) Ready() <-chan struct{} { return s.ready }

// Take returns the queued events, appended to dst, and how many events
// were dropped because the queue was full since the last Take. Events
// that were lost came after the ones returned and before any later one.
func (s *Sub) Take(dst []Event) ([]Event, uint64) {
	s.mu.Lock()
	dst = append(dst, s.queue...)
	clear(s.queue)
	s.queue = s.queue[:0]
	lost := s.lost
	s.lost = 0
	s.mu.Unlock()
	return dst, lost
}

// Close ends the subscription; events published afterwards are not kept.
func (s *Sub) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	b := s.bus
	b.mu.Lock()
	old := *b.subs.Load()
	subs := make([]*Sub, 0, len(old))
	for _, o := range old {
		if o != s {
			subs = append(subs, o)
		}
	}
	b.subs.Store(&subs)
	b.mu.Unlock()
}

// FollowGap is the least time between two flushes of a follower: a
// follower of a storm is written, and its reader woken, at most 100
// times a second. With ten followers of every save, their CPU per save
// was 34 us at 2 ms and 28 us at 10 ms (make bench, the events rows;
// the latency of a save moved within noise). It delays an event only
// while events come closer together than that.
const FollowGap = 10 * time.Millisecond

// Follow hands the subscription's events to emit as they come, in
// order, skipping those recorded at or before seq skip (a replay from the
// audit log already had them), and each loss to lost. Before each wait it
// calls flush, so that what was emitted reaches the reader. It returns
// nil when ctx ends (the reader stopped: the normal end), else the first
// error of flush, emit or lost.
//
// Flushes are FollowGap apart at least: an event that comes after a
// quiet spell goes out at once, while a storm of events goes out a
// batch at a time. Each write wakes the follower's reader, which takes
// the CPU from oxiosd: ten followers of every save cost the saves a
// thousand writes a second at most, not ten a commit.
func (s *Sub) Follow(ctx context.Context, skip uint64, flush func() error, emit func(*Event) error, lost func(n uint64) error) error {
	var evs []Event
	var last time.Time
	var gap *time.Timer
	defer func() {
		if gap != nil {
			gap.Stop()
		}
	}()
	for {
		if err := flush(); err != nil {
			return err
		}
		select {
		case <-s.Ready():
		case <-ctx.Done():
			return nil
		}
		if wait := FollowGap - time.Since(last); wait > 0 && !last.IsZero() {
			if gap == nil {
				gap = time.NewTimer(wait)
			} else {
				gap.Reset(wait)
			}
			select {
			case <-gap.C:
			case <-ctx.Done():
				return nil
			}
		}
		last = time.Now()
		var n uint64
		evs, n = s.Take(evs[:0])
		for i := range evs {
			ev := &evs[i]
			if ev.Seq != 0 && ev.Seq <= skip {
				continue
			}
			if err := emit(ev); err != nil {
				return err
			}
		}
		clear(evs)
		if n > 0 {
			if err := lost(n); err != nil {
				return err
			}
		}
	}
}
