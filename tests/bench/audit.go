package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/oxios/oxios/pkg/audit"
)

// benchAudit measures the audit log on its own: durable appends with the
// kernel's group commit (one committer, writers waiting for their batch's
// fdatasync) and the verification of a million entries, offline through
// the ox-audit binary.
func benchAudit(dir string) {
	fs := fsyncRate(dir)
	report("baseline: 200 B append + fdatasync (/s)", fs, 0, "disk limit")
	for _, writers := range []int{1, 64} {
		r := auditAppendRate(filepath.Join(dir, fmt.Sprintf("audit-append-%d", writers)), writers)
		target := ">= 3k/s"
		if writers > 1 {
			target = ">= 80k/s"
		}
		report(fmt.Sprintf("audit append durable, %d writers (/s)", writers), r, fs, target)
	}
	benchVerify(filepath.Join(dir, "audit-1m"), 1_000_000)
}

type auditReq struct {
	e    *audit.Entry
	done chan error
}

// auditAppendRate runs writers that each submit one entry and wait until
// it is durable; a committer takes whatever is queued, appends it and
// syncs once, as the kernel's committer does.
func auditAppendRate(dir string, writers int) float64 {
	l, err := audit.Open(dir, audit.Options{})
	check(err)
	defer l.Close()
	q := make(chan auditReq, 4096)
	go func() {
		batch := make([]auditReq, 0, 1024)
		entries := make([]*audit.Entry, 0, 1024)
		for r := range q {
			batch = append(batch[:0], r)
			for i, n := 0, len(q); i < 4 && n > 0; i++ {
				runtime.Gosched()
				if m := len(q); m == n {
					break
				} else {
					n = m
				}
			}
		drain:
			for len(batch) < cap(batch) {
				select {
				case r, ok := <-q:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			entries = entries[:0]
			for _, r := range batch {
				entries = append(entries, r.e)
			}
			err := l.Append(entries)
			if err == nil {
				err = l.Sync()
			}
			for _, r := range batch {
				r.done <- err
			}
		}
	}()
	defer close(q)
	args := audit.ArgsDigest([]byte(`{"agent":"bench","key":"k","value":"v"}`))
	return parallel(writers, func(stop *atomic.Bool) int64 {
		var n int64
		done := make(chan error, 1)
		for !stop.Load() {
			e := &audit.Entry{Actor: audit.Actor{UID: 1000, PID: 4242}, Op: "state.save", Target: "bench:notes/k", Args: args, Result: "ok"}
			q <- auditReq{e, done}
			check(<-done)
			n++
		}
		return n
	})
}

// benchVerify writes a log of n entries and times `ox-audit verify --data`
// on it (a fresh process, as an operator runs it), against reading the
// same bytes once.
func benchVerify(dir string, n int) {
	l, err := audit.Open(dir, audit.Options{})
	check(err)
	args := audit.ArgsDigest([]byte("x"))
	batch := make([]*audit.Entry, 10000)
	for done := 0; done < n; done += len(batch) {
		for i := range batch {
			batch[i] = &audit.Entry{Actor: audit.Actor{UID: 1000, PID: int32(done + i)}, Op: "state.save", Target: fmt.Sprintf("bench:notes/%d", done+i), Args: args, Result: "ok"}
		}
		check(l.Append(batch))
	}
	check(l.Sync())
	check(l.Close())

	var size int64
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*"))
	read := func() time.Duration {
		start := time.Now()
		for _, s := range segs {
			f, err := os.Open(s)
			check(err)
			m, _ := io.Copy(io.Discard, f)
			size += m
			f.Close()
		}
		return time.Since(start)
	}
	read() // warm the page cache, as it is for the verify runs
	size = 0
	base := read()
	best := time.Duration(1 << 62)
	for i := 0; i < 3; i++ {
		start := time.Now()
		out, err := exec.Command(filepath.Join(*binDir, "ox-audit"), "verify", "--data", dir, "--json").CombinedOutput()
		if err != nil {
			fatal(fmt.Errorf("ox-audit verify: %v: %s", err, out))
		}
		best = min(best, time.Since(start))
	}
	fmt.Printf("%-46s %12.0fms %12.1fms %7.1fx  %s\n", fmt.Sprintf("ox-audit verify --data, %dk entries (ms)", n/1000),
		ms(best), ms(base), float64(best)/float64(base), fmt.Sprintf("< 1000 ms (%d MiB; baseline: read once)", size>>20))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
