package integration

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/kernel"
)

// noAgentArgs are args for each op that reads an agent or acts for one,
// naming agent. Every served op of the table that does not create an
// agent must have a line here, so a new one is tried as soon as it is
// declared.
var noAgentArgs = map[string]func(agent string) any{
	"hello":         func(string) any { return map[string]any{"proto": 1} },
	"status":        func(string) any { return nil },
	"agent.list":    func(string) any { return nil },
	"agent.show":    func(a string) any { return map[string]any{"agent": a} },
	"agent.remove":  func(a string) any { return map[string]any{"agent": a} },
	"agent.diff":    func(a string) any { return map[string]any{"agent": a} },
	"audit.log":     func(a string) any { return map[string]any{"agent": a} },
	"audit.show":    func(string) any { return map[string]any{"seq": 1} },
	"audit.head":    func(string) any { return nil },
	"audit.verify":  func(string) any { return nil },
	"audit.export":  func(string) any { return nil },
	"state.load":    func(a string) any { return map[string]any{"agent": a, "key": "k"} },
	"state.list":    func(a string) any { return map[string]any{"agent": a} },
	"mem.recall":    func(a string) any { return map[string]any{"agent": a, "query": "x"} },
	"mem.list":      func(a string) any { return map[string]any{"agent": a} },
	"mem.forget":    func(a string) any { return map[string]any{"agent": a, "ids": []string{"m1"}} },
	"version.log":   func(a string) any { return map[string]any{"agent": a} },
	"version.show":  func(a string) any { return map[string]any{"agent": a, "rev": "HEAD"} },
	"version.diff":  func(a string) any { return map[string]any{"agent": a, "from": "HEAD"} },
	"policy.show":   func(a string) any { return map[string]any{"agent": a} },
	"policy.check":  func(a string) any { return map[string]any{"agent": a, "op": "exec", "args": []string{"true"}} },
	"policy.test":   func(a string) any { return map[string]any{"agent": a, "policy": "", "entries": []string{}} },
	"resources":     func(a string) any { return map[string]any{"agent": a} },
	"run.attach":    func(string) any { return map[string]any{"run": "rnosuchrun"} },
	"run.wait":      func(string) any { return map[string]any{"runs": []string{"rnosuchrun"}} },
	"run.ps":        func(a string) any { return map[string]any{"agent": a} },
	"exec":          func(a string) any { return map[string]any{"agent": a, "argv": []string{"true"}} },
	"net.fetch":     func(a string) any { return map[string]any{"agent": a, "url": "http://127.0.0.1:1/"} },
	"tool.run":      func(a string) any { return map[string]any{"agent": a, "tool": "echo"} },
	"tool.list":     func(a string) any { return map[string]any{"agent": a} },
	"budget.show":   func(a string) any { return map[string]any{"agent": a} },
	"budget.check":  func(a string) any { return map[string]any{"agent": a, "tokens": 1} },
	"schedule.list": func(a string) any { return map[string]any{"agent": a} },
	"llm.gate":      func(a string) any { return map[string]any{"agent": a, "endpoint": "http://127.0.0.1:1/v1"} },
	"llm.chat": func(a string) any {
		return map[string]any{"agent": a, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	},
	"mcp.servers": func(a string) any { return map[string]any{"agent": a} },
	"mcp.call":    func(a string) any { return map[string]any{"agent": a, "server": "s", "tool": "t"} },
	"mcp.result": func(a string) any {
		return map[string]any{"agent": a, "server": "s", "tool": "t", "call": 1, "digest": "d"}
	},
	"msg.list":      func(a string) any { return map[string]any{"agent": a} },
	"approve.list":  func(a string) any { return map[string]any{"agent": a} },
	"fleet.status":  func(string) any { return nil },
	"fleet.witness": func(string) any { return nil },
	"fleet.call": func(a string) any {
		return map[string]any{"node": "elsewhere", "op": "run.ps", "args": map[string]any{"agent": a}}
	},
	"work.list":        func(a string) any { return map[string]any{"agent": a} },
	"work.diff":        func(string) any { return map[string]any{"run": "rnosuchrun"} },
	"work.view":        func(string) any { return map[string]any{"run": "rnosuchrun"} },
	"run.receipt":      func(string) any { return map[string]any{"run": "rnosuchrun"} },
	"events.subscribe": nil, // follows until the client closes: it waits for an agent, creates none
	"msg.recv":         nil, // waits for a message to the agent, like events.subscribe
}

// TestNoReadCreatesAgent calls every op that is not a write (a read, an
// exec, a tool, a fetch) with the name of an agent that does not exist:
// none may bring it into being, and each op the table declares Existing
// answers ENOENT naming the agent and the command that creates one.
func TestNoReadCreatesAgent(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	rc := d.raw(t)
	agents := func() map[string]bool {
		code, items := rc.call("agent.list", nil)
		if code != "" {
			t.Fatalf("agent.list: %s", code)
		}
		out := map[string]bool{}
		for _, it := range items {
			var r struct {
				Agent string `json:"agent"`
			}
			json.Unmarshal(it, &r)
			out[r.Agent] = true
		}
		return out
	}
	// One agent exists, so that a check that lists nothing cannot pass.
	if code, _ := rc.call("state.save", map[string]string{"agent": "seed", "key": "k", "value": "v"}); code != "" {
		t.Fatalf("seed: %s", code)
	}
	if !agents()["seed"] {
		t.Fatal("agent.list does not list the agent a save created")
	}
	all := kernel.Syscalls()
	sort.Slice(all, func(i, j int) bool { return all[i].Op < all[j].Op })
	tried := 0
	for _, sc := range all {
		if sc.Recorded || (sc.Mutates && !sc.Existing) {
			continue // recorded by the kernel only, or a write that creates
		}
		mk, ok := noAgentArgs[sc.Op]
		if !ok {
			// A new op is tried with its definition's example call,
			// naming the fresh agent, when that example names an agent
			// and nothing else that must exist first ($RUN...).
			if mk = exampleArgs(sc.Op); mk == nil {
				t.Errorf("%s: its definition's example names no agent (or an object that must exist): add a line for it to noAgentArgs", sc.Op)
				continue
			}
		}
		if mk == nil {
			continue
		}
		agent := "fresh-" + strings.ReplaceAll(sc.Op, ".", "-")
		code, msg := rc.callMsg(sc.Op, mk(agent))
		tried++
		if sc.Existing {
			if code != "ENOENT" || !strings.Contains(msg, `no agent "`+agent+`"`) || !strings.Contains(msg, "ox-spawn -a "+agent) {
				t.Errorf("%s of a missing agent: %s %q, want ENOENT naming it and how one is created", sc.Op, code, msg)
			}
		}
		if agents()[agent] {
			t.Errorf("%s created agent %s (answer %s %q)", sc.Op, agent, code, msg)
		}
	}
	if tried < 30 {
		t.Errorf("tried only %d ops", tried)
	}

	// The command line says the same, and the agent stays absent.
	r := d.ox("", "ox-exec", "-a", "nosuch", "true")
	if r.code == 0 || !strings.Contains(r.stderr, `no agent "nosuch"`) || !strings.Contains(r.stderr, "ox-spawn -a nosuch") {
		t.Errorf("ox-exec -a nosuch true: exit %d, stderr %q", r.code, r.stderr)
	}
	if agents()["nosuch"] {
		t.Error("ox-exec created agent nosuch")
	}
	// Once the agent exists, exec runs for it.
	if code, _ := rc.call("state.save", map[string]string{"agent": "nosuch", "key": "k", "value": "v"}); code != "" {
		t.Fatalf("save: %s", code)
	}
	if code, msg := rc.callMsg("exec", map[string]any{"agent": "nosuch", "argv": []string{"true"}}); code == "ENOENT" {
		t.Errorf("exec of an agent that exists: %s %q", code, msg)
	}
}

// callMsg is call that also returns the error's message.
func (rc *rawConn) callMsg(op string, args any) (code, msg string) {
	rc.t.Helper()
	b, err := json.Marshal(map[string]any{"id": 1, "op": op, "args": args})
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.send(string(b))
	for {
		r := rc.reply()
		if r.Item != nil {
			continue
		}
		if !r.OK && r.Error != nil {
			return r.Error.Code, r.Error.Message
		}
		return "", ""
	}
}

// createAgent brings agent into being with a key (an exec, a tool call or
// a fetch for an agent that does not exist is ENOENT).
func createAgent(t *testing.T, d *daemon, agent string) {
	t.Helper()
	if r := d.ox("", "ox-state", "save", "-a", agent, "created", "by the test"); r.code != 0 {
		t.Fatalf("creating agent %s: exit %d %s", agent, r.code, r.stderr)
	}
}

// exampleArgs are the args of op's definition's example with its agent
// replaced; nil when the example names no agent, or names an object
// ($RUN, $JOB...) a fresh agent has none of.
func exampleArgs(op string) func(agent string) any {
	d := kernel.DefOf(op)
	if d == nil {
		return nil
	}
	ex, _ := d.Sample()
	var m map[string]any
	if json.Unmarshal([]byte(ex), &m) != nil || m["agent"] == nil || strings.Contains(ex, "$") {
		return nil
	}
	return func(agent string) any {
		c := make(map[string]any, len(m))
		for k, v := range m {
			c[k] = v
		}
		c["agent"] = agent
		return c
	}
}
