package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// TestRunnerMaxTokensFromBudget: each call is capped by max_tokens from
// what the budget has left after the prompt, so a run cannot overshoot
// its budget by a long answer; the cut answer is kept and the run ends
// as over budget.
func TestRunnerMaxTokensFromBudget(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}, limit: 6000}
	cjk := strings.Repeat("日本語の文章です。", 120) // ~3 KB of CJK on stdin
	r, s, recs := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "summarise", Context: cjk, Recall: -1},
		llmtest.Turn{Content: strings.Repeat("long answer ", 1000), PromptTokens: 1500, CompletionTokens: 3000})
	res, err := r.Run(context.Background())
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.EDQUOT || !strings.Contains(err.Error(), "cut at the") {
		t.Fatalf("err %v", err)
	}
	req := s.Requests()[0].Body
	if req.MaxTokens <= 0 || int64(req.MaxTokens)+k.checks[0] > 6000+16 {
		t.Errorf("max_tokens %d with %d asked at the check: over the 6000 left", req.MaxTokens, k.checks[0])
	}
	// The check counted the CJK context conservatively (not bytes/4).
	if k.checks[0] < int64(len(cjk)) {
		t.Errorf("check asked %d tokens for %d bytes of CJK", k.checks[0], len(cjk))
	}
	// What the server reported was charged, and the cut answer is kept.
	if k.charged != int64(1500+req.MaxTokens) || res.Summary == "" || !strings.HasPrefix(res.Summary, "long answer") {
		t.Errorf("charged %d (max_tokens %d), summary %q", k.charged, req.MaxTokens, res.Summary)
	}
	var usage *proto.UsageRecord
	for _, rec := range *recs {
		if u, ok := rec.(*proto.UsageRecord); ok {
			usage = u
		}
	}
	if usage == nil || usage.CompletionTokens != int64(req.MaxTokens) {
		t.Errorf("usage %+v", usage)
	}
}

// TestRunnerNextPromptFromUsage: after an answer, the next check counts
// the prompt from the usage the endpoint reported, plus an estimate of
// what came since.
func TestRunnerNextPromptFromUsage(t *testing.T) {
	k := &memKernel{state: map[string][]byte{"k": []byte("v")}}
	r, _, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "read", Recall: -1},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "state_read", Arguments: `{"key":"k"}`}}, PromptTokens: 5000, CompletionTokens: 50},
		llmtest.Turn{Content: "v it is"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(k.checks) != 2 || k.checks[1] < 5050 || k.checks[1] > 5050+100 {
		t.Errorf("checks %v: the second should be 5050 reported + the tool result", k.checks)
	}
}

// TestRunnerChargesFailedAttempts: a stream cut after it began was work
// the server did: charged, and said in the usage record.
func TestRunnerChargesFailedAttempts(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	s := llmtest.New(llmtest.Turn{Content: strings.Repeat("abc ", 200), Pace: llmtest.Duration(50 * time.Millisecond)},
		llmtest.Turn{Content: "done", PromptTokens: 100, CompletionTokens: 10})
	defer s.Close()
	lc := llm.DefaultConfig(s.URL, "", "m")
	lc.FirstToken, lc.Timeout = 5*time.Second, 600*time.Millisecond
	var recs []any
	r := agent.New(agent.Config{Agent: "a", Run: "r", Task: "t", Recall: -1, Emit: func(x any) { recs = append(recs, x) }}, k, llm.New(lc))
	res, err := r.Run(context.Background())
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.EHOSTDOWN || !f.Endpoint {
		t.Fatalf("err %v", err)
	}
	if k.charged == 0 || res.Tokens != k.charged || !strings.HasPrefix(res.Summary, "abc abc") {
		t.Errorf("charged %d, result %+v", k.charged, res)
	}
	if s.Started() != 1 {
		t.Errorf("%d requests: a slow answer was asked for again", s.Started())
	}
}

