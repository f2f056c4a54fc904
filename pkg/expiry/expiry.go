// Package expiry calls back when deadlines come: the memories whose TTL
// ends. One timer, set to the earliest deadline of a min-heap, and no
// polling: an idle daemon with a million memories does not wake up until
// the first of them is due.
package expiry

import (
	"container/heap"
	"sync"
	"time"
)

// Item is a deadline (Unix nanoseconds) of an agent's memory.
type Item struct {
	At    int64
	Agent string
	ID    string
}

type items []Item

func (h items) Len() int           { return len(h) }
func (h items) Less(i, j int) bool { return h[i].At < h[j].At }
func (h items) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *items) Push(x any)        { *h = append(*h, x.(Item)) }
func (h *items) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Timer holds the deadlines and fires them.
type Timer struct {
	// fire gets the items due, by agent, and the time it ran at. A
	// deadline is only a hint: fire checks that what it finds is still due
	// (a memory forgotten or replaced since has no, or another, deadline).
	fire func(now int64, due map[string][]string)

	mu    sync.Mutex
	h     items
	timer *time.Timer
	next  int64 // when the timer fires, 0 = not armed
	stop  bool
}

// New returns a timer that calls fire with what is due.
func New(fire func(now int64, due map[string][]string)) *Timer {
	return &Timer{fire: fire}
}

// Reset replaces every deadline with es (at start, from the indexes).
func (t *Timer) Reset(es []Item) {
	h := items(es)
	heap.Init(&h)
	t.mu.Lock()
	t.h = h
	t.armLocked()
	t.mu.Unlock()
}

// Add queues deadlines and moves the timer earlier if needed.
func (t *Timer) Add(es ...Item) {
	if len(es) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range es {
		heap.Push(&t.h, e)
	}
	t.armLocked()
}

func (t *Timer) armLocked() {
	if t.stop || len(t.h) == 0 {
		return
	}
	at := t.h[0].At
	if t.next != 0 && t.next <= at {
		return
	}
	t.next = at
	d := time.Until(time.Unix(0, at))
	if t.timer == nil {
		t.timer = time.AfterFunc(d, t.expire)
	} else {
		t.timer.Reset(d)
	}
}

func (t *Timer) expire() {
	now := time.Now().UnixNano()
	due := map[string][]string{}
	t.mu.Lock()
	t.next = 0
	for len(t.h) > 0 && t.h[0].At <= now {
		e := heap.Pop(&t.h).(Item)
		due[e.Agent] = append(due[e.Agent], e.ID)
	}
	t.mu.Unlock()
	t.fire(now, due)
	t.mu.Lock()
	t.armLocked()
	t.mu.Unlock()
}

// Stop stops the timer for good: nothing fires after it returns, but a
// fire already running finishes.
func (t *Timer) Stop() {
	t.mu.Lock()
	t.stop = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
}
