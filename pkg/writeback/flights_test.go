package writeback

import (
	"testing"
	"time"
)

// waits reports whether fn is still blocked after a moment.
func waits(fn func()) bool {
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
		return false
	case <-time.After(50 * time.Millisecond):
		return true
	}
}

func TestFlightsWaitForTheAgentAndTheKey(t *testing.T) {
	var f Flights
	if waits(func() { f.Wait("a") }) || waits(func() { f.WaitKey("a", "k") }) {
		t.Fatal("nothing in flight: no wait")
	}
	d1 := make(chan struct{})
	f.Takeoff("a", "x/y/k", d1)
	for _, key := range []string{"x/y/k", "x/", "x/y/"} {
		if !waits(func() { f.WaitKey("a", key) }) {
			t.Fatalf("WaitKey(%q) does not wait for the change below it", key)
		}
	}
	if !waits(func() { f.Wait("a") }) {
		t.Fatal("Wait does not wait for the agent's change")
	}
	if waits(func() { f.Wait("b") }) || waits(func() { f.WaitKey("a", "other") }) || waits(func() { f.WaitKey("a", "x/z/") }) {
		t.Fatal("a wait for another agent, key or folder waits")
	}
	close(d1)
	if waits(func() { f.Wait("a") }) || waits(func() { f.WaitKey("a", "x/") }) {
		t.Fatal("a durable change still waited for")
	}
}

func TestFlightsLandKeepsALaterChange(t *testing.T) {
	var f Flights
	d1, d2 := make(chan struct{}), make(chan struct{})
	f.Takeoff("a", "d/k1", d1)
	f.Takeoff("a", "d/k2", d2)
	close(d1)
	f.Land("a", "d/k1", d1)
	if waits(func() { f.WaitKey("a", "d/k1") }) {
		t.Fatal("a landed change is waited for")
	}
	if !waits(func() { f.Wait("a") }) || !waits(func() { f.WaitKey("a", "d/") }) {
		t.Fatal("landing the first change forgot the second")
	}
	close(d2)
	f.Land("a", "d/k2", d2)
	if f.n.Load() != 0 || len(f.last) != 0 || len(f.keys) != 0 {
		t.Fatalf("left after landing all: n=%d last=%v keys=%v", f.n.Load(), f.last, f.keys)
	}
}
