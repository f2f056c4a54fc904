package kernel

import (
	"context"
	"fmt"
	"os"
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
		fillMemories(b, k, agent, n, i)
		// Committed and written first: the figures are the removal's,
		// not those of a commit of n new files or of a file system busy
		// creating them.
		if _, err := k.Commit(ctx, admin, proto.CommitArgs{Agent: agent}, nil); err != nil {
			b.Fatal(err)
		}
		k.state.Flush()
		b.StartTimer()
		var rec proto.AgentRecord
		var err error
		waits = append(waits, savesDuring(b, k, func() {
			t0 := time.Now()
			rec, err = k.AgentRemove(ctx, admin, agent, nil)
			remove += time.Since(t0)
		})...)
		if err != nil || !rec.Removed || rec.Memories != n {
			b.Fatalf("removed %+v: %v", rec, err)
		}
	}
	b.ReportMetric(float64(remove.Milliseconds())/float64(b.N), "remove-ms")
	reportSaves(b, waits)
}
