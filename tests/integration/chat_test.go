package integration

import (
	"encoding/json"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// TestAgentChat: ox-spawn -i is one LLM run that answers message after
// message in one conversation, each a line of stdin (or several between
// !multi and !end), each answer a model call through the kernel (llm.chat)
// charged to the run, until exit; off a terminal it prints the same
// records as any run, with a turn record each time it waits. Each message
// is a run.stdin on the audit log, the conversation is kept after every
// answer, and a later -c continues it.
func TestAgentChat(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{Content: "Hello, what shall we check?", PromptTokens: 100, CompletionTokens: 10},
		llmtest.Turn{Content: "sda1 is at 91%.", PromptTokens: 150, CompletionTokens: 10},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_write", `{"key":"notes/plan","value":"rotate WAL"}`)}, PromptTokens: 200, CompletionTokens: 10},
		llmtest.Turn{Content: "Noted the plan.", PromptTokens: 250, CompletionTokens: 10},
		llmtest.Turn{Content: "We said: rotate WAL.", PromptTokens: 300, CompletionTokens: 10},
	)
	in := "how full is the disk?\n\n!multi\nwrite down the plan:\nrotate WAL\n!end\nexit\nnever sent\n"
	r := d.ox(in, "ox-spawn", "-a", "ops", "-i", "--no-memory", "hi")
	if r.code != 0 {
		t.Fatalf("ox-spawn -i: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	run, _ := recs[0]["id"].(string)
	if recs[0]["type"] != "run" || run == "" {
		t.Fatalf("first record %v", recs[0])
	}
	var said []string
	for _, m := range ofType(recs, "message") {
		if m["role"] == "user" {
			said = append(said, m["text"].(string))
		}
	}
	if want := []string{"hi", "how full is the disk?", "write down the plan:\nrotate WAL"}; strings.Join(said, "|") != strings.Join(want, "|") {
		t.Fatalf("the user's messages %q, want %q", said, want)
	}
	if turns := ofType(recs, "turn"); len(turns) != 3 || turns[2]["turn"] != 3.0 {
		t.Fatalf("turn records %v, want 3, the last after 3 messages", turns)
	}
	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model calls, want 4", len(reqs))
	}
	// One conversation: the last call holds every message before it.
	last := reqs[3].Body.Messages
	var users []string
	for _, m := range last {
		if m.Role == openai.ChatMessageRoleUser {
			users = append(users, m.Content)
		}
	}
	if len(users) != 3 || !strings.Contains(reqs[3].Text(), "sda1 is at 91%") {
		t.Fatalf("the last call does not hold the whole conversation: %v", users)
	}
	if v := d.ox("", "ox-state", "load", "-a", "ops", "notes/plan"); v.stdout != "rotate WAL" {
		t.Fatalf("the tool call of the chat: %q", v.stdout)
	}
	// Charged to the run, by the kernel: the usage records add up.
	if u := ofType(recs, "usage"); len(u) != 4 || u[3]["run_tokens"] != 740.0 {
		t.Fatalf("usage records %v, want 4 ending at run_tokens 740", u)
	}
	// Each message written to the run is audited.
	a := d.ox("", "ox-audit", "log", "--json")
	if n := strings.Count(a.stdout, `"op":"run.stdin"`); n != 3 {
		t.Fatalf("%d run.stdin entries in the audit log, want 3 (two messages and the close)", n)
	}
	// The conversation is kept, and -c continues it.
	conv := d.ox("", "ox-state", "load", "-a", "ops", "conversations/"+run)
	var kept struct {
		Messages []openai.ChatCompletionMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(conv.stdout), &kept); err != nil || len(kept.Messages) < 8 {
		t.Fatalf("the kept conversation (%v): %s", err, conv.stdout)
	}
	r = d.ox("", "ox-spawn", "-a", "ops", "-n", "-c", "--no-memory", "what did we say?")
	if r.code != 0 || !strings.Contains(s.Requests()[4].Text(), "write down the plan") {
		t.Fatalf("-c after a chat: exit %d\n%s", r.code, r.stderr)
	}
	// The run's budget is the whole chat's: past run_tokens, the chat
	// ends over budget (exit 3), what was answered kept.
	if r := d.ox("", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"budget": "run_tokens = 300"})); r.code != 0 {
		t.Fatalf("ox-policy set: %d %s", r.code, r.stderr)
	}
	s.Push(llmtest.Turn{Content: "one", PromptTokens: 200, CompletionTokens: 20, Repeat: 3})
	r = d.ox("first\nsecond\nthird\n", "ox-spawn", "-a", "ops", "-i", "--no-memory", "--json")
	recs = records(t, r.stdout)
	errs := ofType(recs, "error")
	if r.code != 3 || len(errs) != 1 || errs[0]["code"] != "EDQUOT" || len(ofType(recs, "turn")) > 2 {
		t.Fatalf("a chat past its run_tokens: exit %d, want 3 with an EDQUOT error record\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A chat is no command, and has no final answer for a schema.
	for _, args := range [][]string{{"-i", "-d", "x"}, {"-i", "--schema", "/dev/null", "x"}, {"-i", "--", "true"}} {
		if r := d.ox("", "ox-spawn", append([]string{"-a", "ops"}, args...)...); r.code != 2 {
			t.Errorf("ox-spawn %v: exit %d, want 2\n%s", args, r.code, r.stderr)
		}
	}
}

// TestAgentLogs: ox-agent logs prints the prompts and answers of the
// agent's kept conversations, the newest first, each once (a continued
// conversation holds the one it continued); -q WORDS only those holding
// every word, whatever their case, in the prompt or the answer.
func TestAgentLogs(t *testing.T) {
	t.Parallel()
	d, _ := llmDaemon(t, "",
		llmtest.Turn{Content: "sda1 is at 91%: the WAL archiver is stuck."},
		llmtest.Turn{Content: "eth0 is up, 1 Gb/s."},
		llmtest.Turn{Content: "Restart the archiver."},
	)
	for _, args := range [][]string{{"check", "the", "disk"}, {"check", "the", "network"}, {"-c", "so what now?"}} {
		if r := d.ox("", "ox-spawn", append([]string{"-a", "ops", "-n", "--no-memory"}, args...)...); r.code != 0 {
			t.Fatalf("ox-spawn %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	exchanges := func(args ...string) []map[string]any {
		t.Helper()
		r := d.ox("", "ox-agent", args...)
		if r.code != 0 {
			t.Fatalf("ox-agent %v: exit %d\n%s", args, r.code, r.stderr)
		}
		return records(t, r.stdout)
	}
	all := exchanges("-a", "ops", "logs")
	var prompts []string
	for _, e := range all {
		prompts = append(prompts, e["prompt"].(string))
	}
	if want := "so what now?|check the network|check the disk"; strings.Join(prompts, "|") != want {
		t.Fatalf("ox-agent logs: prompts %q, want %q", prompts, want)
	}
	if all[0]["answer"] != "Restart the archiver." || all[0]["type"] != "exchange" || all[0]["run"] == "" {
		t.Fatalf("the newest exchange %v", all[0])
	}
	found := exchanges("logs", "-a", "ops", "-q", "WAL sda1")
	if len(found) != 1 || found[0]["prompt"] != "check the disk" {
		t.Fatalf("logs -q 'WAL sda1': %v", found)
	}
	if found := exchanges("logs", "-a", "ops", "-q", "check", "eth0"); len(found) != 1 || found[0]["answer"] != "eth0 is up, 1 Gb/s." {
		t.Fatalf("logs -q check eth0: %v", found)
	}
	if found := exchanges("logs", "-a", "ops", "-q", "printer"); len(found) != 0 {
		t.Fatalf("logs -q printer: %v", found)
	}
	if found := exchanges("logs", "-a", "ops", "-n", "1", "-q", "check"); len(found) != 1 || found[0]["prompt"] != "check the network" {
		t.Fatalf("logs -n 1 -q check: %v", found)
	}
}
