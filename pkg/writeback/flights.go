package writeback

import (
	"sync"
	"sync/atomic"
)

// Flights are the changes the mount queued without waiting: a close(2)
// returns once its save is queued, and a later state.load or state.list
// of the same agent, from any client, must see it (a script's `echo x >
// FILE; ox-state load KEY`). A read waits for the agent's last queued
// change, which the committer makes durable after every change queued
// before it: at most one group commit, and nothing at all when the mount
// has nothing in flight.
//
// The mount's own lookups and opens wait too, but only for the key (or
// folder) they name: once the kernel has evicted an inode, the mount no
// longer holds the content it queued, and a lookup or open that read the
// store before the save landed would see the old value, and a write on it
// would lose the queued one (issue 25). Waiting per key keeps a burst of
// creates of new keys from waiting for each other's saves.
//
// A change is known by its done channel, closed once the change is
// durable or failed: one channel a change. The zero value is empty.
type Flights struct {
	n    atomic.Int64
	mu   sync.Mutex
	last map[string]<-chan struct{} // per agent, the last queued change
	// keys holds, per agent and key, the last queued change of the key,
	// and per agent and folder (its prefix with a trailing slash) the
	// last queued change below it.
	keys map[flightKey]<-chan struct{}
}

type flightKey struct{ agent, key string }

// folders calls fn with each folder above key, as "a/", "a/b/", ...
func folders(key string, fn func(string)) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			fn(key[:i+1])
		}
	}
}

// Takeoff registers done's change of agent's key, queued with the store,
// before it is queued: no read can then fall between the queueing and
// the registration.
func (f *Flights) Takeoff(agent, key string, done <-chan struct{}) {
	f.mu.Lock()
	if f.last == nil {
		f.last = make(map[string]<-chan struct{})
		f.keys = make(map[flightKey]<-chan struct{})
	}
	f.last[agent] = done
	f.keys[flightKey{agent, key}] = done
	folders(key, func(p string) { f.keys[flightKey{agent, p}] = done })
	f.n.Add(1)
	f.mu.Unlock()
}

// Land forgets done's change once it is durable or failed (or was never
// queued).
func (f *Flights) Land(agent, key string, done <-chan struct{}) {
	f.mu.Lock()
	if f.last[agent] == done {
		delete(f.last, agent)
	}
	if k := (flightKey{agent, key}); f.keys[k] == done {
		delete(f.keys, k)
	}
	folders(key, func(p string) {
		if k := (flightKey{agent, p}); f.keys[k] == done {
			delete(f.keys, k)
		}
	})
	f.n.Add(-1)
	f.mu.Unlock()
}

// Wait returns once every change queued for agent before the call is
// durable (or failed).
func (f *Flights) Wait(agent string) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	done := f.last[agent]
	f.mu.Unlock()
	if done != nil {
		<-done
	}
}

// WaitKey returns once every change queued for agent's key (or, with a
// trailing slash, below that folder) before the call is durable (or
// failed). Changes of one key commit in the order queued, so the last
// one is enough.
func (f *Flights) WaitKey(agent, key string) {
	if f.n.Load() == 0 {
		return
	}
	f.mu.Lock()
	done := f.keys[flightKey{agent, key}]
	f.mu.Unlock()
	if done != nil {
		<-done
	}
}
