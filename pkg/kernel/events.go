package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/proto"
)

// eventQueue bounds a subscriber's queue: beyond it events are counted as
// lost, and the kernel goes on.
const eventQueue = 8192

// Events streams the events c may see (those of agents it may act on;
// the admin's: all), first replayed from the audit log when a.SinceSeq is
// set, then live until ctx ends. A subscriber that falls behind gets a
// "lost" record with the count and goes on.
func (k *Kernel) Events(ctx context.Context, c *Cred, a proto.EventsArgs, raw []byte, emit func(rec any) error, flush func() error) error {
	if err := k.gate(call{op: proto.OpEvents, c: c, agent: a.Agent, raw: raw}); err != nil {
		return err
	}
	if err := a.CheckTypes(); err != nil {
		return err
	}
	want := func(name, agent string) bool { return a.Selects(name, agent) && c.Sees(agent) }
	return k.bus.Stream(ctx, eventQueue, a.SinceSeq, bus.History{Scan: k.audit.ScanLines, Name: eventName}, want, emit, flush)
}
