package state

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
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

// BenchmarkOpen opens a store of one agent with OXIOS_BENCH_KEYS memory
// files (default 100,000; the files are made once per run, which takes
// a while at a million) from a walk of the tree and from the key
// snapshot, and reports the index's heap per key.
func BenchmarkOpen(b *testing.B) {
	n := 100000
	if v := os.Getenv("OXIOS_BENCH_KEYS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	mem := filepath.Join(dir, "repo", "agents", "bench", "mem", "episodic")
	if err := os.MkdirAll(mem, 0o755); err != nil {
		b.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 250)
	for i := 0; i < n; i++ {
		if err := os.WriteFile(filepath.Join(mem, memKey(i)[len("episodic/"):]), value, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, from := range []string{"walk", "snapshot"} {
		b.Run(from, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				snap := filepath.Join(dir, "index", snapName)
				if from == "walk" {
					os.Remove(snap)
				} else if _, err := os.Stat(snap); err != nil {
					// Not made by a walk's close: one open and close makes it.
					s, err := Open(dir, Options{})
					if err == nil {
						err = s.Close()
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				s, err := Open(dir, Options{})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if s.indexFrom != from {
					b.Fatalf("index from %s", s.indexFrom)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/key")
				t0 := time.Now()
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(time.Since(t0).Milliseconds()), "close-ms")
				b.StartTimer()
			}
		})
	}
}
