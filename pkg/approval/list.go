package approval

import (
	"context"
	"strings"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/proto"
)

// Stream emits the records approve.list shows of the requests of a.Agent
// ("": every agent's) that visible lets through: the pending ones, or
// every kept one with a.All; with a.Follow, then each request and
// decision the kernel publishes on b (events "approval.*" with the
// record as their data), until ctx ends. It subscribes before the
// listing, so nothing falls between.
func (g *Registry) Stream(ctx context.Context, b *bus.Bus, a proto.ApproveListArgs, visible func(agent string) bool, emit func(*proto.ApprovalRecord) error) error {
	var sub *bus.Sub
	if a.Follow {
		sub = b.Subscribe(1024, func(e *bus.Event) bool { return strings.HasPrefix(e.Name, "approval.") })
		defer sub.Close()
	}
	recs := g.Records(a.Agent, !a.All, visible)
	for i := range recs {
		if err := emit(&recs[i]); err != nil {
			return err
		}
	}
	if !a.Follow {
		return nil
	}
	none := func() error { return nil }
	return sub.Follow(ctx, 0, none, func(ev *bus.Event) error {
		rec, ok := ev.Data.(*proto.ApprovalRecord)
		if !ok || !visible(rec.Agent) {
			return nil
		}
		return emit(rec)
	}, func(uint64) error { return nil })
}
