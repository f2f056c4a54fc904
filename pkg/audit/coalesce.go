package audit

import (
	"sync"
	"time"
)

// Coalescer keeps a flood of refusals from flooding the log while keeping
// its count exact (issue 18: 20,000 refused loads in 0.3 s were 20,000
// durable entries). The first refusal of a kind is logged at once, as
// before; refusals alike (same actor uid, agent and run, op, target and
// result) that follow within the window are counted instead, and one
// summary entry says how many there were, with the times of the first
// and the last (Entry.Count, First, Last). An actor past perActor
// refusals in a window has the rest of them counted by op and result
// alone (target "*"), so varying the target does not get around it.
//
// A summary is logged once its burst has been quiet for a window, and at
// least every flushEvery while the burst goes on; Flush logs what is
// pending (at shutdown). Only the count of a burst's last window is lost
// if the daemon is killed.
type Coalescer struct {
	emit     func(*Entry)
	window   time.Duration
	perActor int

	mu     sync.Mutex
	out    []*Entry // summaries to emit once mu is released
	bursts map[burstKey]*burst
	actors map[actorKey]*actorRate
	timer  *time.Timer // armed while bursts are open
}

type actorKey struct {
	uid        uint32
	agent, run string
}

type burstKey struct {
	actor              actorKey
	op, target, result string
}

type burst struct {
	first     *Entry // the first refusal counted, as a template
	count     uint64
	from, to  time.Time
	lastSeen  time.Time
	lastFlush time.Time
}

type actorRate struct {
	start time.Time
	n     int
}

const flushEvery = 10 * time.Second

// NewCoalescer returns a coalescer that logs summaries with emit.
func NewCoalescer(emit func(*Entry)) *Coalescer {
	return &Coalescer{emit: emit, window: time.Second, perActor: 100,
		bursts: map[burstKey]*burst{}, actors: map[actorKey]*actorRate{}}
}

// Admit reports whether the refusal e is to be logged now; if not, it has
// been counted for a summary.
func (c *Coalescer) Admit(e *Entry) bool {
	now := time.Now()
	ak := actorKey{e.Actor.UID, e.Actor.Agent, e.Actor.Run}
	k := burstKey{ak, e.Op, e.Target, e.Result}
	c.mu.Lock()
	defer c.unlock()
	if c.count(k, e, now) {
		return false
	}
	r := c.actors[ak]
	if r == nil || now.Sub(r.start) > c.window {
		r = &actorRate{start: now}
		c.actors[ak] = r
	}
	if r.n++; r.n > c.perActor {
		k.target = "*"
		if !c.count(k, e, now) {
			c.open(k, e, now, 1)
		}
		return false
	}
	c.open(k, e, now, 0)
	return true
}

// count adds e to the open burst k, if there is one.
func (c *Coalescer) count(k burstKey, e *Entry, now time.Time) bool {
	b := c.bursts[k]
	if b == nil || now.Sub(b.lastSeen) > c.window {
		return false
	}
	if b.count == 0 {
		b.first, b.from = e, now
	}
	b.count++
	b.to, b.lastSeen = now, now
	return true
}

// open starts burst k with e logged (n 0) or counted (n 1).
func (c *Coalescer) open(k burstKey, e *Entry, now time.Time, n uint64) {
	if old := c.bursts[k]; old != nil {
		c.summarize(k, old)
	}
	c.bursts[k] = &burst{first: e, count: n, from: now, to: now, lastSeen: now, lastFlush: now}
	if c.timer == nil {
		c.timer = time.AfterFunc(c.window, c.tick)
	} else if len(c.bursts) == 1 {
		c.timer.Reset(c.window)
	}
}

// summarize logs b's count, if any; c.mu is held.
func (c *Coalescer) summarize(k burstKey, b *burst) {
	if b.count == 0 {
		return
	}
	s := *b.first
	s.Target = k.target
	s.Count, s.First, s.Last = b.count, b.from.UTC(), b.to.UTC()
	b.count = 0
	c.out = append(c.out, &s)
}

// unlock releases c.mu and then emits the summaries made under it: emit
// may wait for the committer, which must not wait for c.mu.
func (c *Coalescer) unlock() {
	out := c.out
	c.out = nil
	c.mu.Unlock()
	for _, e := range out {
		c.emit(e)
	}
}

func (c *Coalescer) tick() {
	now := time.Now()
	c.mu.Lock()
	defer c.unlock()
	for k, b := range c.bursts {
		switch {
		case now.Sub(b.lastSeen) > c.window:
			c.summarize(k, b)
			delete(c.bursts, k)
		case now.Sub(b.lastFlush) >= flushEvery:
			c.summarize(k, b)
			b.lastFlush = now
		}
	}
	for ak, r := range c.actors {
		if now.Sub(r.start) > c.window {
			delete(c.actors, ak)
		}
	}
	if len(c.bursts) > 0 {
		c.timer.Reset(c.window)
	}
}

// Flush logs every pending count and forgets the bursts.
func (c *Coalescer) Flush() {
	c.mu.Lock()
	defer c.unlock()
	for k, b := range c.bursts {
		c.summarize(k, b)
		delete(c.bursts, k)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}
