// Package agent is the LLM runner's loop: it gives the model the task, the
// context it was handed and the memories the task recalls, lets it act
// only through tools that are kernel syscalls (state, memory, exec, fetch), and
// records the whole conversation as run records. Budgets are reserved
// before each model call and charged after it.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/mcpbridge"
	"github.com/oxios/oxios/pkg/proto"
)

// Kernel is what the runner asks of oxiosd, for its own agent.
type Kernel interface {
	StateLoad(ctx context.Context, key string) ([]byte, error)
	StateSave(ctx context.Context, key string, value []byte) error
	StateList(ctx context.Context, prefix string) ([]proto.StateRecord, error)
	Remember(ctx context.Context, m proto.MemoryInput) (proto.MemoryRecord, error)
	Recall(ctx context.Context, query string, k int) ([]proto.MemoryRecord, error)
	Exec(ctx context.Context, a proto.ExecArgs) (proto.ExecRecord, error)
	// ToolList lists the WASM tools, and whether the agent may run each.
	ToolList(ctx context.Context) ([]proto.ToolInfoRecord, error)
	// ToolRun runs a WASM tool.
	ToolRun(ctx context.Context, a proto.ToolRunArgs) (proto.ToolRecord, error)
	// Fetch makes an HTTP request under the agent's policy's [net].
	Fetch(ctx context.Context, a proto.FetchArgs) (proto.FetchRecord, error)
	// BudgetCheck reserves about tokens for the next model call: EDQUOT if
	// the run or agent may not spend them.
	BudgetCheck(ctx context.Context, tokens int64) (proto.BudgetRecord, error)
	// BudgetCharge charges what a call used; EDQUOT once over budget.
	BudgetCharge(ctx context.Context, model string, prompt, completion int64) (proto.BudgetRecord, error)
}

// Model is a chat endpoint (llm.Client).
type Model interface {
	Chat(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool) (*llm.Turn, error)
}

// Config is a run.
type Config struct {
	Agent, Run, Model string
	Task              string
	// Context is what the run was handed on stdin (records or text).
	Context string
	// MaxTurns bounds the model calls (0: 50).
	MaxTurns int
	// Recall is how many memories the task recalls at the start (0: 5,
	// <0: none).
	Recall int
	// Emit receives each record as it happens.
	Emit func(rec any)
	// Now is the clock (tests).
	Now func() time.Time
}

// Fatal is an error that ends a run: its Code says why (EDQUOT,
// ECANCELED, EHOSTDOWN, EIO...).
type Fatal struct {
	Code string
	Err  error
}

func (f *Fatal) Error() string { return f.Err.Error() }
func (f *Fatal) Unwrap() error { return f.Err }

// Result is how a run ended.
type Result struct {
	Summary string // the finish tool's summary, or the last answer
	Turns   int
	Tokens  int64
}

// Runner runs one task.
type Runner struct {
	cfg    Config
	k      Kernel
	m      Model
	msgs   []openai.ChatCompletionMessage
	tokens int64
	mcp    *mcpbridge.Pool // the run's MCP servers (mcp.go)
}

// New returns a runner.
func New(cfg Config, k Kernel, m Model) *Runner {
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 50
	}
	if cfg.Recall == 0 {
		cfg.Recall = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Emit == nil {
		cfg.Emit = func(any) {}
	}
	return &Runner{cfg: cfg, k: k, m: m}
}

const systemPrompt = `You are %s, an agent running under Oxios (run %s). You act only through the tools you are given; each is a system call checked against your policy and written to an audit log.
- state_read, state_write, state_list: your persistent key-value state (keys like "notes/today", UTF-8 values).
- remember, recall: your long-term memory (kinds: working, episodic, semantic).
- exec: run an allowed program in your workspace (no shell unless your policy allows one).
- fetch: get an http or https URL, on the hosts your policy allows.
- finish: end the task with a short summary of what you did and found.
When a tool returns an error, read it and correct the call; do not repeat a call that failed the same way. Be brief.`

