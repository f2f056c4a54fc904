package integration

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// LLM runs: the real ox-agent, started by a real oxiosd, against a test
// server speaking the OpenAI wire format.

// llmDaemon starts oxiosd with [llm] pointing at a scripted endpoint.
func llmDaemon(t *testing.T, extra string, turns ...llmtest.Turn) (*daemon, *llmtest.Server) {
	t.Helper()
	s := llmtest.New(turns...)
	t.Cleanup(s.Close)
	cfg := fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"test-model\"\ntimeout = \"5s\"\nretries = 4\nprompt_price = 1.0\ncompletion_price = 2.0\n%s", s.URL, extra)
	return startDaemon(t, daemonOpts{config: cfg}), s
}

func call(name, args string) llmtest.Call { return llmtest.Call{Name: name, Arguments: args} }

// toolResults returns the tool_result records by tool name, in order.
func toolResults(recs []map[string]any, name string) []map[string]any {
	var out []map[string]any
	for _, r := range ofType(recs, "tool_result") {
		if r["name"] == name {
			out = append(out, r)
		}
	}
	return out
}

func TestAgentToolLoop(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{ToolCalls: []llmtest.Call{
			call("state_write", `{"key":"notes/disk","value":"sda1 at 91%"}`),
			call("remember", `{"text":"sda1 on db-1 fills up with WAL files","kind":"semantic","tags":["disk"]}`),
		}, PromptTokens: 300, CompletionTokens: 40},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_read", `{"key":"notes/disk"}`), call("state_list", `{}`)}, PromptTokens: 400, CompletionTokens: 20},
		llmtest.Turn{Content: "The disk is nearly full.", ToolCalls: []llmtest.Call{call("finish", `{"summary":"sda1 is at 91%, WAL files"}`)}, PromptTokens: 500, CompletionTokens: 30},
	)
	r := d.ox("", "ox-spawn", "-a", "ops", "check", "the", "disk")
	if r.code != 0 {
		t.Fatalf("ox-spawn: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	if recs[0]["type"] != "run" || recs[0]["task"] != "check the disk" || recs[0]["model"] != "test-model" {
		t.Fatalf("first record %v", recs[0])
	}
	if ex := recs[len(recs)-1]; ex["type"] != "exit" || ex["status"] != 0.0 {
		t.Fatalf("last record %v", ex)
	}
	if n := len(ofType(recs, "tool_call")); n != 5 {
		t.Errorf("%d tool_call records, want 5", n)
	}
	var user []string
	for _, m := range ofType(recs, "message") {
		if m["role"] == "user" {
			user = append(user, m["text"].(string))
		}
		if m["run"] != recs[0]["id"] || m["agent"] != "ops" {
			t.Errorf("message record not stamped with its run: %v", m)
		}
	}
	if len(user) != 1 || user[0] != "check the disk" {
		t.Errorf("user messages %q", user)
	}
	if rr := toolResults(recs, "state_read"); len(rr) != 1 || rr[0]["text"] != "sda1 at 91%" {
		t.Errorf("state_read result %v", rr)
	}
	usage := ofType(recs, "usage")
	if len(usage) != 3 || usage[2]["run_tokens"] != 1290.0 {
		t.Fatalf("usage records %v", usage)
	}
	// Prices: 1 per million prompt tokens, 2 per million completion.
	if c := usage[2]["cost"].(float64); c < 0.001379 || c > 0.001381 {
		t.Errorf("run cost %v, want 0.00138", c)
	}
	// What the model saw: the tools, then each tool's result in the next
	// request.
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	var names []string
	for _, tl := range reqs[0].Body.Tools {
		names = append(names, tl.Function.Name)
	}
	if got := strings.Join(names, ","); got != "state_read,state_write,state_list,remember,recall,exec,fetch,finish,msg_send,msg_read,msg_wait" {
		t.Errorf("tools offered: %s", got)
	}
	if !reqs[0].Body.Stream || reqs[0].Body.Model != "test-model" {
		t.Errorf("request not streamed to the configured model: %+v", reqs[0].Body)
	}
	if txt := reqs[2].Text(); !strings.Contains(txt, "tool: sda1 at 91%") || !strings.Contains(txt, "notes/disk\t11 bytes") {
		t.Errorf("third request lacks the tool results:\n%s", txt)
	}
	// The effects are the kernel's: state, memories, budget, audit.
	if g := d.ox("", "ox-state", "load", "-a", "ops", "notes/disk"); g.stdout != "sda1 at 91%" {
		t.Errorf("ox-state get: %q %s", g.stdout, g.stderr)
	}
	rc := d.ox("", "ox-recall", "-a", "ops", "--kind", "semantic", "WAL")
	if !strings.Contains(rc.stdout, "fills up with WAL") || !strings.Contains(rc.stdout, `"source":"run:`) {
		t.Errorf("the remembered memory: %s %s", rc.stdout, rc.stderr)
	}
	ep := d.ox("", "ox-recall", "-a", "ops", "--kind", "episodic", "disk")
	if !strings.Contains(ep.stdout, "sda1 is at 91%, WAL files") || !strings.Contains(ep.stdout, "Task: check the disk") {
		t.Errorf("no episodic summary: %s %s", ep.stdout, ep.stderr)
	}
	b := d.ox("", "ox-budget", "show", "-a", "ops", "--json")
	if !strings.Contains(b.stdout, `"tokens":1290`) {
		t.Errorf("budget after the run: %s", b.stdout)
	}
	au := d.ox("", "ox-audit", "log", "--op", "state.save")
	if !strings.Contains(au.stdout, `"ops:notes/disk"`) {
		t.Errorf("the save is not on the audit log: %s %s", au.stdout, au.stderr)
	}
	// The conversation is on the audit log as the digest of the run's log.
	ex := d.ox("", "ox-audit", "log", "--op", "run.exit", "--json")
	log, err := os.ReadFile(filepath.Join(d.data, "runs", recs[0]["id"].(string)+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sum := blake3.Sum256(log)
	if !strings.Contains(ex.stdout, hex.EncodeToString(sum[:])) {
		t.Errorf("run.exit does not carry the digest of the run's log:\n%s", ex.stdout)
	}
	// A second run recalls what the first one learnt.
	s.Push(llmtest.Turn{Content: "Nothing new."})
	if r := d.ox("", "ox-spawn", "-a", "ops", "why is the disk full"); r.code != 0 {
		t.Fatalf("second run: %d %s", r.code, r.stderr)
	}
	reqs = s.Requests()
	if txt := reqs[len(reqs)-1].Text(); !strings.Contains(txt, "Memories of yours") || !strings.Contains(txt, "WAL files") {
		t.Errorf("the second run did not recall the first:\n%s", txt)
	}
}

func TestAgentSelfCorrects(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_write", `{"key":"../../etc/passwd","value":"x"}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("exec", `{"argv":["rm","-rf","/tmp/x"]}`), call("exec", `{"command":"echo hi; id"}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_write", `{"key":"etc/passwd","value":"x"}`), call("exec", `{"argv":["echo","fixed"]}`), call("no_such_tool", `{}`), call("recall", `not json`)}},
		llmtest.Turn{Content: "done"},
	)
	r := d.ox("", "ox-spawn", "-a", "ops", "--json", "write a note")
	if r.code != 0 {
		t.Fatalf("ox-spawn: %d %s %s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	w := toolResults(recs, "state_write")
	if len(w) != 2 || w[0]["error"] != true || w[0]["code"] != "EINVAL" || w[1]["error"] != nil {
		t.Fatalf("state_write results %v", w)
	}
	ex := toolResults(recs, "exec")
	if len(ex) != 3 || ex[0]["code"] != "EPERM" || ex[1]["code"] != "EPERM" || ex[2]["error"] != nil ||
		!strings.Contains(ex[2]["text"].(string), "fixed") {
		t.Fatalf("exec results %v", ex)
	}
	if u := toolResults(recs, "no_such_tool"); len(u) != 1 || !strings.Contains(u[0]["text"].(string), "no tool") {
		t.Errorf("unknown tool: %v", u)
	}
	if u := toolResults(recs, "recall"); len(u) != 1 || !strings.Contains(u[0]["text"].(string), "not the JSON object") {
		t.Errorf("bad arguments: %v", u)
	}
	// The model saw the errors, in the message answering each call.
	reqs := s.Requests()
	var tools []string
	for _, m := range reqs[1].Body.Messages {
		if m.Role == "tool" {
			tools = append(tools, m.Content)
		}
	}
	if len(tools) != 1 || !strings.HasPrefix(tools[0], "error: ") || !strings.Contains(tools[0], "EINVAL") {
		t.Errorf("the model was told %q", tools)
	}
	if g := d.ox("", "ox-state", "load", "-a", "ops", "etc/passwd"); g.stdout != "x" {
		t.Errorf("the corrected write: %q %s", g.stdout, g.stderr)
	}
	au := d.ox("", "ox-audit", "log", "--op", "exec")
	if !strings.Contains(au.stdout, "EPERM") || !strings.Contains(au.stdout, "echo fixed") {
		t.Errorf("execs not audited: %s", au.stdout)
	}
}

func TestAgentBudgetExhausted(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{Content: "what was paid for", ToolCalls: []llmtest.Call{call("state_list", `{}`)}, PromptTokens: 1900, CompletionTokens: 300},
		llmtest.Turn{Content: "never asked"},
	)
	if r := d.ox("", "ox-budget", "set", "-a", "ops", "--run-tokens", "2000"); r.code != 0 {
		t.Fatalf("ox-budget set: %d %s", r.code, r.stderr)
	}
	r := d.ox("", "ox-spawn", "-a", "ops", "spend")
	if r.code != 3 {
		t.Fatalf("over budget: exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	e := ofType(recs, "error")
	if len(e) != 1 || e[0]["code"] != "EDQUOT" || !strings.Contains(e[0]["text"].(string), "budget") {
		t.Fatalf("error records %v", e)
	}
	// What was spent, not "0 used + 2200 asked".
	if txt := e[0]["text"].(string); !strings.Contains(txt, "this call used 2200 tokens") || !strings.Contains(txt, "tokens: 2200 used of 2000") || strings.Contains(txt, "asked") {
		t.Errorf("error text %q", txt)
	}
	// The answer was paid for: it is on the record.
	shown := false
	for _, m := range ofType(recs, "message") {
		shown = shown || m["role"] == "assistant" && m["text"] == "what was paid for"
	}
	if !shown {
		t.Errorf("the paid answer is not shown")
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d model calls, want 1 (the run ends when a charge passes the budget)", n)
	}
	if mt := s.Requests()[0].Body.MaxTokens; mt <= 0 || mt >= 2000 {
		t.Errorf("max_tokens %d: want the run's budget left after the prompt", mt)
	}
	// The kernel charged the call (llm.chat), and audited it with the
	// tokens, the model and the answer's digest.
	au := d.ox("", "ox-audit", "log", "--op", "llm.chat")
	if !strings.Contains(au.stdout, "EDQUOT") || !strings.Contains(au.stdout, "1900+300 tokens") || !strings.Contains(au.stdout, "answer ") {
		t.Errorf("the refused charge is not audited: %s", au.stdout)
	}
	// The agent's total: a budget of 2500 tokens for the agent refuses the
	// next run's first call at its check, before the endpoint is asked.
	d.ox("", "ox-budget", "set", "-a", "ops", "--tokens", "2500", "--run-tokens", "0")
	n := len(s.Requests())
	r = d.ox("", "ox-spawn", "-a", "ops", "spend more")
	if r.code != 3 || !strings.Contains(r.stdout, `"code":"EDQUOT"`) {
		t.Fatalf("second run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if len(s.Requests()) != n {
		t.Errorf("the endpoint was asked although the check refused")
	}
}

func TestAgentCircuitBreaker(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Status: 500, Error: "upstream exploded", Repeat: -1})
	start := time.Now()
	r := d.ox("", "ox-spawn", "-a", "ops", "anything")
	if r.code != 4 {
		t.Fatalf("exit %d, want 4 (the endpoint failed)\n%s%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	var events []string
	for _, e := range ofType(recs, "endpoint") {
		events = append(events, e["event"].(string))
	}
	got := strings.Join(events, ",")
	// Three failures open the circuit; each later attempt waits for the
	// cooldown and goes as a half-open probe, which fails and re-opens it.
	if !strings.HasPrefix(got, "retry,retry,open,retry,half-open,open,retry,half-open,open") {
		t.Errorf("endpoint records: %s", got)
	}
	e := ofType(recs, "error")
	if len(e) != 1 || e[0]["code"] != "EHOSTDOWN" || !strings.Contains(e[0]["text"].(string), "circuit open") ||
		!strings.Contains(e[0]["text"].(string), "upstream exploded") {
		t.Fatalf("error record %v", e)
	}
	// 1 try + 4 retries, and none while the circuit was open.
	if n := len(s.Requests()); n != 5 {
		t.Errorf("%d requests reached the endpoint, want 5", n)
	}
	t.Logf("gave up after %v", time.Since(start).Round(time.Millisecond))
}

func TestAgentSignals(t *testing.T) {
	t.Parallel()
	slow := llmtest.Turn{Content: "late", Delay: llmtest.Duration(time.Minute)}
	d, s := llmDaemon(t, "", slow, slow, slow)
	spawn := func() string {
		n := s.Started()
		r := d.ox("", "ox-spawn", "-a", "ops", "-d", "think hard")
		var rec struct{ ID string }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rec) != nil {
			t.Fatalf("ox-spawn -d: %d %s %s", r.code, r.stdout, r.stderr)
		}
		// In the model call (the usage record comes after it).
		waitFor(t, "the run to ask the model", func() bool { return s.Started() > n })
		return rec.ID
	}
	pidOf := func(id string) int {
		for _, m := range records(t, d.ox("", "ox-ps", "--json").stdout) {
			if m["id"] == id {
				return int(m["pid"].(float64))
			}
		}
		t.Fatalf("run %s not listed", id)
		return 0
	}
	id := spawn()
	pid := pidOf(id)
	d.ox("", "ox-kill", "-s", "STOP", id)
	waitFor(t, "the LLM run to stop", func() bool { return procState(pid) == 'T' })
	d.ox("", "ox-kill", "-s", "CONT", id)
	waitFor(t, "the LLM run to resume", func() bool { return procState(pid) != 'T' })
	d.ox("", "ox-kill", "-s", "TERM", id)
	w := d.ox("", "ox-wait", id)
	if w.code != 143 {
		t.Fatalf("ox-wait after TERM: %d %s", w.code, w.stdout)
	}
	a := d.ox("", "ox-attach", "--json", id)
	if !strings.Contains(a.stdout, `"code":"ECANCELED"`) || !strings.Contains(a.stdout, "signal terminated") {
		t.Errorf("no cancelled record after TERM:\n%s", a.stdout)
	}
	// INT is the same, KILL gives no chance to say anything.
	id = spawn()
	d.ox("", "ox-kill", "-s", "INT", id)
	if w := d.ox("", "ox-wait", id); w.code != 130 {
		t.Fatalf("ox-wait after INT: %d %s", w.code, w.stdout)
	}
	id = spawn()
	d.ox("", "ox-kill", "-s", "KILL", id)
	if w := d.ox("", "ox-wait", id); w.code != 137 {
		t.Fatalf("ox-wait after KILL: %d %s", w.code, w.stdout)
	}
	if z := zombies(d.cmd.Process.Pid); len(z) > 0 {
		t.Errorf("zombies: %v", z)
	}
}

func TestAgentRecallPipeline(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: "The nginx log rotation failed; the disk filled."})
	d.ox("disk full on /var after nginx log rotation failed\ncertificate renewed for example.org\n", "ox-remember", "-a", "ops", "--kind", "episodic")
	cmd := exec.Command("sh", "-c", fmt.Sprintf("%s -a ops disk full | %s -a ops 'what failed?'", bin("ox-recall"), bin("ox-spawn")))
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pipeline: %v\n%s", err, out)
	}
	recs := records(t, string(out))
	if m := ofType(recs, "message"); len(m) == 0 || m[len(m)-1]["text"] != "The nginx log rotation failed; the disk filled." {
		t.Fatalf("messages %v", m)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	var ctxMsg, task string
	for _, m := range reqs[0].Body.Messages {
		if m.Role == "user" && strings.HasPrefix(m.Content, "Context handed to this run:") {
			ctxMsg = m.Content
		}
		if m.Role == "user" {
			task = m.Content
		}
	}
	if !strings.Contains(ctxMsg, "- memory (episodic") || !strings.Contains(ctxMsg, "disk full on /var after nginx log rotation failed") {
		t.Errorf("the recalled records did not reach the model as context:\n%s", reqs[0].Text())
	}
	if task != "what failed?" {
		t.Errorf("last user message %q", task)
	}
}

func TestAgentRunSurvivesClient(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{Content: "thinking", ToolCalls: []llmtest.Call{call("state_write", `{"key":"k","value":"v1"}`)}, Delay: llmtest.Duration(1500 * time.Millisecond)},
		llmtest.Turn{Content: "done"})
	cmd := exec.Command(bin("ox-spawn"), "-a", "ops", "slow task")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the model call", func() bool { return s.Started() > 0 })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitFor(t, "the run to finish without its client", func() bool {
		return d.ox("", "ox-state", "load", "-a", "ops", "k").stdout == "v1" && len(s.Requests()) == 2
	})
	waitFor(t, "the run to exit 0", func() bool {
		return strings.Contains(d.ox("", "ox-ps", "-a", "ops", "--all", "--json").stdout, `"status":0`)
	})
}
