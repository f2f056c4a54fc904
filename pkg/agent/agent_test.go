package agent_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// memKernel keeps state in a map; charge refuses past limit tokens.
type memKernel struct {
	state    map[string][]byte
	modified map[string]time.Time
	limit    int64
	charged  int64
	mems     []proto.MemoryInput
	tools    []proto.ToolRunArgs
	checks   []int64              // tokens asked at each check
	recall   []proto.MemoryRecord // what Recall returns, if set
}

func (k *memKernel) StateLoad(_ context.Context, key string) ([]byte, error) {
	v, ok := k.state[key]
	if !ok {
		return nil, proto.Errorf(proto.ENOENT, "no key %q", key)
	}
	return v, nil
}
func (k *memKernel) StateSave(_ context.Context, key string, v []byte) error {
	k.state[key] = v
	if k.modified == nil {
		k.modified = map[string]time.Time{}
	}
	k.modified[key] = time.Now()
	return nil
}
func (k *memKernel) StateList(_ context.Context, prefix string) ([]proto.StateRecord, error) {
	var out []proto.StateRecord
	for key := range k.state {
		if strings.HasPrefix(key, prefix) {
			out = append(out, proto.StateRecord{Key: key, Modified: k.modified[key]})
		}
	}
	return out, nil
}
func (k *memKernel) Remember(_ context.Context, m proto.MemoryInput) (proto.MemoryRecord, error) {
	k.mems = append(k.mems, m)
	return proto.MemoryRecord{ID: "m1", Kind: m.Kind}, nil
}
func (k *memKernel) Recall(context.Context, string, int) ([]proto.MemoryRecord, error) {
	if k.recall != nil {
		return k.recall, nil
	}
	return []proto.MemoryRecord{{Kind: "semantic", Text: "the backup disk is sdb", Created: time.Unix(0, 0)}}, nil
}
func (k *memKernel) Fetch(context.Context, proto.FetchArgs) (proto.FetchRecord, error) {
	return proto.FetchRecord{}, proto.Errorf(proto.EPERM, "fetch refused")
}

func (k *memKernel) Exec(context.Context, proto.ExecArgs) (proto.ExecRecord, error) {
	return proto.ExecRecord{}, proto.Errorf(proto.EPERM, "exec refused")
}
func (k *memKernel) ToolList(context.Context) ([]proto.ToolInfoRecord, error) {
	return []proto.ToolInfoRecord{
		{Name: "jsonq", Description: "query JSON", InputSchema: []byte(`{"type":"object"}`), Allowed: true},
		{Name: "secret", Description: "not for this agent", InputSchema: []byte(`{"type":"object"}`)},
	}, nil
}
func (k *memKernel) ToolRun(_ context.Context, a proto.ToolRunArgs) (proto.ToolRecord, error) {
	k.tools = append(k.tools, a)
	return proto.ToolRecord{Tool: a.Tool, Status: 0, Stdout: "\"a\"\n"}, nil
}
func (k *memKernel) BudgetCheck(_ context.Context, n int64) (proto.BudgetRecord, error) {
	k.checks = append(k.checks, n)
	if k.limit > 0 && k.charged+n > k.limit {
		return proto.BudgetRecord{}, proto.Errorf(proto.EDQUOT, "over budget: %d used + %d asked of %d", k.charged, n, k.limit)
	}
	return proto.BudgetRecord{RunLimit: proto.Budget{Tokens: k.limit}, RunUsed: &proto.Budget{Tokens: k.charged}}, nil
}
func (k *memKernel) BudgetCharge(_ context.Context, _ string, p, c int64) (proto.BudgetRecord, error) {
	k.charged += p + c
	if k.limit > 0 && k.charged > k.limit {
		return proto.BudgetRecord{}, proto.Errorf(proto.EDQUOT, "run over its token budget")
	}
	return proto.BudgetRecord{}, nil
}