// Run runs the task to its end; an error (a *Fatal) says why it ended
// without an answer.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	r.say(openai.ChatMessageRoleSystem, fmt.Sprintf(systemPrompt, r.cfg.Agent, r.cfg.Run))
	if mem := r.recall(ctx); mem != "" {
		r.say(openai.ChatMessageRoleSystem, mem)
	}
	if c := strings.TrimSpace(r.cfg.Context); c != "" {
		r.say(openai.ChatMessageRoleUser, "Context handed to this run:\n"+c)
	}
	skills := r.skills(ctx)
	if p := skillsPrompt(skills); p != "" {
		r.say(openai.ChatMessageRoleSystem, p)
	}
	r.say(openai.ChatMessageRoleUser, r.cfg.Task)
	tools := append(Tools(), r.wasmTools(ctx)...)
	if len(skills) > 0 {
		tools = append(tools, skillToolDef(skills))
	}
	tools = append(tools, r.mcpTools(ctx)...)
	defer r.closeMCP()
	res := &Result{}
	for res.Turns < r.cfg.MaxTurns {
		if err := ctx.Err(); err != nil {
			return res, cancelled(ctx)
		}
		if _, err := r.k.BudgetCheck(ctx, r.estimate()); err != nil {
			return res, r.fatal(ctx, err)
		}
		start := r.cfg.Now()
		turn, err := r.m.Chat(ctx, r.msgs, tools)
		if err != nil {
			if ctx.Err() != nil {
				return res, cancelled(ctx)
			}
			return res, &Fatal{Code: proto.EHOSTDOWN, Err: err}
		}
		res.Turns++
		if err := r.charge(ctx, turn, r.cfg.Now().Sub(start)); err != nil {
			return res, err
		}
		res.Tokens = r.tokens
		am := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: turn.Content, ToolCalls: turn.ToolCalls}
		r.msgs = append(r.msgs, am)
		if turn.Content != "" {
			r.emit(&proto.MessageRecord{Type: proto.RecordMessage, Role: am.Role, Text: turn.Content})
			res.Summary = turn.Content
		}
		if len(turn.ToolCalls) == 0 {
			// An answer without tool calls is the model's last word.
			r.remember(ctx, res.Summary)
			return res, nil
		}
		finished := false
		for _, tc := range turn.ToolCalls {
			r.emit(&proto.ToolCallRecord{Type: proto.RecordToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
				Text: tc.Function.Name + " " + tc.Function.Arguments})
			out, summary, err := r.call(ctx, tc)
			tr := &proto.ToolResultRecord{Type: proto.RecordToolResult, ID: tc.ID, Name: tc.Function.Name, Text: out}
			if err != nil {
				if f := r.isFatal(ctx, err); f != nil {
					tr.Error, tr.Code, tr.Text = true, f.Code, f.Error()
					r.emit(tr)
					return res, f
				}
				tr.Error, tr.Text = true, "error: "+err.Error()
				var pe *proto.Error
				if errors.As(err, &pe) {
					tr.Code = pe.Code
				}
			}
			r.emit(tr)
			r.msgs = append(r.msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: tc.ID, Name: tc.Function.Name, Content: tr.Text})
			if summary != "" {
				finished = true
				res.Summary = summary
			}
		}
		if finished {
			r.remember(ctx, res.Summary)
			return res, nil
		}
	}
	return res, &Fatal{Code: proto.ELOOP, Err: fmt.Errorf("no answer after %d model turns (the run's turn limit, --max-turns)", r.cfg.MaxTurns)}
}

// say adds a message of ours to the conversation and records it.
func (r *Runner) say(role, text string) {
	r.msgs = append(r.msgs, openai.ChatCompletionMessage{Role: role, Content: text})
	r.emit(&proto.MessageRecord{Type: proto.RecordMessage, Role: role, Text: text})
}

// emit stamps a record with the run and hands it on.
func (r *Runner) emit(rec any) {
	now := r.cfg.Now().UTC()
	switch v := rec.(type) {
	case *proto.MessageRecord:
		v.Run, v.Agent, v.Time = r.cfg.Run, r.cfg.Agent, now
	case *proto.ToolCallRecord:
		v.Run, v.Agent, v.Time = r.cfg.Run, r.cfg.Agent, now
	case *proto.ToolResultRecord:
		v.Run, v.Agent, v.Time = r.cfg.Run, r.cfg.Agent, now
	case *proto.UsageRecord:
		v.Run, v.Agent, v.Time = r.cfg.Run, r.cfg.Agent, now
	case *proto.EndpointRecord:
		v.Run, v.Agent, v.Time = r.cfg.Run, r.cfg.Agent, now
	case *proto.ErrorRecord:
		v.Run, v.Agent, v.Time = r.cfg.Run, r.cfg.Agent, now
	}
	r.cfg.Emit(rec)
}

