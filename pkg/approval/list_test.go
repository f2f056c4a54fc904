package approval

import (
	"context"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/proto"
)

func TestStream(t *testing.T) {
	g := New(0)
	g.Ask(Request{Agent: "ops", Op: "exec", What: "x", Rule: "ask.exec"}, time.Minute)
	g.Ask(Request{Agent: "web", Op: "exec", What: "y", Rule: "ask.exec"}, time.Minute)
	r3 := g.Ask(Request{Agent: "ops", Op: "exec", What: "z", Rule: "ask.exec"}, time.Minute)
	if _, err := g.Decide(r3.ID, true, "uid=0 (root)", ""); err != nil {
		t.Fatal(err)
	}
	visible := func(agent string) bool { return agent == "ops" }
	var got []string
	collect := func(rec *proto.ApprovalRecord) error { got = append(got, rec.ID+":"+rec.State); return nil }
	b := bus.New()
	if err := g.Stream(context.Background(), b, proto.ApproveListArgs{}, visible, collect); err != nil || len(got) != 1 || got[0] != "a1:pending" {
		t.Fatalf("pending: %v %v", got, err)
	}
	got = nil
	if err := g.Stream(context.Background(), b, proto.ApproveListArgs{All: true}, visible, collect); err != nil || len(got) != 2 {
		t.Fatalf("all: %v %v", got, err)
	}
	// Following: what is published after the listing, if visible.
	got = nil
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- g.Stream(ctx, b, proto.ApproveListArgs{Agent: "ops", Follow: true}, visible, func(rec *proto.ApprovalRecord) error {
			got = append(got, rec.ID+":"+rec.State)
			if len(got) == 2 {
				cancel()
			}
			return nil
		})
	}()
	for b.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	web := proto.ApprovalRecord{ID: "a2", Agent: "web", State: Denied}
	ops := proto.ApprovalRecord{ID: "a1", Agent: "ops", State: Approved}
	b.Publish(bus.Event{Name: "approval.decided", Data: &web}, bus.Event{Name: "other", Data: &ops}, bus.Event{Name: "approval.decided", Data: &ops})
	if err := <-done; err != nil || len(got) != 2 || got[0] != "a1:pending" || got[1] != "a1:approved" {
		t.Fatalf("follow: %v %v", got, err)
	}
}
