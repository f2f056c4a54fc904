package server

import (
	"runtime/debug"
	"testing"
	"time"
)

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestQuiescer(t *testing.T) {
	before := gcPercent()
	// A wide margin between the touches (10 ms) and the quiet time (500 ms):
	// a loaded machine can oversleep by tens of milliseconds.
	q := &quiescer{after: 500 * time.Millisecond}
	defer q.stop()
	q.touch()
	// Busy: requests keep coming, the collector stays on.
	for i := 0; i < 5; i++ {
		time.Sleep(10 * time.Millisecond)
		q.touch()
		if q.parked.Load() {
			t.Fatal("parked while requests were coming in")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !q.parked.Load() {
		if time.Now().After(deadline) {
			t.Fatal("never settled after requests stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if p := gcPercent(); p != -1 {
		t.Fatalf("settled with GC percent %d, want off (-1)", p)
	}
	if q.armed.Load() {
		t.Fatal("timer still armed while idle: an idle daemon would wake up")
	}
	q.touch()
	if p := gcPercent(); p != before || q.parked.Load() {
		t.Fatalf("after a request: GC percent %d (want %d), parked %v", p, before, q.parked.Load())
	}
}
