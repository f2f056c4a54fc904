package serve

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// The two policies of the table: one that allows what each op's call in
// gatedArgs asks, and one that allows none of it.
const (
	permissive = `[state]
read = ["**"]
write = ["**"]
[memory]
kinds = ["working", "episodic", "semantic"]
[exec]
allow = ["true", "sleep"]
[tools]
allow = ["t"]
[net]
allow = ["127.0.0.1"]
[msg]
send = ["*"]
accept = ["*"]
[[mcp.servers]]
name = "s"
command = ["true"]
allow = ["t"]
`
	narrow = `[state]
read = []
write = []
[memory]
kinds = []
[exec]
allow = []
[tools]
allow = []
[net]
allow = []
[msg]
send = ["*"]
accept = []
[llm]
models = []
`
)

// objectAgent are the ops whose agent is that of what they name (the
// fixture's run, job, approval, or the sender of a message): ops.
var objectAgent = map[string]bool{
	proto.OpRunAttach: true, proto.OpRunWait: true, proto.OpRunKill: true, proto.OpRunStdin: true,
	proto.OpScheduleRm: true, proto.OpScheduleRun: true, proto.OpScheduleEnable: true,
	proto.OpApproveDecide: true, proto.OpMsgSend: true,
	proto.OpWorkDiff: true, proto.OpWorkView: true, proto.OpWorkApply: true, proto.OpWorkDiscard: true, proto.OpRunReceipt: true,
}

// isRefusal reports whether code is a refusal's (oxios(7), ERRORS).
func isRefusal(code string) bool { return code == proto.EPERM || code == proto.EACCES }

