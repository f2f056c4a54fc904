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

	"golang.org/x/sys/unix"
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

// BenchmarkApplyNewKeys writes 100,000 new memories (250 B, a bulk
// remember's files) through the journal and the applier, on the disk
// under OXIOS_BENCH_DIR (default: the test's folder), and reports the
// time from the first batch until every file is written and the
// process's CPU a key. (Writing a new key's file straight into its path
// with O_EXCL, without the temp file and rename, measured no better in
// it: 55 and 105 us a key against 41 and 97, on a loaded machine.)
func BenchmarkApplyNewKeys(b *testing.B) {
	const n = 100_000
	value := bytes.Repeat([]byte("x"), 250)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir := b.TempDir()
		if d := os.Getenv("OXIOS_BENCH_DIR"); d != "" {
			var err error
			if dir, err = os.MkdirTemp(d, "apply"); err != nil {
				b.Fatal(err)
			}
		}
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cpu0 := cpuSeconds()
		t0 := time.Now()
		for lo := 0; lo < n; lo += 1000 {
			bt := s.Begin()
			for k := lo; k < lo+1000; k++ {
				if e := bt.Add(&Change{Agent: "bench", Space: SpaceMem, Key: memKey(k), Value: value}); e != nil {
					b.Fatal(e)
				}
			}
			if err := bt.Write(); err != nil {
				b.Fatal(err)
			}
			if err := bt.Sync(); err != nil {
				b.Fatal(err)
			}
			bt.Publish()
		}
		s.Flush()
		b.ReportMetric(float64(time.Since(t0).Milliseconds()), "ms")
		b.ReportMetric((cpuSeconds()-cpu0)/n*1e6, "cpu-us/key")
		b.StopTimer()
		s.Close()
		if os.Getenv("OXIOS_BENCH_DIR") != "" {
			os.RemoveAll(dir)
		}
		b.StartTimer()
	}
}

func cpuSeconds() float64 {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
