package server

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// quiesceAfter is how long without a request before the daemon settles.
const quiesceAfter = 5 * time.Second

// quiescer makes an idle daemon use no CPU at all. Go forces a garbage
// collection every two minutes once one has run, which shows up as CPU
// ticks on a daemon with nothing to do. After quiesceAfter without a
// request it collects once, returns free memory to the OS and switches
// the collector's pacing off; the next request switches it back on.
// Nothing polls: the timer runs only while requests come in.
//
// Parked is not unbounded: work goes on without new requests (a request
// that runs long, such as the first commit of a million keys; the
// applier writing a bulk load's files; runs and schedules), and with the
// collector off all it allocated stayed (issue 51: 2 KB a key at a
// commit of 1M keys, never given back). So parking sets a memory limit
// of twice what the daemon holds then (and at least 64 MiB more): the
// collector runs again as soon as the daemon grows past it, and an idle
// one never reaches it.
type quiescer struct {
	requests atomic.Uint64
	armed    atomic.Bool
	parked   atomic.Bool

	mu      sync.Mutex
	after   time.Duration // 0 means quiesceAfter
	timer   *time.Timer
	seen    uint64
	percent int   // the GC percent to restore
	limit   int64 // the memory limit to restore
}

// parkedLimit is the memory limit while parked for a daemon that holds
// used bytes of the OS's memory: twice that, and at least 64 MiB more.
func parkedLimit(used uint64) int64 { return int64(used + max(used, 64<<20)) }

// touch records a request. It is called for every request, so the common
// case is two atomic operations.
func (q *quiescer) touch() {
	q.requests.Add(1)
	if q.parked.Load() {
		q.unpark()
	}
	if !q.armed.Load() {
		q.arm()
	}
}

func (q *quiescer) arm() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.armed.Load() {
		return
	}
	q.armed.Store(true)
	q.seen = q.requests.Load()
	if q.after == 0 {
		q.after = quiesceAfter
	}
	if q.timer == nil {
		q.timer = time.AfterFunc(q.after, q.check)
	} else {
		q.timer.Reset(q.after)
	}
}

func (q *quiescer) check() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.requests.Load(); n != q.seen {
		q.seen = n
		q.timer.Reset(q.after)
		return
	}
	q.armed.Store(false)
	if q.parked.Load() {
		return
	}
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	q.limit = debug.SetMemoryLimit(-1)
	debug.SetMemoryLimit(min(q.limit, parkedLimit(ms.Sys-ms.HeapReleased)))
	q.percent = debug.SetGCPercent(-1)
	q.parked.Store(true)
}

func (q *quiescer) unpark() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.parked.Load() {
		debug.SetGCPercent(q.percent)
		debug.SetMemoryLimit(q.limit)
		q.parked.Store(false)
	}
}

// stop restores the collector and stops the timer.
func (q *quiescer) stop() {
	q.mu.Lock()
	if q.timer != nil {
		q.timer.Stop()
	}
	q.mu.Unlock()
	q.unpark()
}
