package approval

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// recorded is what a desk gave its Recorder.
type recorded struct {
	e                 *audit.Entry
	event, agent, key string
	rec               *proto.ApprovalRecord
}

type recorder struct {
	mu      sync.Mutex
	got     []recorded
	seen    chan struct{}
	emitted map[string][]*proto.ApprovalRecord // by run
}

func (r *recorder) emit(run string, rec any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emitted[run] = append(r.emitted[run], rec.(*proto.ApprovalRecord))
}

func (r *recorder) record(ctx context.Context, e *audit.Entry, event, agent, key string, data any) error {
	r.mu.Lock()
	r.got = append(r.got, recorded{e, event, agent, key, data.(*proto.ApprovalRecord)})
	r.mu.Unlock()
	select {
	case r.seen <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.got...)
}

func openDesk(t *testing.T, dir string) (*Desk, *recorder) {
	t.Helper()
	r := &recorder{seen: make(chan struct{}, 1), emitted: map[string][]*proto.ApprovalRecord{}}
	d, err := OpenDesk(0, dir, r.record, r.emit, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return d, r
}

func askPolicy(t *testing.T, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDeskAskApprovedByAnOperator(t *testing.T) {
	d, r := openDesk(t, t.TempDir())
	p := askPolicy(t, "[ask]\nexec = [\"rm\"]\ntimeout = \"1m\"\n")
	who := audit.Actor{UID: 1000, Agent: "ops", Run: "r1"}
	done := make(chan *proto.Error, 1)
	go func() {
		done <- d.Ask(context.Background(), who, "ops", "exec", "rm x", p, &policy.Asked{Rule: "ask.exec", Reason: "running rm"})
	}()
	<-r.seen
	ask := r.all()[0]
	if ask.e.Op != proto.OpApproveAsk || ask.e.Target != "ops:a1 exec rm x [ask.exec]" || ask.e.Result != "ok" || ask.e.Actor != who ||
		ask.event != "" || ask.agent != "ops" || ask.key != "a1" || ask.rec.State != Pending || ask.rec.Run != "r1" {
		t.Fatalf("ask: %+v %+v", ask, ask.e)
	}
	if _, err := d.Decide("a1", true, "uid=0 (root)", "fine"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("approved: %v", err)
	}
	// An operator's decision is audited by the syscall that made it.
	if n := len(r.all()); n != 1 {
		t.Errorf("%d entries, want the ask's alone", n)
	}
	if emitted := r.emitted["r1"]; len(emitted) != 2 || emitted[0].State != Pending || emitted[1].State != Approved {
		t.Errorf("the run was shown %+v", emitted)
	}
}

func TestDeskRecordsADecisionNoOperatorMade(t *testing.T) {
	d, r := openDesk(t, t.TempDir())
	p := askPolicy(t, "[ask]\nexec = [\"rm\"]\ntimeout = \"10ms\"\n")
	// A run of another agent: its run is not named, nor shown anything.
	who := audit.Actor{UID: 1000, Agent: "dev", Run: "r2"}
	err := d.Ask(context.Background(), who, "ops", "exec", "rm x", p, &policy.Asked{Rule: "ask.exec", Reason: "running rm"})
	if err == nil || err.Code != proto.EPERM {
		t.Fatalf("timed out into deny: %v", err)
	}
	got := r.all()
	if len(got) != 2 {
		t.Fatalf("%d entries, want the ask and its decision", len(got))
	}
	dec := got[1]
	if dec.e.Op != proto.OpApproveDecide || dec.e.Target != "ops:a1 denied by timeout" || dec.key != "a1" || dec.rec.State != Denied || dec.e.Actor != who {
		t.Errorf("decision: %+v %+v", dec, dec.e)
	}
	if got[0].rec.Run != "" || len(r.emitted) != 0 {
		t.Errorf("another agent's run named %q, shown %+v", got[0].rec.Run, r.emitted)
	}
}

func TestDeskAsksForABudgetOnce(t *testing.T) {
	d, r := openDesk(t, t.TempDir())
	p := askPolicy(t, "[ask]\ntokens = 100\ntimeout = \"10ms\"\ndefault = \"allow\"\n")
	who := audit.Actor{UID: 1000}
	if err := d.AskBudget(who, "ops", p, proto.Budget{Tokens: 99}); err != nil || len(r.all()) != 0 {
		t.Fatalf("below the threshold: %v, %d entries", err, len(r.all()))
	}
	if err := d.AskBudget(who, "ops", p, proto.Budget{Tokens: 100}); err != nil {
		t.Fatalf("allowed by default: %v", err)
	}
	n := len(r.all())
	if n != 2 || r.all()[0].e.Target != "ops:a1 budget.check spend past ask.tokens [ask.tokens]" {
		t.Fatalf("%d entries %+v", n, r.all()[0].e)
	}
	if err := d.AskBudget(who, "ops", p, proto.Budget{Tokens: 500}); err != nil || len(r.all()) != n {
		t.Errorf("asked again: %v", err)
	}
}

func TestDeskResolvesWhatACrashLeft(t *testing.T) {
	dir := t.TempDir()
	d, _ := openDesk(t, dir)
	req := d.Registry.Ask(Request{Agent: "ops", Op: "exec", What: "rm", Rule: "ask.exec", Why: "w", Default: Denied}, time.Hour)
	d2, r := openDesk(t, dir)
	daemon := audit.Actor{UID: 0, PID: 42}
	d2.ResolveLeft(daemon)
	got := r.all()
	if len(got) != 1 || got[0].e.Op != proto.OpApproveDecide || got[0].e.Actor != daemon || got[0].event != proto.EventApprovalDecided ||
		got[0].e.Target != "ops:"+req.ID+" denied by oxiosd restart" || got[0].agent != "ops" || got[0].key != req.ID {
		t.Fatalf("%+v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, req.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("the resolved request's file stays: %v", err)
	}
	d2.ResolveLeft(daemon)
	if len(r.all()) != 1 {
		t.Error("resolved twice")
	}
}

func TestDeskSettle(t *testing.T) {
	d, r := openDesk(t, t.TempDir())
	a := proto.ApproveDecideArgs{ID: "a1", Approve: true, Reason: "fine"}
	if got := DecisionTarget("*", a); got != "*:a1 approve" {
		t.Fatal(got)
	}
	if got := DecisionTarget("ops", proto.ApproveDecideArgs{ID: "a1"}); got != "ops:a1 deny" {
		t.Fatal(got)
	}
	d.Registry.Ask(Request{Agent: "ops", Op: "exec", What: "rm", Rule: "ask.exec", Why: "w"}, time.Hour)
	who := audit.Actor{UID: 0}
	rec, refused, err := d.Settle(context.Background(), a, "uid=0 (root)", who, "dg")
	if err != nil || refused != nil || rec.State != Approved || rec.DecidedBy != "uid=0 (root)" {
		t.Fatalf("%+v %v %v", rec, refused, err)
	}
	got := r.all()
	if len(got) != 1 || *got[0].e != (audit.Entry{Actor: who, Op: proto.OpApproveDecide, Target: "ops:a1 approved by uid=0 (root): fine", Args: "dg", Result: "ok"}) ||
		got[0].agent != "ops" || got[0].key != "a1" || got[0].rec.State != Approved {
		t.Fatalf("%+v", got)
	}
	if _, refused, err := d.Settle(context.Background(), a, "uid=0 (root)", who, "dg"); err != nil || refused == nil || refused.Code != proto.EEXIST || len(r.all()) != 1 {
		t.Fatalf("decided twice: %v %v", refused, err)
	}
}