// Endpoint records a retry or breaker change (llm.Config.Observe).
func (r *Runner) Endpoint(e llm.Event) {
	rec := &proto.EndpointRecord{Type: proto.RecordEndpoint, Event: e.Kind, Attempt: e.Attempt, Wait: e.Wait.Seconds()}
	switch e.Kind {
	case "retry":
		rec.Text = fmt.Sprintf("model call failed (attempt %d): %v; retrying in %v", e.Attempt, e.Err, e.Wait.Round(time.Millisecond))
	case "open":
		rec.Text = fmt.Sprintf("circuit open after %d failed attempts: %v", e.Attempt, e.Err)
	default:
		rec.Text = "circuit " + e.Kind
	}
	r.emit(rec)
}

// Failed records why the run ended badly.
func (r *Runner) Failed(err error) {
	code := proto.EIO
	var f *Fatal
	if errors.As(err, &f) {
		code = f.Code
	}
	r.emit(&proto.ErrorRecord{Type: proto.RecordError, Code: code, Text: err.Error()})
}

// estimate is the tokens the next call will take: the prompt (about 4
// bytes a token) and room for an answer.
func (r *Runner) estimate() int64 {
	n := 0
	for _, m := range r.msgs {
		n += len(m.Content) + 8
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	return int64(n/4) + 256
}

// charge reports a call's usage to the kernel, and records it.
func (r *Runner) charge(ctx context.Context, t *llm.Turn, took time.Duration) error {
	p, c := int64(t.Usage.PromptTokens), int64(t.Usage.CompletionTokens)
	r.tokens += p + c
	b, err := r.k.BudgetCharge(ctx, r.cfg.Model, p, c)
	rec := &proto.UsageRecord{Type: proto.RecordUsage, Model: r.cfg.Model, PromptTokens: p, CompletionTokens: c,
		RunTokens: r.tokens, Seconds: took.Seconds(), Attempts: t.Attempts}
	if b.RunUsed != nil {
		rec.Cost = b.RunUsed.Cost
	}
	rec.Text = fmt.Sprintf("%d prompt + %d completion tokens (run: %d)", p, c, r.tokens)
	r.emit(rec)
	if err != nil {
		return r.fatal(ctx, err)
	}
	return nil
}

// fatal makes a kernel error that must end the run a *Fatal.
func (r *Runner) fatal(ctx context.Context, err error) error {
	if f := r.isFatal(ctx, err); f != nil {
		return f
	}
	return &Fatal{Code: proto.EIO, Err: err}
}

// isFatal says whether a tool's error ends the run: over budget, the
// run cancelled, the kernel gone. Other errors go back to the model.
func (r *Runner) isFatal(ctx context.Context, err error) *Fatal {
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	var te toolError
	if errors.As(err, &te) {
		return nil
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		switch pe.Code {
		case proto.EDQUOT, proto.ESHUTDOWN:
			return &Fatal{Code: pe.Code, Err: err}
		}
		return nil
	}
	// Not an answer of the kernel: the connection to it failed.
	return &Fatal{Code: proto.EIO, Err: fmt.Errorf("oxiosd: %w", err)}
}

func cancelled(ctx context.Context) *Fatal {
	err := context.Cause(ctx)
	return &Fatal{Code: proto.ECANCELED, Err: fmt.Errorf("cancelled: %w", err)}
}

// recall returns the memories the task brings back, as a system message.
func (r *Runner) recall(ctx context.Context) string {
	if r.cfg.Recall < 0 || strings.TrimSpace(r.cfg.Task) == "" {
		return ""
	}
	mems, err := r.k.Recall(ctx, r.cfg.Task, r.cfg.Recall)
	if err != nil || len(mems) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Memories of yours that may be relevant:\n")
	for _, m := range mems {
		fmt.Fprintf(&b, "- [%s %s] %s\n", m.Kind, m.Created.Format("2006-01-02"), oneLine(m.Text, 500))
	}
	return b.String()
}

// remember keeps an episodic summary of the run.
func (r *Runner) remember(ctx context.Context, summary string) {
	text := "Task: " + oneLine(r.cfg.Task, 300)
	if s := strings.TrimSpace(summary); s != "" {
		text += "\nOutcome: " + oneLine(s, 2000)
	}
	m, err := r.k.Remember(ctx, proto.MemoryInput{Kind: "episodic", Text: text, Tags: []string{"run"}, Source: "run:" + r.cfg.Run})
	res := &proto.ToolResultRecord{Type: proto.RecordToolResult, Name: "remember", ID: "summary"}
	if err != nil {
		res.Error, res.Text = true, "the run's summary was not remembered: "+err.Error()
	} else {
		res.Text = "remembered the run's summary as " + m.ID
	}
	r.emit(res)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		i := n
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}

// Marshal is how a record goes out: one JSON object (no newline).
func Marshal(rec any) []byte {
	b, _ := json.Marshal(rec)
	return b
}
