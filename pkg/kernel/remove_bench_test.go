package kernel

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// BenchmarkRemoveAgent removes an agent that has n memories (agent.remove
// through the kernel's gate, its commits included) while another agent
// saves a key over and over: the figures are the removal's time and the
// p99 and max of the other agent's saves while it ran (issue 45: removing
// a large agent held every other agent's save for the whole removal).
func BenchmarkRemoveAgent(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) { benchRemoveAgent(b, n) })
	}
}

func benchRemoveAgent(b *testing.B, n int) {
	k := queueKernel(b, b.TempDir())
	defer k.Close()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	ctx := context.Background()
	var waits []time.Duration
	var remove time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		agent := fmt.Sprintf("big%d", i)
		for done := 0; done < n; done += 1000 {
			ins := make([]proto.MemoryInput, min(1000, n-done))
			for j := range ins {
				ins[j].Text = fmt.Sprintf("memory %d of round %d: the deploy key lives in vault", done+j, i)
			}
			if _, err := k.MemRemember(ctx, admin, proto.MemRememberArgs{Agent: agent, Memories: ins}, nil); err != nil {
				b.Fatal(err)
			}
		}
		// Committed and written first: the figures are the removal's,
		// not those of a commit of n new files or of a file system busy
		// creating them.
		if _, err := k.Commit(ctx, admin, proto.CommitArgs{Agent: agent}, nil); err != nil {
			b.Fatal(err)
		}
		k.state.Flush()
		b.StartTimer()
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
				if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "other", Key: "k", Value: fmt.Sprint(j)}, nil); err != nil {
					b.Error(err)
					return
				}
				waits = append(waits, time.Since(t0))
			}
		}()
		t0 := time.Now()
		rec, err := k.AgentRemove(ctx, admin, agent, nil)
		remove += time.Since(t0)
		close(stop)
		wg.Wait()
		if err != nil || !rec.Removed || rec.Memories != n {
			b.Fatalf("removed %+v: %v", rec, err)
		}
	}
	b.ReportMetric(float64(remove.Milliseconds())/float64(b.N), "remove-ms")
	if len(waits) > 0 {
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "other-save-p99-ms")
		b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "other-save-max-ms")
		b.ReportMetric(float64(len(waits)), "other-saves")
	}
}
