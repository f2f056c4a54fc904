package audit

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

func BenchmarkAppendSync1(b *testing.B) {
	l := open(b, b.TempDir(), Options{})
	defer l.Close()
	es := entries(0, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		es[0].Time = time.Time{}
		if err := l.Append(es); err != nil {
			b.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

func BenchmarkAppendSyncBatch64(b *testing.B) {
	l := open(b, b.TempDir(), Options{})
	defer l.Close()
	es := entries(0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, e := range es {
			e.Time = time.Time{}
		}
		if err := l.Append(es); err != nil {
			b.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(64*b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkAppendSync64Writers is the daemon's case: 64 goroutines each
// wait for their own entry to be durable, and one committer batches what
// is queued into one Append and one Sync (group commit), as kernel.commit
// does. One op is one durable entry.
func BenchmarkAppendSync64Writers(b *testing.B) {
	b.Run("drain", func(b *testing.B) { bench64Writers(b, false) })
	b.Run("yield", func(b *testing.B) { bench64Writers(b, true) })
}

// bench64Writers runs the group commit. With yield, the committer lets the
// writers it just acknowledged queue their next entry before it drains the
// queue (runtime.Gosched while the queue grows), so batches stay near 64
// instead of alternating between a few entries and the rest.
func bench64Writers(b *testing.B, yield bool) {
	l := open(b, b.TempDir(), Options{})
	defer l.Close()
	type req struct {
		e    *Entry
		done chan error
	}
	queue := make(chan req, 4096)
	var committer sync.WaitGroup
	committer.Add(1)
	syncs := 0
	go func() {
		defer committer.Done()
		batch := make([]req, 0, 1024)
		es := make([]*Entry, 0, 1024)
		for r := range queue {
			if yield {
				// Let the writers just acknowledged queue again: yield while
				// the queue grows (a few times at most).
				for i, n := 0, -1; i < 4 && len(queue) > n; i++ {
					n = len(queue)
					runtime.Gosched()
				}
			}
			batch = append(batch[:0], r)
		drain:
			for len(batch) < cap(batch) {
				select {
				case r, ok := <-queue:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			es = es[:0]
			for _, r := range batch {
				es = append(es, r.e)
			}
			err := l.Append(es)
			if err == nil {
				err = l.Sync()
			}
			syncs++
			for _, r := range batch {
				r.done <- err
			}
		}
	}()
	b.SetParallelism(64 / max(1, runtimeProcs()))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		done := make(chan error, 1)
		i := 0
		for pb.Next() {
			queue <- req{e: entry(i), done: done}
			if err := <-done; err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.StopTimer()
	close(queue)
	committer.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "entries/sync")
}

const verifyN = 1_000_000

var verify1M struct {
	once sync.Once
	dir  string
	err  error
}

// cleanupBench removes the log BenchmarkVerify1M built once for all runs.
func cleanupBench() {
	if verify1M.dir != "" {
		os.RemoveAll(verify1M.dir)
	}
}

func BenchmarkVerify1M(b *testing.B) {
	verify1M.once.Do(func() {
		dir, err := os.MkdirTemp("", "oxios-audit-bench-")
		if err != nil {
			verify1M.err = err
			return
		}
		verify1M.dir = dir
		l, err := Open(dir, Options{})
		if err != nil {
			verify1M.err = err
			return
		}
		for i := 0; i < verifyN; i += 4096 {
			if err := l.Append(entries(i, min(4096, verifyN-i))); err != nil {
				verify1M.err = err
				return
			}
		}
		verify1M.err = l.Close()
	})
	if verify1M.err != nil {
		b.Fatal(verify1M.err)
	}
	// Measure verification, not the disk: read the log into the page cache
	// first (this VM's proactive reclaim evicts it between runs).
	segs, _ := listSegments(verify1M.dir)
	for _, s := range segs {
		f, err := os.Open(filepath.Join(verify1M.dir, segName(s)))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, f)
		f.Close()
	}
	b.ResetTimer()
	for b.Loop() {
		rep, err := Verify(verify1M.dir)
		if err != nil || !rep.OK || rep.Entries != verifyN {
			b.Fatalf("Verify: %+v %v", rep, err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/1M")
	b.ReportMetric(float64(verifyN*b.N)/b.Elapsed().Seconds(), "entries/s")
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
