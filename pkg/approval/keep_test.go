package approval

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

func TestKeeperResolvesWhatACrashLeft(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	g := New(0)
	if _, left, err := Keep(g, dir, log); err != nil || len(left) != 0 {
		t.Fatalf("%v %v", left, err)
	}
	r := g.Ask(Request{Agent: "a", Op: "exec", What: "rm", Rule: "r", Why: "w", Default: Denied}, time.Hour)
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); err != nil {
		t.Fatalf("pending request not on disk: %v", err)
	}
	if rec := Record(r); rec.State != Pending || rec.Text == "" {
		t.Errorf("record: %+v", rec)
	}
	// A new daemon: the request is resolved into its default.
	g2 := New(0)
	kp, left, err := Keep(g2, dir, log)
	if err != nil || len(left) != 1 || left[0].State != Denied || left[0].DecidedBy != "oxiosd restart" {
		t.Fatalf("left: %+v %v", left, err)
	}
	kp.Write(left[0])
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("decided request's file stays: %v", err)
	}
}

func TestTargetAndRefusal(t *testing.T) {
	r := Request{ID: "a7", Agent: "ops", Why: "exec needs an operator", Rule: "ask.exec", State: Cancelled}
	if got := r.Target(); got != "ops:a7 cancelled by oxiosd" {
		t.Fatal(got)
	}
	r.State, r.DecidedBy, r.Reason = Denied, "uid=0 (root)", "not now"
	if got := r.Target(); got != "ops:a7 denied by uid=0 (root)" {
		t.Fatal(got)
	}
	if got := r.DecideTarget(); got != "ops:a7 denied by uid=0 (root): not now" {
		t.Fatal(got)
	}
	r.Reason = strings.Repeat("x", 300)
	if got := r.DecideTarget(); got != "ops:a7 denied by uid=0 (root): "+strings.Repeat("x", 200)+"..." {
		t.Fatal(got)
	}
	r.Reason = "not now"
	r.Op, r.What = "exec", "rm -rf x"
	if got := r.AskTarget(); got != "ops:a7 exec rm -rf x [ask.exec]" {
		t.Fatal(got)
	}
	err := r.Refusal()
	if err.Code != proto.EPERM || err.Message != "ops: exec needs an operator was not approved (denied by uid=0 (root): not now; approval a7, policy rule ask.exec)" {
		t.Fatalf("%+v", err)
	}
}

func TestFromAsk(t *testing.T) {
	p, err := policy.Parse([]byte("[ask]\nexec = [\"rm\"]\ntimeout = \"1m\"\ndefault = \"allow\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := &policy.Asked{Rule: "ask.exec", Reason: "running rm"}
	// A long command is kept whole for the operator (what follows a cut
	// would be approved unseen); the audit target clips it.
	long := "rm " + strings.Repeat("x", 600) + " /etc"
	r, timeout := FromAsk("ops", "r1", "exec", long, p, a)
	if timeout != time.Minute || r.Default != Approved || r.Agent != "ops" || r.Run != "r1" || r.Op != "exec" || r.Rule != "ask.exec" || r.Why != "running rm" || r.What != long {
		t.Fatalf("%v %+v", timeout, r)
	}
	r.State = Pending
	if got := Record(r).Text; !strings.Contains(got, " exec "+long+" (ask.exec: running rm)") {
		t.Fatalf("the pending text does not show the whole command: %s", got)
	}
	if got := r.AskTarget(); len(got) > audit.MaxTarget+100 || !strings.Contains(got, "...") {
		t.Fatalf("ask target not clipped: %d bytes", len(got))
	}
	// What a terminal would show as other text is quoted.
	for _, what := range []string{"GET https://x/\u202egnp.exe", "key\x1b[2K", "a\u200bb", "bad\xff"} {
		r, _ := FromAsk("ops", "", "net.fetch", what, p, a)
		if !strings.HasPrefix(r.What, `"`) || strings.ContainsAny(r.What, "\u202e\x1b\u200b") {
			t.Errorf("%q shown as %q", what, r.What)
		}
	}
	p, _ = policy.Parse(nil)
	if r, timeout := FromAsk("ops", "", "exec", "rm", p, a); r.Default != Denied || timeout != policy.DefaultAskTimeout || r.What != "rm" {
		t.Fatalf("%v %+v", timeout, r)
	}
}

// A request whose what is longer than MaxWhat is denied at once by
// oxiosd, never shown cut to an operator.
func TestTooLongToShowIsDenied(t *testing.T) {
	p, err := policy.Parse([]byte("[ask]\nexec = [\"rm\"]\ndefault = \"allow\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	g := New(0)
	var seen []Request
	g.OnChange = func(r Request) { seen = append(seen, r) }
	what := "rm " + strings.Repeat("a", MaxWhat) + " /etc"
	req := g.Ask(FromAsk("ops", "r1", "exec", what, p, &policy.Asked{Rule: "ask.exec"}))
	got, err := g.Wait(context.Background(), req.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Denied || got.DecidedBy != ByDaemon || !got.Undecided() || !strings.Contains(got.Reason, "denied unseen") {
		t.Fatalf("%+v", got)
	}
	if len(got.What) > MaxWhat+3 || strings.Contains(got.What, "/etc") {
		t.Fatalf("kept %d bytes of what", len(got.What))
	}
	if len(seen) != 2 || seen[0].State != Pending || seen[1].State != Denied {
		t.Fatalf("changes: %+v", seen)
	}
	// Exactly MaxWhat is shown, and waits for an operator.
	what = "rm " + strings.Repeat("a", MaxWhat-3)
	req = g.Ask(FromAsk("ops", "r1", "exec", what, p, &policy.Asked{Rule: "ask.exec"}))
	if r, _ := g.Get(req.ID); r.State != Pending || r.What != what {
		t.Fatalf("%+v", r)
	}
}

// An agent has at most MaxPending requests waiting; one more is denied at
// once by oxiosd, and another agent's requests still wait.
func TestMaxPending(t *testing.T) {
	g := New(0)
	ask := func(agent string) Request {
		return g.Ask(Request{Agent: agent, Op: "exec", What: "ls", Rule: "ask.exec"}, time.Minute)
	}
	for i := range MaxPending {
		if r, _ := g.Get(ask("ops").ID); r.State != Pending {
			t.Fatalf("request %d: %+v", i, r)
		}
	}
	r, _ := g.Get(ask("ops").ID)
	if r.State != Denied || r.DecidedBy != ByDaemon || !r.Undecided() || !strings.Contains(r.Reason, "without asking") {
		t.Fatalf("one past MaxPending: %+v", r)
	}
	if r, _ := g.Get(ask("web").ID); r.State != Pending {
		t.Fatalf("another agent's request: %+v", r)
	}
	// Once one is decided, there is room again.
	first := g.List("ops", true)[0]
	if _, err := g.Decide(first.ID, false, "uid=0", "no"); err != nil {
		t.Fatal(err)
	}
	if r, _ := g.Get(ask("ops").ID); r.State != Pending {
		t.Fatalf("after a decision: %+v", r)
	}
}