func runner(t *testing.T, k agent.Kernel, cfg agent.Config, turns ...llmtest.Turn) (*agent.Runner, *llmtest.Server, *[]any) {
	s := llmtest.New(turns...)
	t.Cleanup(s.Close)
	var recs []any
	cfg.Emit = func(r any) { recs = append(recs, r) }
	lc := llm.DefaultConfig(s.URL, "", "m")
	lc.Retries = 0
	return agent.New(cfg, k, llm.New(lc)), s, &recs
}

func TestRunnerMaxTurns(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	loop := llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "state_read", Arguments: `{"key":"nope"}`}}, Repeat: -1}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "loop", MaxTurns: 3}, loop)
	res, err := r.Run(context.Background())
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.ELOOP || !strings.Contains(err.Error(), "3 model turns") || res.Turns != 3 {
		t.Fatalf("res %+v err %v", res, err)
	}
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests", n)
	}
	// The recalled memory reached the model; the ENOENT went back to it.
	txt := s.Requests()[2].Text()
	if !strings.Contains(txt, "the backup disk is sdb") || !strings.Contains(txt, "tool: error: no key") {
		t.Errorf("conversation:\n%s", txt)
	}
}

func TestRunnerBudgetFatal(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}, limit: 2000}
	r, s, recs := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "spend", Recall: -1},
		llmtest.Turn{Content: "the answer paid for", ToolCalls: []llmtest.Call{{Name: "state_list", Arguments: `{}`}}, PromptTokens: 1900, CompletionTokens: 200},
		llmtest.Turn{Content: "never"})
	res, err := r.Run(context.Background())
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.EDQUOT {
		t.Fatalf("err %v", err)
	}
	// The error says what was spent, not what was asked.
	if !strings.Contains(err.Error(), "this call used 2100 tokens (1900 prompt + 200 completion), the run 2100 in all") {
		t.Errorf("err %v", err)
	}
	if len(s.Requests()) != 1 || len(k.mems) != 0 {
		t.Errorf("%d requests, %d memories after the budget ran out", len(s.Requests()), len(k.mems))
	}
	// The answer was paid for: it is shown, and is the run's result.
	shown := false
	for _, rec := range *recs {
		if m, ok := rec.(*proto.MessageRecord); ok && m.Role == "assistant" && m.Text == "the answer paid for" {
			shown = true
		}
	}
	if !shown || res.Summary != "the answer paid for" || res.Tokens != 2100 {
		t.Errorf("shown %v, result %+v", shown, res)
	}
	r.Failed(err)
	last := (*recs)[len(*recs)-1].(*proto.ErrorRecord)
	if last.Code != proto.EDQUOT || last.Run != "r" || last.Agent != "a" {
		t.Errorf("error record %+v", last)
	}
}

func TestRunnerCancelled(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	r, _, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "wait"}, llmtest.Turn{Content: "slow", Delay: llmtest.Duration(10 * time.Second)})
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(100*time.Millisecond, func() { cancel(errors.New("signal terminated")) })
	_, err := r.Run(ctx)
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.ECANCELED || !strings.Contains(err.Error(), "signal terminated") {
		t.Fatalf("err %v", err)
	}
}

func TestFormatContext(t *testing.T) {
	in := `{"type":"memory","id":"x","agent":"ops","kind":"episodic","text":"disk full","tags":["nginx"],"created":"2026-11-23T10:00:00Z"}
plain line

{"type":"state","agent":"ops","key":"notes/a","value":"hello"}
{"type":"output","text":"from a run"}
{"not":"a record"}
`
	want := `- memory (episodic, 2026-11-23 10:00, tags nginx): disk full
plain line
- state notes/a: hello
- output: from a run
{"not":"a record"}
`
	if got := agent.FormatContext(in); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	big := strings.Repeat("x", 1000) + "\n"
	if got := agent.FormatContext(strings.Repeat(big, 200)); len(got) > 70<<10 || !strings.HasSuffix(got, "(the rest of the context was cut)\n") {
		t.Errorf("a big context is not cut: %d bytes", len(got))
	}
}

