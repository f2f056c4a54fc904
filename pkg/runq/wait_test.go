package runq

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

func TestWaitAttachAndSignal(t *testing.T) {
	q, _, _ := newQueue(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, first, err := q.Admit(ctx, spec(t, "r1", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil || first == nil {
		t.Fatalf("first: %v %v", first, err)
	}
	if _, _, err := q.Admit(ctx, spec(t, "r2", "/bin/true"), audit.Actor{}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Admit(ctx, spec(t, "r3", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	p2, p3 := q.Lookup("r2"), q.Lookup("r3")

	// Attaching to a queued run sends its queued record first.
	attached := make(chan []string, 1)
	go func() {
		var got []string
		Attach(ctx, nil, p2, func(b []byte) error {
			var rec struct{ Type, State string }
			json.Unmarshal(b, &rec)
			got = append(got, rec.Type+" "+rec.State)
			return nil
		})
		attached <- got
	}()

	// A signal that ends a process ends a queued run there: its record is
	// the one of the run it became.
	rec, err := q.Signal(ctx, audit.Actor{}, p3, syscall.SIGTERM)
	if err != nil || rec.ID != "r3" || rec.Status == nil || *rec.Status != 128+int(syscall.SIGTERM) {
		t.Fatalf("signal a queued run: %+v %v", rec, err)
	}

	var exits []proto.ExitRecord
	done := make(chan error, 1)
	go func() {
		done <- Wait(ctx, []Waited{{Pending: p2}, {Run: first}}, func(ex *proto.ExitRecord) error {
			exits = append(exits, *ex)
			return nil
		})
	}()
	first.End("make room")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(exits) != 2 || exits[0].Run != "r1" || exits[1].Run != "r2" || exits[1].Status != 0 || exits[1].Type != proto.RecordExit {
		t.Fatalf("exits: %+v", exits)
	}
	got := <-attached
	if len(got) < 2 || got[0] != "run "+proto.RunQueued || got[len(got)-1] != "exit " {
		t.Fatalf("attach: %q", got)
	}

	// Waiting ends with ctx.
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer wcancel()
	_, r4, err := q.Admit(ctx, spec(t, "r4", "/bin/sleep", "30"), audit.Actor{}, 0, 0, nil)
	if err != nil || r4 == nil {
		t.Fatalf("r4: %v %v", r4, err)
	}
	if err := Wait(wctx, []Waited{{Run: r4}}, func(*proto.ExitRecord) error { return nil }); err != context.DeadlineExceeded {
		t.Fatalf("wait past ctx: %v", err)
	}
	r4.End("test over")
	<-r4.Done()
}

func TestWhat(t *testing.T) {
	if What(3, "") != "exit 3" || What(137, "KILL") != "signal KILL" {
		t.Fatalf("what: %q %q", What(3, ""), What(137, "KILL"))
	}
}
