package server

import (
	"math"
	"runtime"
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
	// Work that goes on without requests is still collected once the
	// daemon grows past twice its size.
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 || limit < 64<<20 {
		t.Fatalf("settled with memory limit %d: work without requests would never be collected", limit)
	}
	var start runtime.MemStats
	runtime.ReadMemStats(&start)
	var keep [][]byte
	for range 3 * limit / (1 << 20) {
		keep = append(keep, make([]byte, 1<<20))
		keep = keep[:min(len(keep), 8)] // 8 MiB live, the rest garbage
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumGC == start.NumGC {
		t.Fatalf("allocated 3x the parked limit (%d MiB) without a collection", 3*limit>>20)
	}
	if int64(after.HeapAlloc) > limit {
		t.Fatalf("the heap holds %d MiB, past the parked limit of %d MiB", after.HeapAlloc>>20, limit>>20)
	}
	runtime.KeepAlive(keep)
	if q.armed.Load() {
		t.Fatal("timer still armed while idle: an idle daemon would wake up")
	}
	q.touch()
	if p := gcPercent(); p != before || q.parked.Load() {
		t.Fatalf("after a request: GC percent %d (want %d), parked %v", p, before, q.parked.Load())
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("after a request: memory limit %d, want none again", l)
	}
}
