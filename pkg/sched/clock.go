package sched

import (
	"sync"
	"time"
)

// Clock is where the scheduler reads the time and sets its timer: the
// system clock in oxiosd, a ManualClock in tests (a test moves it to the
// minute a job is due instead of sleeping until then).
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the scheduler uses. It is armed for
// a time, not a duration: a duration measured from a Now read before the
// clock moved (a ManualClock set by a test meanwhile) would arm it late.
type Timer interface {
	C() <-chan time.Time
	ResetAt(at time.Time)
	Stop()
}

// System is the system clock.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }

// ResetAt re-arms the timer; since Go 1.23 a timer's channel holds no
// stale value after Stop or Reset.
func (t sysTimer) ResetAt(at time.Time) { t.t.Reset(time.Until(at)) }
func (t sysTimer) Stop()                { t.t.Stop() }

// ManualClock is a clock that moves only when told to (Set, Advance),
// firing the timers that come due. For tests.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
	// armed is signalled each time a timer is set, so a test can wait
	// until the scheduler sleeps; arms counts the settings.
	armed chan struct{}
	arms  uint64
}

// NewManualClock returns a clock that reads now until it is moved.
func NewManualClock(now time.Time) *ManualClock {
	return &ManualClock{now: now, armed: make(chan struct{}, 1024)}
}

// Now is the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Armed is signalled whenever a timer of the clock is set or reset.
func (c *ManualClock) Armed() <-chan struct{} { return c.armed }

// Arms counts the times a timer of the clock was set or reset. A timer
// set after a test moved the clock, for a time after the clock's, shows
// that its owner has seen the clock's time (a timer set before, for a
// later time, shows nothing).
func (c *ManualClock) Arms() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arms
}

// Next is the time the earliest armed timer waits for; false when none
// waits. A timer armed for a time after the clock's shows that its owner
// has seen the clock's time.
func (c *ManualClock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	found := false
	for _, t := range c.timers {
		if t.active && (!found || t.at.Before(next)) {
			next, found = t.at, true
		}
	}
	return next, found
}

// NewTimer returns a timer that fires when the clock reaches now+d.
func (c *ManualClock) NewTimer(d time.Duration) Timer {
	t := &manualTimer{c: c, ch: make(chan time.Time, 1)}
	t.ResetAt(c.Now().Add(d))
	return t
}

// Set moves the clock to t (forward or back) and fires the timers due.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	for _, tm := range c.timers {
		if tm.active && !tm.at.After(t) {
			tm.active = false
			select {
			case tm.ch <- t:
			default:
			}
		}
	}
	c.mu.Unlock()
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

type manualTimer struct {
	c      *ManualClock
	ch     chan time.Time
	at     time.Time
	active bool
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

func (t *manualTimer) ResetAt(at time.Time) {
	c := t.c
	c.mu.Lock()
	select { // no stale value, as with time.Timer since Go 1.23
	case <-t.ch:
	default:
	}
	t.at, t.active = at, true
	c.arms++
	found := false
	for _, x := range c.timers {
		if x == t {
			found = true
		}
	}
	if !found {
		c.timers = append(c.timers, t)
	}
	if !at.After(c.now) {
		t.active = false
		t.ch <- c.now
	}
	c.mu.Unlock()
	select {
	case c.armed <- struct{}{}:
	default:
	}
}

func (t *manualTimer) Stop() {
	t.c.mu.Lock()
	t.active = false
	select {
	case <-t.ch:
	default:
	}
	t.c.mu.Unlock()
}
