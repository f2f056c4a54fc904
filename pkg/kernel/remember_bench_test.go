package kernel

import (
	"context"
	"math/rand"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// BenchmarkMemRemember1000 is one mem.remember of 1,000 memories of about
// 130 bytes each (what ox-remember sends from stdin), through the kernel's
// gate and group commit on a real store: the figure is per memory. The
// daemon's bulk row (make bench) adds the socket and the client.
func BenchmarkMemRemember1000(b *testing.B) {
	k := queueKernel(b, b.TempDir())
	defer k.Close()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	words := strings.Fields("the of retrieval information system library index document query search user catalog citation journal science research data indexing term relevance subject classification thesaurus abstract evaluation recall precision automatic analysis file computer language text collection")
	rng := rand.New(rand.NewSource(1))
	batch := func() []proto.MemoryInput {
		ins := make([]proto.MemoryInput, 1000)
		for i := range ins {
			var sb strings.Builder
			for sb.Len() < 130 {
				sb.WriteString(words[rng.Intn(len(words))])
				sb.WriteByte(' ')
			}
			ins[i].Text = strings.TrimSpace(sb.String())
		}
		return ins
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		a := proto.MemRememberArgs{Agent: "bench", Memories: batch()}
		b.StartTimer()
		if _, err := k.MemRemember(ctx, admin, a, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/memory")
	// CPU of the whole process (every thread: the collector's, the
	// applier's if it ran) over the loop, the batches' making included.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*1000), "cpu-ns/memory")
	b.StopTimer() // not Close, which writes the files
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
