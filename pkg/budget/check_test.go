package budget

import (
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

type fakeRun struct{ tokens int64 }

func (r fakeRun) ID() string                   { return "r1" }
func (r fakeRun) Charge(int64, float64, int64) {}
func (r fakeRun) Usage() (int64, float64, int64, time.Duration) {
	return r.tokens, 0, 0, 2 * time.Second
}

func TestCheckAndOverAfter(t *testing.T) {
	stored := map[string][]byte{"a": []byte(`{"limit":{"tokens":10},"run_limit":{"tokens":4},"used":{"tokens":6}}`)}
	l, p := testLedger(t, stored, nil)
	if used, qerr := l.Check("a", p, nil, proto.Budget{Tokens: 4}); qerr != nil || used.Tokens != 6 {
		t.Fatal(used, qerr)
	}
	if _, qerr := l.Check("a", p, nil, proto.Budget{Tokens: 5}); qerr == nil || qerr.Code != proto.EDQUOT || !strings.Contains(qerr.Message, `agent "a" is over its budget: tokens: 6 used + 5 asked of 10 (ox-budget show -a a)`) {
		t.Fatal(qerr)
	}
	if _, qerr := l.Check("a", p, fakeRun{3}, proto.Budget{Tokens: 2}); qerr == nil || !strings.Contains(qerr.Message, "run r1 is over its budget: tokens: 3 used + 2 asked of 4") {
		t.Fatal(qerr)
	}
	if qerr := l.OverAfter("a", p, fakeRun{0}, proto.Budget{Tokens: 4}); qerr != nil {
		t.Fatal(qerr)
	}
	if qerr := l.OverAfter("a", p, nil, proto.Budget{Tokens: 5}); qerr == nil || !strings.Contains(qerr.Message, "tokens: 11 used of 10") {
		t.Fatal(qerr)
	}
	rec := l.Record("a", p, fakeRun{3})
	if rec.Run != "r1" || rec.RunUsed == nil || rec.RunUsed.Tokens != 3 || rec.RunUsed.Wall != 2 || !strings.HasPrefix(rec.Text, "a: 6 tokens, cost 0, 0s wall, 0 execs used") {
		t.Fatalf("%+v", rec)
	}
	if rec := l.Record("a", p, nil); rec.Run != "" || rec.RunUsed != nil {
		t.Fatalf("%+v", rec)
	}
}

func TestSpawnCheckAndModelCall(t *testing.T) {
	stored := map[string][]byte{
		"a":    []byte(`{"limit":{"tokens":10},"run_limit":{"tokens":4},"used":{"tokens":9}}`),
		"full": []byte(`{"limit":{"tokens":10},"used":{"tokens":10}}`),
	}
	l, p := testLedger(t, stored, nil)
	if run, qerr := l.SpawnCheck("a", p); qerr != nil || run.Tokens != 4 {
		t.Fatal(run, qerr)
	}
	// A limit reached refuses a new run: it could spend nothing.
	if _, qerr := l.SpawnCheck("full", p); qerr == nil || qerr.Code != proto.EDQUOT || !strings.Contains(qerr.Message, `agent "full" is over its budget: tokens: 10 used of 10`) {
		t.Fatal(qerr)
	}
	if d, perr := ModelCall(proto.BudgetChargeArgs{PromptTokens: 1000, CompletionTokens: 500}, 3, 15); perr != nil || d != Price(1000, 500, 3, 15) {
		t.Fatal(d, perr)
	}
	for _, a := range []proto.BudgetChargeArgs{{PromptTokens: -1}, {CompletionTokens: -1}} {
		if _, perr := ModelCall(a, 3, 15); perr == nil || perr.Code != proto.EINVAL {
			t.Errorf("%+v: %v", a, perr)
		}
	}
}

func TestPriceAndChanges(t *testing.T) {
	if d := Price(1000, 500, 3, 15); d.Tokens != 1500 || d.Cost != (1000*3.0+500*15.0)/1e6 {
		t.Fatal(d)
	}
	if _, qerr := SetLimits(&proto.Budget{Tokens: -1}, nil); qerr == nil || qerr.Code != proto.EINVAL {
		t.Fatal(qerr)
	}
	set, qerr := SetLimits(nil, &proto.Budget{Execs: 3})
	if qerr != nil {
		t.Fatal(qerr)
	}
	f := File{Limit: &proto.Budget{Tokens: 9}, Used: proto.Budget{Tokens: 2}}
	set(&f)
	if f.Limit.Tokens != 9 || f.RunLimit == nil || f.RunLimit.Execs != 3 {
		t.Fatalf("%+v", f)
	}
	Reset(&f)
	if f.Used != (proto.Budget{}) || f.Since.IsZero() || f.Limit.Tokens != 9 {
		t.Fatalf("%+v", f)
	}
}