// TestEveryCallAgrees is the table of the gate: every served op, called
// by the admin, a run of the agent itself, a run of another agent, a user
// granted the agent and a user not granted it, under a permissive and a
// narrow policy, and one whose hooks refuse everything. For every row the real call's verdict is the dry run's
// (kernel.Verdict; for a run of the agent, ox-policy check's too), a
// refusal is audited under the op called with the code the caller got,
// and nothing is refused under another op.
func TestEveryCallAgrees(t *testing.T) {
	// A third policy: the permissive one, with a hook for every class of
	// question that refuses whatever it is asked, so that every call the
	// rules allow is put to its hook, as its dry run is.
	hooks := t.TempDir()
	refuse := filepath.Join(hooks, "refuse")
	if err := os.WriteFile(refuse, []byte("#!/bin/sh\ncat >/dev/null; echo not today; exit 77\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hooked := permissive + "[sandbox]\nread_only = [\"" + hooks + "\"]\n[hooks]\n"
	for _, class := range []string{"state", "memory", "exec", "tools", "net", "mcp", "msg"} {
		hooked += class + " = [\"" + refuse + "\"]\n"
	}
	for _, pol := range []struct{ name, text string }{{"permissive", permissive}, {"narrow", narrow}, {"hooked", hooked}} {
		t.Run(pol.name, func(t *testing.T) {
			rules := agreeTable(t, pol.text)
			if pol.name == "narrow" && rules["llm.models"] == 0 {
				t.Errorf("no call was refused by llm.models (refusals by rule: %v)", rules)
			}
			if pol.name != "hooked" {
				return
			}
			for _, class := range []string{"state", "memory", "exec", "tools", "net", "mcp", "msg"} {
				if rules["hooks."+class] == 0 {
					t.Errorf("no call was refused by hooks.%s (refusals by rule: %v)", class, rules)
				}
			}
		})
	}
}

// agreeTable runs the table under policy text, and returns how many
// rows the dry run refused by each rule.
func agreeTable(t *testing.T, text string) map[string]int {
	rules := map[string]int{}
	k, run, pending, asked := gatedFixture(t)
	ctx := context.Background()
	admin := &kernel.Cred{Admin: true}
	set := func() {
		t.Helper()
		if _, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: "ops", Text: text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	set()
	callers := []struct {
		name string
		c    *kernel.Cred
	}{
		{"another agent's run", &kernel.Cred{UID: 1000, PID: 11, Agent: "other", Run: "r-other"}},
		{"ungranted user", &kernel.Cred{UID: 4343, PID: 12, Grants: []string{"team-*"}}},
		{"granted user", &kernel.Cred{UID: 4242, PID: 13, Grants: []string{"ops"}}},
		{"the agent's run", &kernel.Cred{UID: 1000, PID: 14, Agent: "ops", Run: run}},
		{"admin", admin},
	}

	// The audit, as the admin's event stream: each row ends with a save
	// of the admin's to agent zz, waited for, and the events before it
	// are the row's.
	evs := make(chan proto.EventRecord, 4096)
	follow, stop := context.WithCancel(ctx)
	defer stop()
	go k.Events(follow, admin, proto.EventsArgs{}, nil, func(rec any) error {
		var e proto.EventRecord
		if b, ok := rec.(json.RawMessage); ok && json.Unmarshal(b, &e) == nil && e.Type == "event" {
			evs <- e
		}
		return nil
	}, func() error { return nil })
	n := 0
	var started bool
	var rowEvents func(row string) []proto.EventRecord
	rowEvents = func(row string) []proto.EventRecord {
		t.Helper()
		n++
		key := "sync" + strconv.Itoa(n)
		if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "zz", Key: key, Value: "v"}, nil); err != nil {
			t.Fatal(err)
		}
		var got []proto.EventRecord
		wait := 30 * time.Second
		if !started { // the stream may not be live yet: a sync it missed is done again
			wait = time.Second
		}
		deadline := time.After(wait)
		for {
			select {
			case e := <-evs:
				if e.Op == proto.OpStateSave && e.Agent == "zz" {
					if e.Key == key {
						return got
					}
					continue // a sync done again
				}
				got = append(got, e)
			case <-deadline:
				if !started && n < 30 {
					return rowEvents(row)
				}
				t.Fatalf("%s: the event of the sync save did not come (%d events: %v)", row, len(got), got)
			}
		}
	}
	rowEvents("the start") // the stream is live once a sync is seen
	started = true

	args := gatedArgs(run, pending)
	args[proto.OpPolicySet] = `{"agent":"ops","text":` + jsonString(text) + `}`
	var ops []string
	for _, sc := range kernel.Syscalls() {
		if _, ok := Lookup(sc.Op); ok {
			ops = append(ops, sc.Op)
		}
	}
	slices.Sort(ops)
	// What removes the fixture goes last: what follows would not find
	// it.
	last := []string{proto.OpScheduleRm, proto.OpRunKill, proto.OpAgentRemove}
	ops = slices.DeleteFunc(ops, func(op string) bool { return slices.Contains(last, op) })
	ops = append(ops, last...)
	// A forget that names an id that could be (and is not) a memory's.
	args[proto.OpMemForget] = `{"agent":"ops","ids":["01M97FQK4F7ESPFP0P5CWNVVAP"]}`
	done, cancel := context.WithCancel(ctx)
	cancel()
	rows := 0
	for _, op := range ops {
		h, _ := Lookup(op)
		var named struct {
			Agent string `json:"agent"`
		}
		if err := json.Unmarshal([]byte(args[op]), &named); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		agent := named.Agent
		if agent == "" && objectAgent[op] {
			agent = "ops"
		}
		for _, who := range callers {
			row := op + " by " + who.name
			want, rule, err := k.Verdict(who.c, agent, op, dryArgs(op))
			if err != nil {
				t.Errorf("%s: the dry run: %v", row, err)
				continue
			}
			if who.c.Agent == "ops" && agent == "ops" {
				rec, err := k.PolicyCheck(ctx, admin, proto.PolicyCheckArgs{Agent: "ops", Op: op, Args: dryArgs(op)}, nil)
				if err != nil {
					t.Errorf("%s: ox-policy check: %v", row, err)
				} else if allowed := want == "" && !rec.Ask; rec.Allowed != allowed && !rec.Ask {
					t.Errorf("%s: ox-policy check says allowed=%v (%s), the dry run %q %s", row, rec.Allowed, rec.Text, want, rule)
				}
			}
			_, rerr := h.Serve(k, ctx, who.c, &Request{Op: op, Args: json.RawMessage(args[op]), Out: discard{done}})
			got := ""
			var pe *proto.Error
			if errors.As(rerr, &pe) {
				got = pe.Code
			}
			entries := rowEvents(row)
			rows++
			if want != "" {
				rules[rule]++
			}
			if want != "" && got != want {
				t.Errorf("%s: the dry run refuses it (%s, %s), the call answers %q: %v", row, want, rule, got, rerr)
			}
			if want == "" && isRefusal(got) {
				t.Errorf("%s: the dry run allows it, the call is refused: %v", row, rerr)
			}
			// The audit says what the caller got, under the op called:
			// a refusal has its entry; a call that passed has none that
			// says otherwise.
			result := got
			if rerr == nil {
				result = "ok"
			}
			audited := false
			for _, e := range entries {
				if isRefusal(e.Result) && e.Op != op {
					t.Errorf("%s: a refusal audited under %s (%s)", row, e.Op, e.Result)
				}
				if e.Op != op {
					continue
				}
				if e.Result == result {
					audited = true
				} else if rerr == nil || isRefusal(e.Result) {
					t.Errorf("%s: the call answers %q, its audit entry %q", row, result, e.Result)
				}
			}
			if isRefusal(got) && !audited {
				t.Errorf("%s: refused with %s, and no audit entry says so (entries %v)", row, got, entries)
			}
		}
		if op == proto.OpPolicySet || op == proto.OpBudgetSet {
			set()
			rowEvents(op + ": the policy set again")
		}
		if op == proto.OpApproveDecide {
			// The exec it approved (or refused) ends, audited, before
			// the next row, whose audit it is not.
			select {
			case <-asked:
			case <-time.After(30 * time.Second):
				t.Fatal("the exec held for approval did not end once decided")
			}
			rowEvents(op + ": the exec it decided")
		}
	}
	if rows < 5*50 {
		t.Fatalf("only %d rows: the table is broken", rows)
	}
	return rules
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
