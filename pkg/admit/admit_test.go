package admit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

type ticket = Ticket[int]

// serve runs q.Serve and sends each started ticket on the channel.
func serve(t *testing.T, ctx context.Context, q *Queue[int]) (<-chan *ticket, *sync.WaitGroup) {
	started := make(chan *ticket, 100)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		q.Serve(ctx, func(_ context.Context, tk *ticket) { started <- tk })
	}()
	return started, &wg
}

func take(t *testing.T, c <-chan *ticket) *ticket {
	t.Helper()
	select {
	case tk := <-c:
		return tk
	case <-time.After(10 * time.Second):
		t.Fatal("nothing started")
		return nil
	}
}

func none(t *testing.T, c <-chan *ticket) {
	t.Helper()
	select {
	case tk := <-c:
		t.Fatalf("%s started", tk.ID)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestQueueOrderAndLimits(t *testing.T) {
	q := New[int](1, func() string { return "" })
	started, wg := serve(t, context.Background(), q)
	first := &ticket{ID: "r1", Agent: "a"}
	if now, err := q.Admit(first); !now || err != nil {
		t.Fatalf("an empty queue admits at once: %v %v", now, err)
	}
	// Full: these wait, higher priority first, then in order of arrival.
	low, hi1, hi2 := &ticket{ID: "low", Agent: "a"}, &ticket{ID: "hi1", Agent: "b", Prio: 5}, &ticket{ID: "hi2", Agent: "a", Prio: 5}
	for _, tk := range []*ticket{low, hi1, hi2} {
		if now, _ := q.Admit(tk); now {
			t.Fatalf("%s admitted past the limit", tk.ID)
		}
	}
	if ids := func() (s []string) {
		for _, tk := range q.Queued() {
			s = append(s, tk.ID)
		}
		return
	}(); len(ids) != 3 || ids[0] != "hi1" || ids[1] != "hi2" || ids[2] != "low" {
		t.Fatalf("queue order %v", ids)
	}
	// Not ready (its queueing not yet recorded): it does not start.
	q.Release("a")
	none(t, started)
	// Ready in queue order: a ready entry starts as soon as it fits, so
	// readying low first could start it before hi1 is ready.
	for _, tk := range []*ticket{hi1, hi2, low} {
		q.Ready(tk)
	}
	if tk := take(t, started); tk != hi1 {
		t.Fatalf("started %s first", tk.ID)
	}
	// Found while being started, gone once start has returned (which is
	// just after the send above: wait for it).
	for deadline := time.Now().Add(10 * time.Second); q.Lookup("hi1") != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a started entry is still looked up")
		}
	}
	none(t, started)
	// Unqueued: never starts.
	if !q.Unqueue(hi2) || q.Unqueue(hi2) {
		t.Error("unqueue once")
	}
	q.Release("b")
	if tk := take(t, started); tk != low {
		t.Fatalf("started %s", tk.ID)
	}
	if running, queued := q.State(); running != 1 || queued != 0 {
		t.Errorf("state %d running %d queued", running, queued)
	}
	if left := q.Close(); len(left) != 0 {
		t.Errorf("left %d", len(left))
	}
	wg.Wait()
	if _, err := q.Admit(&ticket{ID: "late"}); err != ErrClosed {
		t.Errorf("admit after close: %v", err)
	}
}

func TestQueueAgentLimit(t *testing.T) {
	q := New[int](0, func() string { return "" })
	started, _ := serve(t, context.Background(), q)
	defer q.Close()
	a1 := &ticket{ID: "a1", Agent: "a", AgentMax: 1}
	if now, _ := q.Admit(a1); !now {
		t.Fatal("a1 waits")
	}
	a2 := &ticket{ID: "a2", Agent: "a", AgentMax: 1}
	if now, _ := q.Admit(a2); now {
		t.Fatal("a2 admitted past its agent's limit")
	}
	q.Ready(a2)
	// Another agent is not held by a's limit, and does not pass a2.
	if now, _ := q.Admit(&ticket{ID: "b1", Agent: "b", AgentMax: 1}); !now {
		t.Fatal("b1 waits for a's limit")
	}
	none(t, started)
	q.Release("a")
	if tk := take(t, started); tk != a2 {
		t.Fatalf("started %s", tk.ID)
	}
}

func TestQueueOverloadAndClose(t *testing.T) {
	var over atomic.Bool
	over.Store(true)
	q := New[int](0, func() string {
		if over.Load() {
			return "load"
		}
		return ""
	})
	ctx, cancel := context.WithCancel(context.Background())
	started, wg := serve(t, ctx, q)
	w := &ticket{ID: "w", Agent: "a"}
	if now, _ := q.Admit(w); now {
		t.Fatal("admitted on an overloaded host")
	}
	q.Ready(w)
	none(t, started)
	// The load is read again without a kick.
	over.Store(false)
	if tk := take(t, started); tk != w {
		t.Fatalf("started %s", tk.ID)
	}
	// The root context stops Serve; Close hands back what waited.
	cancel()
	wg.Wait()
	x := &ticket{ID: "x", Agent: "a", AgentMax: 1}
	if now, _ := q.Admit(x); now {
		t.Fatal("x admitted past its agent's limit")
	}
	if left := q.Close(); len(left) != 1 || left[0] != x {
		t.Errorf("close left %v", left)
	}
	if q.Close() != nil {
		t.Error("a second close hands back entries")
	}
}

func TestJudge(t *testing.T) {
	h := proto.Host{Cores: 2, Load1: 5, MemTotal: 100, MemAvailable: 10, MemPressure: -1}
	if why := Judge(&h, 2, 0); why != "load 2.50 per core > 2.00" {
		t.Errorf("load: %q", why)
	}
	if why := Judge(&h, 0, 80); why != "memory in use 90.0% > 80.0%" {
		t.Errorf("memory without PSI: %q", why)
	}
	h.MemPressure = 5
	if why := Judge(&h, 3, 80); why != "" {
		t.Errorf("under both thresholds (PSI read): %q", why)
	}
	if Overload(0, 0)() != "" {
		t.Error("no threshold: overloaded")
	}
	if psiSome10([]byte("some avg10=1.50 avg60=0 avg300=0 total=1\nfull avg10=9 avg60=0 avg300=0 total=1\n")) != 1.5 || psiSome10(nil) != -1 {
		t.Error("psi")
	}
}

// An agent has at most MaxQueuedPerAgent entries waiting; one more is
// refused, and another agent still queues.
func TestQueueFull(t *testing.T) {
	q := New[int](1, func() string { return "" })
	defer q.Close()
	if now, _ := q.Admit(&ticket{ID: "run", Agent: "a"}); !now {
		t.Fatal("the first waits")
	}
	for i := range MaxQueuedPerAgent {
		if now, err := q.Admit(&ticket{ID: fmt.Sprint("a", i), Agent: "a"}); now || err != nil {
			t.Fatalf("entry %d: %v %v", i, now, err)
		}
	}
	if _, err := q.Admit(&ticket{ID: "one more", Agent: "a"}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("one past the most: %v", err)
	}
	if _, err := q.Admit(&ticket{ID: "b1", Agent: "b"}); err != nil {
		t.Fatalf("another agent: %v", err)
	}
	if _, queued := q.State(); queued != MaxQueuedPerAgent+1 {
		t.Fatalf("queued %d", queued)
	}
}
