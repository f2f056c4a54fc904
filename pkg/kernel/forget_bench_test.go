package kernel

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// BenchmarkForgetAll forgets every memory of an agent that has n of
// them (mem.forget by time: one request), through the kernel's gate and
// group commit on a real store, while another agent saves a key over and
// over: the figures are the forget's time and the p99 and max of the
// other agent's saves while it ran (issue 45: at 100k memories the forget
// took 47 s and held every other agent's save for all of it).
func BenchmarkForgetAll(b *testing.B) {
	for _, n := range benchForgetSizes() {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) { benchForgetAll(b, n) })
	}
}

func benchForgetAll(b *testing.B, n int) {
	k := queueKernel(b, b.TempDir())
	defer k.Close()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	ctx := context.Background()
	var waits []time.Duration
	var forget time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		fillMemories(b, k, "big", n, i)
		// The memories' files are written first: the forget's figures
		// are not those of a file system busy creating them.
		k.state.Flush()
		b.StartTimer()
		var recs []proto.MemoryRecord
		var err error
		waits = append(waits, savesDuring(b, k, func() {
			t0 := time.Now()
			recs, err = k.MemForget(ctx, admin, proto.MemForgetArgs{Agent: "big", Before: time.Now().Add(time.Hour)}, nil)
			forget += time.Since(t0)
		})...)
		if err != nil || len(recs) != n {
			b.Fatalf("forgot %d of %d: %v", len(recs), n, err)
		}
	}
	b.ReportMetric(float64(forget.Milliseconds())/float64(b.N), "forget-ms")
	reportSaves(b, waits)
}

// fillMemories remembers n memories in agent, a thousand a request.
func fillMemories(b *testing.B, k *Kernel, agent string, n, round int) {
	b.Helper()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	for done := 0; done < n; done += 1000 {
		ins := make([]proto.MemoryInput, min(1000, n-done))
		for j := range ins {
			ins[j].Text = fmt.Sprintf("memory %d of round %d: the deploy key lives in vault", done+j, round)
		}
		if _, err := k.MemRemember(context.Background(), admin, proto.MemRememberArgs{Agent: agent, Memories: ins}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// savesDuring runs op while another agent saves a key over and over,
// and returns how long each of those saves took.
func savesDuring(b *testing.B, k *Kernel, op func()) []time.Duration {
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	var waits []time.Duration
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; ; j++ {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if _, err := k.StateSave(context.Background(), admin, proto.StateSaveArgs{Agent: "other", Key: "k", Value: fmt.Sprint(j)}, nil); err != nil {
				b.Error(err)
				return
			}
			waits = append(waits, time.Since(t0))
		}
	}()
	op()
	close(stop)
	wg.Wait()
	return waits
}

// reportSaves reports the p99 and max of the other agent's saves.
func reportSaves(b *testing.B, waits []time.Duration) {
	if len(waits) == 0 {
		return
	}
	sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
	b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "other-save-p99-ms")
	b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "other-save-max-ms")
	b.ReportMetric(float64(len(waits)), "other-saves")
}

// benchForgetSizes are the sizes of BenchmarkForgetAll: 10k and 100k,
// or those OXIOS_BENCH_FORGET names (memories, comma-separated).
func benchForgetSizes() []int {
	v := os.Getenv("OXIOS_BENCH_FORGET")
	if v == "" {
		return []int{10_000, 100_000}
	}
	var ns []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			panic(fmt.Sprintf("OXIOS_BENCH_FORGET: %q is not a count of memories", f))
		}
		ns = append(ns, n)
	}
	return ns
}
