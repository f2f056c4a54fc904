package approval

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestApproveDenyTimeoutCancel(t *testing.T) {
	g := New(0)
	var mu sync.Mutex
	var seen []string
	g.OnChange = func(r Request) { mu.Lock(); seen = append(seen, r.ID+":"+r.State); mu.Unlock() }

	r := g.Ask(Request{Agent: "ops", Op: "exec", What: "rm -rf x", Rule: "ask.exec", Why: "running rm"}, time.Minute)
	if r.ID != "a1" || r.State != Pending || r.Default != Denied {
		t.Fatalf("asked: %+v", r)
	}
	if l := g.List("", true); len(l) != 1 || l[0].ID != "a1" {
		t.Fatalf("pending: %+v", l)
	}
	if ids := g.IDs(func(agent string) bool { return agent == "ops" }); len(ids) != 1 || ids[0] != "a1" {
		t.Fatalf("ids: %v", ids)
	}
	if ids := g.IDs(func(string) bool { return false }); len(ids) != 0 {
		t.Fatalf("ids of no agent: %v", ids)
	}
	if recs := g.Records("", true, func(agent string) bool { return agent == "ops" }); len(recs) != 1 || recs[0].ID != "a1" || recs[0].State != Pending {
		t.Fatalf("records: %+v", recs)
	}
	if recs := g.Records("other", false, func(string) bool { return true }); len(recs) != 0 {
		t.Fatalf("records of another agent: %+v", recs)
	}
	res := make(chan Request)
	go func() { got, _ := g.Wait(context.Background(), r.ID); res <- got }()
	select {
	case got := <-res:
		t.Fatalf("returned before a decision: %+v", got)
	case <-time.After(30 * time.Millisecond):
	}
	if _, err := g.Decide(r.ID, true, "uid=0 (root)", "looks fine"); err != nil {
		t.Fatal(err)
	}
	got := <-res
	if !got.Allowed() || got.DecidedBy != "uid=0 (root)" || got.Reason != "looks fine" {
		t.Fatalf("decided: %+v", got)
	}
	// A second decision is refused and changes nothing.
	if _, err := g.Decide(r.ID, false, "x", "y"); !errors.Is(err, ErrDecided) {
		t.Fatalf("second decision: %v", err)
	}
	if _, err := g.Decide("a99", true, "x", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	// Denied.
	d := g.Ask(Request{Agent: "ops", Op: "exec"}, time.Minute)
	g.Decide(d.ID, false, "uid=0", "no")
	if got, _ := g.Wait(context.Background(), d.ID); got.Allowed() || got.State != Denied || got.Undecided() {
		t.Fatalf("denied: %+v", got)
	}
	// Timeout into the default, each way.
	for _, def := range []string{Denied, Approved} {
		to := g.Ask(Request{Agent: "ops", Default: def}, 20*time.Millisecond)
		got, _ := g.Wait(context.Background(), to.ID)
		if got.State != def || got.DecidedBy != "timeout" || !got.Undecided() {
			t.Fatalf("timeout with default %s: %+v", def, got)
		}
	}
	// The caller goes away: cancelled, not allowed.
	c := g.Ask(Request{Agent: "ops", Default: Approved}, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if got, _ := g.Wait(ctx, c.ID); got.Allowed() || got.State != Cancelled || !got.Undecided() {
		t.Fatalf("cancelled: %+v", got)
	}
	if len(g.List("", true)) != 0 || len(g.List("ops", false)) != 5 || len(g.List("other", false)) != 0 {
		t.Fatalf("lists: %+v", g.List("", false))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 10 || seen[0] != "a1:pending" || seen[1] != "a1:approved" {
		t.Fatalf("changes: %v", seen)
	}
}

func TestIDsContinueAndDecidedAreBounded(t *testing.T) {
	g := New(41)
	if r := g.Ask(Request{}, time.Minute); r.ID != "a42" {
		t.Fatalf("id %s", r.ID)
	}
	for i := 0; i < MaxDecided+10; i++ {
		r := g.Ask(Request{}, time.Minute)
		g.Decide(r.ID, true, "x", "")
	}
	if n := len(g.List("", false)); n != MaxDecided+1 {
		t.Fatalf("%d kept", n)
	}
	l := g.List("", false)
	if l[0].ID != "a42" { // the pending one stays
		t.Fatalf("oldest: %s", l[0].ID)
	}
}