// TestRunnerCompactsOnOverflow: a conversation longer than the model's
// context is compacted (its middle turns digested) and tried once more.
func TestRunnerCompactsOnOverflow(t *testing.T) {
	k := &memKernel{state: map[string][]byte{"big": []byte(strings.Repeat("log line with words\n", 600))}}
	read := llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "state_read", Arguments: `{"key":"big"}`}}}
	r, s, recs := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "look at the log", Recall: -1},
		read, read, read, llmtest.Turn{Content: "seen it all"})
	// Room for the prompt and two big results, not three.
	s.SetContext(10000)
	res, err := r.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "seen it all" {
		t.Errorf("result %+v", res)
	}
	var refused, compacted int
	for _, q := range s.Requests() {
		if q.Status == 400 {
			refused++
		}
	}
	for _, rec := range *recs {
		if e, ok := rec.(*proto.EndpointRecord); ok && e.Event == "compacted" {
			compacted++
		}
	}
	if refused == 0 || compacted != refused {
		t.Errorf("%d refusals, %d compactions", refused, compacted)
	}
	last := s.Requests()[len(s.Requests())-1].Text()
	if !strings.Contains(last, "shortened to fit") || !strings.Contains(last, "user: look at the log") {
		t.Errorf("last request:\n%.2000s", last)
	}
}

// TestRunnerOverflowOnce: when compaction does not help, the run ends
// with E2BIG, not a loop.
func TestRunnerOverflowOnce(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "t", Recall: -1}, llmtest.Turn{Status: 400, Error: llmtest.ContextError, Repeat: -1})
	_, err := r.Run(context.Background())
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.E2BIG || !f.Endpoint {
		t.Fatalf("err %v", err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests: nothing to compact, so no second try", n)
	}
}

// TestRunnerMemoryNoPileUp: the same summary recalled is not written
// again, a memory is shown once however often it is recalled, and the
// switches turn recall and summary off.
func TestRunnerMemoryNoPileUp(t *testing.T) {
	summary := proto.MemoryRecord{Kind: "episodic", Text: "Task: check the disk\nOutcome: sda1 at 91%"}
	k := &memKernel{state: map[string][]byte{}, recall: []proto.MemoryRecord{summary, summary, summary}}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "check the disk"}, llmtest.Turn{Content: "sda1 at 91%"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(s.Requests()[0].Text(), "sda1 at 91%"); n != 1 {
		t.Errorf("the recalled summary is in the prompt %d times", n)
	}
	if len(k.mems) != 0 {
		t.Errorf("the same summary was remembered again: %+v", k.mems)
	}
	r, s, _ = runner(t, k, agent.Config{Agent: "a", Run: "r2", Task: "check the disk", Recall: -1, NoSummary: true}, llmtest.Turn{Content: "sda1 at 95% now"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Requests()[0].Text(), "Memories") || len(k.mems) != 0 {
		t.Errorf("memory was used with recall and summary off")
	}
}

// TestRunnerPlainChatWithoutTools: an endpoint that refuses tools
// (llama-server without --jinja) is asked again without them, and the run
// goes on as a plain chat, said by an endpoint record.
func TestRunnerPlainChatWithoutTools(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	r, s, recs := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "hi", Recall: -1},
		llmtest.Turn{Status: 500, Error: "tools param requires --jinja flag"},
		llmtest.Turn{Content: "hello"})
	res, err := r.Run(context.Background())
	if err != nil || res.Summary != "hello" {
		t.Fatalf("res %+v, %v", res, err)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || len(reqs[0].Body.Tools) == 0 || strings.Contains(string(reqs[1].Raw), `"tools"`) {
		t.Fatalf("%d requests; the second sent tools: %s", len(reqs), reqs[len(reqs)-1].Raw)
	}
	said := false
	for _, rec := range *recs {
		if e, ok := rec.(*proto.EndpointRecord); ok && e.Event == "no-tools" {
			said = true
		}
	}
	if !said {
		t.Errorf("no record says the tools were left out")
	}
}
