package state

import (
	"fmt"
	"runtime"
	"testing"
)

// memKey is a memory's key as the kernel names it: kind/<ULID>.md.
func memKey(i int) string { return fmt.Sprintf("episodic/01J%023X.md", i*7919) }

// BenchmarkIndexBytesPerKey reports the heap one key of the index costs
// (map slot, entry, key string, folder count), as loaded from the tree.
func BenchmarkIndexBytesPerKey(b *testing.B) {
	const n = 200000
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := &Store{agents: map[string]*agent{}}
		a := s.agentLocked("mem:a")
		for k := 0; k < n; k++ {
			a.addKey(memKey(k), &entry{size: 250, mod: int64(k)})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/key")
		runtime.KeepAlive(s)
	}
}
