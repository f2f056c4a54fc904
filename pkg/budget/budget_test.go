package budget

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

func TestOver(t *testing.T) {
	lim := proto.Budget{Tokens: 100, Execs: 2}
	if why := Over(proto.Budget{Tokens: 90}, proto.Budget{Tokens: 10}, lim, false); why != "" {
		t.Errorf("reaching a limit is not passing it: %q", why)
	}
	if why := Over(proto.Budget{Tokens: 100}, proto.Budget{}, lim, true); !strings.Contains(why, "tokens: 100 used of 100") {
		t.Errorf("spent: a limit reached is passed: %q", why)
	}
	why := Over(proto.Budget{Tokens: 90, Execs: 2}, proto.Budget{Tokens: 20, Execs: 1}, lim, false)
	if !strings.Contains(why, "tokens: 90 used + 20 asked of 100") || !strings.Contains(why, "execs: 2 used + 1 asked of 2") {
		t.Errorf("both limits named: %q", why)
	}
	if why := Over(proto.Budget{Tokens: 1e9}, proto.Budget{}, proto.Budget{}, true); why != "" {
		t.Errorf("no limit: %q", why)
	}
}

// testLedger is a ledger over the budget files in stored (counting its
// loads in loads, when given), and the default policy.
func testLedger(t *testing.T, stored map[string][]byte, loads *int) (*Ledger, *policy.Policy) {
	t.Helper()
	l := NewLedger(func(agent string) ([]byte, error) {
		if loads != nil {
			*loads++
		}
		if v, ok := stored[agent]; ok {
			return v, nil
		}
		return nil, errors.New("none")
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p, err := policy.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	return l, p
}

func TestLedger(t *testing.T) {
	stored := map[string][]byte{"old": []byte(`{"limit":{"tokens":5},"used":{"tokens":3}}`), "bad": []byte("{")}
	loads := 0
	l, p := testLedger(t, stored, &loads)
	lim, _, used := l.Limits("old", p)
	if lim.Tokens != 5 || used.Tokens != 3 {
		t.Errorf("stored file: limit %+v used %+v", lim, used)
	}
	if _, _, used := l.Limits("bad", p); used != (proto.Budget{}) {
		t.Errorf("an unreadable file starts from zero: %+v", used)
	}
	commit := func(agent string) func([]byte) error {
		return func(v []byte) error { stored[agent] = v; return nil }
	}
	if err := l.Charge("old", proto.Budget{Tokens: 2, Execs: 1}, commit("old")); err != nil {
		t.Fatal(err)
	}
	var f File
	if err := json.Unmarshal(stored["old"], &f); err != nil || f.Used.Tokens != 5 || f.Used.Execs != 1 || f.Limit.Tokens != 5 || f.Since.IsZero() {
		t.Errorf("after a charge the committed file is %s (%v)", stored["old"], err)
	}
	// A failed commit is returned.
	if err := l.Charge("new", proto.Budget{Execs: 1}, func([]byte) error { return errors.New("disk") }); err == nil {
		t.Error("a failed commit is not returned")
	}
	n := loads
	l.Forget("old")
	l.Limits("old", p)
	if loads != n+1 {
		t.Error("a forgotten agent's file is not read again")
	}
}

func TestForkFile(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	nv, ok := ForkFile([]byte(`{"limit":{"tokens":5},"used":{"tokens":3},"since":"2025-01-01T00:00:00Z"}`), now)
	var b File
	if !ok || json.Unmarshal(nv, &b) != nil || b.Used != (proto.Budget{}) || !b.Since.Equal(now) || b.Limit == nil || b.Limit.Tokens != 5 {
		t.Fatalf("%s %v", nv, ok)
	}
	if v, ok := ForkFile([]byte("{"), now); ok || string(v) != "{" {
		t.Fatalf("%s %v", v, ok)
	}
}

func TestAsked(t *testing.T) {
	var a Asked
	if a.Done("ops") {
		t.Fatal("the zero Asked holds an agent")
	}
	a.Approve("ops")
	if !a.Done("ops") || a.Done("dev") {
		t.Fatal("approved ops only")
	}
}

// chargedRun is a Run that keeps what it is charged.
type chargedRun struct {
	fakeRun
	got proto.Budget
}

func (r *chargedRun) Charge(tokens int64, cost float64, execs int64) {
	r.got.Tokens += tokens
	r.got.Cost += cost
	r.got.Execs += execs
}

func TestChargeRun(t *testing.T) {
	stored := map[string][]byte{}
	l := NewLedger(func(string) ([]byte, error) { return nil, errors.New("none") }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r := &chargedRun{}
	d := proto.Budget{Tokens: 7, Cost: 0.5, Execs: 1}
	if err := l.ChargeRun("a", d, r, func(v []byte) error { stored["a"] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	var f File
	if err := json.Unmarshal(stored["a"], &f); err != nil || f.Used.Tokens != 7 || f.Used.Execs != 1 {
		t.Fatalf("%s (%v)", stored["a"], err)
	}
	if r.got != d {
		t.Fatalf("the run was charged %+v", r.got)
	}
	// No run: the agent alone.
	if err := l.ChargeRun("a", proto.Budget{Execs: 1}, nil, func(v []byte) error { stored["a"] = v; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(stored["a"], &f); err != nil || f.Used.Execs != 2 || r.got.Execs != 1 {
		t.Fatalf("%s (%v) %+v", stored["a"], err, r.got)
	}
}

func TestAudited(t *testing.T) {
	l := NewLedger(func(string) ([]byte, error) { return nil, errors.New("none") }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var queued []*audit.Entry
	var values [][]byte
	waited := 0
	var failWait, failQueue error
	l.Queue = func(ctx context.Context, agent string, value []byte, e *audit.Entry, data any) (func() error, error) {
		if failQueue != nil {
			return nil, failQueue
		}
		queued, values = append(queued, e), append(values, value)
		return func() error { waited++; return failWait }, nil
	}
	e := &audit.Entry{Op: proto.OpBudgetReset}
	if err := l.Audited(context.Background(), "a", Reset, e, nil); err != nil || len(queued) != 1 || queued[0] != e || waited != 1 {
		t.Fatalf("%v %d queued, %d waited", err, len(queued), waited)
	}
	r := &chargedRun{}
	e2 := &audit.Entry{Op: proto.OpExec}
	if err := l.ChargeAudited(context.Background(), "a", proto.Budget{Execs: 1}, r, e2, "data"); err != nil || queued[1] != e2 || waited != 2 || r.got.Execs != 1 {
		t.Fatalf("%v %d waited, run %+v", err, waited, r.got)
	}
	var f File
	if err := json.Unmarshal(values[1], &f); err != nil || f.Used.Execs != 1 {
		t.Fatalf("%s %v", values[1], err)
	}
	// The commit's failure, and one of the queue: not waited for.
	failWait = errors.New("sync failed")
	if err := l.ChargeAudited(context.Background(), "a", proto.Budget{Execs: 1}, nil, e2, nil); err != failWait {
		t.Fatal(err)
	}
	failQueue = errors.New("shutting down")
	if err := l.Audited(context.Background(), "a", Reset, e, nil); err != failQueue || waited != 3 {
		t.Fatal(err, waited)
	}
}