// TestRunnerWasmTools: the allowed WASM tools are offered as wasm_NAME
// functions with their manifests' schemas, and a call's arguments are the
// tool's input.
func TestRunnerWasmTools(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	args := `{"path":".items[0].name","data":{"items":[{"name":"a"}]}}`
	r, s, recs := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "query"},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "wasm_jsonq", Arguments: args}}},
		llmtest.Turn{Content: "a"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range s.Requests()[0].Body.Tools {
		names = append(names, tl.Function.Name)
	}
	got := strings.Join(names, " ")
	if !strings.Contains(got, "wasm_jsonq") || strings.Contains(got, "wasm_secret") || !strings.Contains(got, "exec") {
		t.Errorf("tools offered: %s", got)
	}
	if len(k.tools) != 1 || k.tools[0].Tool != "jsonq" || k.tools[0].Input != args {
		t.Fatalf("tool runs: %+v", k.tools)
	}
	found := false
	for _, rec := range *recs {
		if tr, ok := rec.(*proto.ToolResultRecord); ok && tr.Name == "wasm_jsonq" {
			found = !tr.Error && strings.Contains(tr.Text, "exit status 0") && strings.Contains(tr.Text, `"a"`)
		}
	}
	if !found {
		t.Errorf("no good tool result for wasm_jsonq: %+v", *recs)
	}
}

// TestRunnerChat: with Next, the runner answers message after message in
// one conversation: a turn record before each wait, --max-turns for each
// message (not the whole chat), one summary at the end; a signal while it
// waits ends it as cancelled.
func TestRunnerChat(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	msgs := []string{"second", "third"}
	cfg := agent.Config{Agent: "a", Run: "r", Task: "first", MaxTurns: 2, Recall: -1,
		Next: func(context.Context) (string, error) {
			if len(msgs) == 0 {
				return "", io.EOF
			}
			m := msgs[0]
			msgs = msgs[1:]
			return m, nil
		}}
	tool := llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "state_list", Arguments: `{}`}}}
	r, s, recs := runner(t, k, cfg,
		llmtest.Turn{Content: "one"}, tool, llmtest.Turn{Content: "two"}, tool, llmtest.Turn{Content: "three"})
	res, err := r.Run(context.Background())
	if err != nil || res.Turns != 5 || res.Summary != "three" {
		t.Fatalf("res %+v err %v", res, err)
	}
	if n := len(s.Requests()); n != 5 {
		t.Fatalf("%d model calls, want 5 (each message within its 2)", n)
	}
	var users []string
	turns := 0
	for _, rec := range *recs {
		switch v := rec.(type) {
		case *proto.MessageRecord:
			if v.Role == "user" {
				users = append(users, v.Text)
			}
		case *proto.TurnRecord:
			turns++
			if v.Run != "r" || v.Turn != turns {
				t.Errorf("turn record %+v", v)
			}
		}
	}
	if strings.Join(users, "|") != "first|second|third" {
		t.Errorf("the user's messages %q", users)
	}
	if turns != 3 || len(k.mems) != 1 || !strings.Contains(k.mems[0].Text, "Task: first") || !strings.Contains(k.mems[0].Text, "Outcome: three") {
		t.Errorf("%d turn records (want 3, one after each answer), memories %+v", turns, k.mems)
	}
	// Without a task, the first message is Next's too, after a turn
	// record; a signal while it waits ends the run as cancelled.
	cfg.Task = ""
	ctx, cancel := context.WithCancelCause(context.Background())
	cfg.Next = func(ctx context.Context) (string, error) {
		cancel(errors.New("signal interrupt"))
		<-ctx.Done()
		return "", ctx.Err()
	}
	r, _, _ = runner(t, k, cfg)
	_, err = r.Run(ctx)
	var f *agent.Fatal
	if !errors.As(err, &f) || f.Code != proto.ECANCELED {
		t.Fatalf("cancelled while waiting: %v", err)
	}
}
