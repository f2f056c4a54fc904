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
	_, err := sysEvents.Call(k, ctx, c, eventStream{a, emit, flush}, raw)
	return err
}

// eventStream is what events.subscribe takes: its args, and where its
// records go (of several kinds: events, lost counts) and when to make
// them visible.
type eventStream struct {
	proto.EventsArgs
	emit  func(rec any) error
	flush func() error
}

func (k *Kernel) events(ctx context.Context, c *Cred, a eventStream, _ []byte) (struct{}, error) {
	if err := a.CheckTypes(); err != nil {
		return struct{}{}, err
	}
	want := func(name, agent string) bool { return a.Selects(name, agent) && c.Sees(agent) }
	return struct{}{}, k.bus.Stream(ctx, eventQueue, a.SinceSeq, bus.History{Scan: k.audit.ScanLines, Name: eventName}, want, a.emit, a.flush)
}
