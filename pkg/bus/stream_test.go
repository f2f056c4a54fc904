package bus

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// A stream replays the log from since, then goes on with the live
// events the replay did not have, filtered alike, and counts a loss.
func TestStream(t *testing.T) {
	log, err := audit.Open(t.TempDir(), audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	es := []*audit.Entry{
		{Op: proto.OpStateSave, Target: "a:k1", Result: "ok"},
		{Op: proto.OpStateSave, Target: "b:k2", Result: "ok"},
		{Op: proto.OpStateDelete, Target: "a:k3", Result: "ok"},
	}
	if err := log.Append(es); err != nil {
		t.Fatal(err)
	}
	log.Publish(3)
	h := History{Scan: log.ScanLines, Name: func(op, result string) string { return "ev." + op }}
	want := func(name, agent string) bool { return agent == "a" }
	b := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type got struct {
		replayed []proto.EventRecord
		live     []proto.EventRecord
		lost     uint64
	}
	var g got
	done := make(chan error, 1)
	go func() {
		done <- b.Stream(ctx, 2, 2, h, want, func(rec any) error {
			switch r := rec.(type) {
			case *proto.EventRecord:
				g.replayed = append(g.replayed, *r)
			case json.RawMessage:
				var ev proto.EventRecord
				if err := json.Unmarshal(r, &ev); err != nil {
					return err
				}
				g.live = append(g.live, ev)
			case *proto.LostRecord:
				g.lost += r.Count
				cancel()
			}
			return nil
		}, func() error { return nil })
	}()
	for b.Subscribers() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Seq 3 was replayed: its live copy is dropped; b's is not wanted;
	// the queue of two holds seq 3 and 4 and loses seq 5.
	b.Publish(Event{Name: "ev.state.delete", Seq: 3, Agent: "a"}, Event{Name: "x", Seq: 4, Agent: "b"},
		Event{Name: "live", Seq: 4, Agent: "a", Key: "k4"}, Event{Name: "live", Seq: 5, Agent: "a"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(g.replayed) != 1 || g.replayed[0].Seq != 3 || g.replayed[0].Event != "ev."+proto.OpStateDelete || !g.replayed[0].Replay {
		t.Fatalf("replayed %+v", g.replayed)
	}
	if len(g.live) != 1 || g.live[0].Seq != 4 || g.live[0].Key != "k4" || g.lost != 1 {
		t.Fatalf("live %+v, lost %d", g.live, g.lost)
	}
	// A failed scan is the wire's error.
	h.Scan = func(uint64, func([]byte) error) error { return errors.New("disk") }
	err = b.Stream(context.Background(), 1, 1, h, want, func(any) error { return nil }, func() error { return nil })
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.EIO {
		t.Fatalf("scan error: %v", err)
	}
}
