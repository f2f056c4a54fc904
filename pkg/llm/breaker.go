package llm

import (
	"context"
	"sync"
	"time"
)

// State is a circuit breaker's state.
type State int

const (
	// Closed lets every call through, counting failures in a row.
	Closed State = iota
	// Open refuses calls until its cooldown ends.
	Open
	// HalfOpen lets one probe through: its success closes the circuit,
	// its failure opens it again for a longer cooldown.
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker is a circuit breaker (closed, open, half-open).
type Breaker struct {
	threshold int
	base, max time.Duration
	mu        sync.Mutex
	state     State
	fails     int
	cooldown  time.Duration
	until     time.Time // end of the open state
	probing   bool      // a half-open probe is out
	probeAt   time.Time // when it went
	// ProbeLease is how long a probe may be out before another is let
	// through (0: for ever): the prober may die without reporting.
	ProbeLease    time.Duration
	opened, reset int // times opened and closed again, for tests
}

// NewBreaker returns a closed breaker that opens after threshold failures
// in a row (at least 1).
func NewBreaker(threshold int, cooldown, maxCooldown time.Duration) *Breaker {
	if threshold < 1 {
		threshold = 1
	}
	if maxCooldown < cooldown {
		maxCooldown = cooldown
	}
	return &Breaker{threshold: threshold, base: cooldown, max: maxCooldown, cooldown: cooldown}
}

// State returns the breaker's state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Allow says whether a call may go now; if not, how long until it may.
func (b *Breaker) Allow(now time.Time) (time.Duration, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Open:
		if now.Before(b.until) {
			return b.until.Sub(now), false
		}
		b.state = HalfOpen
		b.probing, b.probeAt = true, now
		return 0, true
	case HalfOpen:
		if b.probing && (b.ProbeLease <= 0 || now.Sub(b.probeAt) < b.ProbeLease) {
			return b.base, false
		}
		b.probing, b.probeAt = true, now
	}
	return 0, true
}

// Success records a call that reached the endpoint; it reports whether
// that closed an open circuit.
func (b *Breaker) Success() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fails = 0
	b.probing = false
	if b.state == Closed {
		return false
	}
	b.state, b.cooldown = Closed, b.base
	b.reset++
	return true
}

// Failure records a failed call; it reports whether that opened the
// circuit.
func (b *Breaker) Failure(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	switch b.state {
	case HalfOpen:
		// The probe failed: open again, for longer.
		b.cooldown = min(2*b.cooldown, b.max)
	case Closed:
		b.fails++
		if b.fails < b.threshold {
			return false
		}
	default:
		return false
	}
	b.state = Open
	b.until = now.Add(b.cooldown)
	b.opened++
	return true
}

// Gate returns b as a Gate.
func (b *Breaker) Gate() Gate { return localGate{b} }

// localGate is a Breaker as a Gate, for a client on its own.
type localGate struct{ b *Breaker }

func (g localGate) Allow(context.Context) (time.Duration, bool, error) {
	wait, ok := g.b.Allow(time.Now())
	if !ok {
		return max(wait, time.Millisecond), false, nil
	}
	return 0, g.b.State() == HalfOpen, nil
}

func (g localGate) Report(_ context.Context, ok bool) (string, error) {
	if ok {
		if g.b.Success() {
			return Closed.String(), nil
		}
		return "", nil
	}
	if g.b.Failure(time.Now()) {
		return Open.String(), nil
	}
	return "", nil
}
