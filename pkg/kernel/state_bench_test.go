package kernel

import (
	"context"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// BenchmarkStateLoadCall is a load of a 100-byte value as the kernel's
// callers make it (the socket's fast path, the mount), through the gate:
// by the admin, and by a run of the agent, whose policy is asked. It
// costs no allocation beyond the value's record.
func BenchmarkStateLoadCall(b *testing.B) {
	k := queueKernel(b, b.TempDir())
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{Admin: true}
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "bench", Key: "v100", Value: string(make([]byte, 100))}, nil); err != nil {
		b.Fatal(err)
	}
	a := proto.StateArgs{Agent: "bench", Key: "v100"}
	for _, who := range []struct {
		name string
		c    *Cred
	}{{"admin", admin}, {"run", &Cred{UID: 1000, Agent: "bench", Run: "r1"}}} {
		b.Run(who.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := k.StateLoad(ctx, who.c, a, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
