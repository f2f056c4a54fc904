package llm

import (
	"sync"
	"time"
)

// maxBreakers bounds the endpoints a Breakers keeps a breaker for (a run
// by hand may name its own).
const maxBreakers = 32

// Breakers holds one circuit breaker per model endpoint, shared by every
// run of the daemon, so that when an endpoint is down one run probes it
// and the others wait. The zero Breakers is ready to use.
type Breakers struct {
	mu sync.Mutex
	m  map[string]*Breaker
}

// Get returns the breaker of endpoint, made on first use with the
// default thresholds and lease as its probe lease.
func (h *Breakers) Get(endpoint string, lease time.Duration) *Breaker {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b, ok := h.m[endpoint]; ok {
		return b
	}
	if h.m == nil || len(h.m) >= maxBreakers {
		// Forgetting all is simple and safe: a new breaker is closed.
		h.m = map[string]*Breaker{}
	}
	d := DefaultConfig(endpoint, "", "")
	b := NewBreaker(d.Threshold, d.Cooldown, d.MaxCooldown)
	b.ProbeLease = lease
	h.m[endpoint] = b
	return b
}

// Says is the state of endpoint's breaker as ox-status says it, "" when
// no endpoint is configured (endpoint "").
func (h *Breakers) Says(endpoint string) string {
	if endpoint == "" {
		return ""
	}
	return h.State(endpoint).String()
}

// State is the state of endpoint's breaker: closed when it has none.
func (h *Breakers) State(endpoint string) State {
	h.mu.Lock()
	b, ok := h.m[endpoint]
	h.mu.Unlock()
	if !ok {
		return Closed
	}
	return b.State()
}
