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
	"io"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/mcpbridge"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
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
	Chat(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool, opt llm.Options) (*llm.Turn, error)
}

// Config is a run.
type Config struct {
	Agent, Run, Model string
	Task              string
	// Context is what the run was handed on stdin (records or text).
	Context string
	// System, if set, is the persona's or --system's prompt: it comes
	// after the built-in one (which says what the tools are).
	System string
	// MaxTokens caps each answer (0: only the budget does); Temperature,
	// if set, is sent.
	MaxTokens   int
	Temperature *float32
	// MaxTurns bounds the model calls (0: 50).
	MaxTurns int
	// Recall is how many memories the task recalls at the start (0: 5,
	// <0: none).
	Recall int
	// NoSummary keeps the run's summary out of memory.
	NoSummary bool
	// Tools, if set, are the only tools offered (finish always is).
	Tools []string
	// History is an earlier conversation the run continues.
	History []openai.ChatCompletionMessage
	// Start, if set, is the whole opening of the conversation (its
	// system prompts, context and task, as a recording holds them): the
	// run says it instead of making its own, and recalls nothing (a
	// replay, replay.go).
	Start []openai.ChatCompletionMessage
	// Stream emits delta records as the answer comes.
	Stream bool
	// Schema, if set, is the JSON Schema the final answer must match: asked
	// of the endpoint, checked, and emitted as a result record (shape.go).
	Schema *llm.Schema
	// Fragments are URLs fetched (net.fetch) and said before the task.
	Fragments []string
	// Next, if set, makes the run a chat (chat.go): once the model has
	// answered, it returns the user's next message, which the run answers
	// in the same conversation, or io.EOF when the chat is over. With no
	// Task, the first message is Next's too.
	Next func(ctx context.Context) (string, error)
	// Emit receives each record as it happens.
	Emit func(rec any)
	// Now is the clock (tests).
	Now func() time.Time
}

// Fatal is an error that ends a run: its Code says why (EDQUOT,
// ECANCELED, EHOSTDOWN, EIO...); Endpoint marks a failure of the model
// endpoint (EHOSTDOWN, EACCES, ENOENT, E2BIG, EINVAL from it).
type Fatal struct {
	Code     string
	Endpoint bool
	Err      error
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
	// known is the prompt and answer tokens the endpoint reported for
	// msgs[:knownN]: the next prompt is that and an estimate of the rest.
	known  int
	knownN int
	// Deltas waiting to be emitted, and when the last went.
	pending   strings.Builder
	lastDelta time.Time
	// recalled holds the texts of the memories recalled, so that the
	// same summary is not written again.
	recalled map[string]bool
	mcp      *mcpbridge.Pool // the run's MCP servers (mcp.go)
	// metered: the model's calls are budgeted and charged by the kernel
	// (KernelModel), not by the runner.
	metered    bool
	configSaid bool
	// reshaped counts the times an answer was asked again for the schema.
	reshaped int
	// answers counts the model's answers: each numbers the records it
	// makes (Turn), which is how a replay finds them.
	answers int
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
	mt, _ := m.(interface{ Metered() bool })
	return &Runner{cfg: cfg, k: k, m: m, metered: mt != nil && mt.Metered()}
}

const systemPrompt = `You are %s, an agent running under Oxios (run %s). You act only through the tools you are given; each is a system call checked against your policy and written to an audit log.
- state_read, state_write, state_list: your persistent key-value state (keys like "notes/today", UTF-8 values).
- remember, recall: your long-term memory (kinds: working, episodic, semantic).
- exec: run an allowed program in your workspace (no shell unless your policy allows one).
- fetch: get an http or https URL, on the hosts your policy allows.
- finish: end the task with a short summary of what you did and found.
When a tool returns an error, read it and correct the call; do not repeat a call that failed the same way. Be brief.`

// contextPrefix begins the message that says what the run was handed.
const contextPrefix = "Context handed to this run:\n"

// minAnswer is the least room for an answer a call is made with.
const minAnswer = 16

// Messages returns the conversation so far (to keep it, for --continue).
func (r *Runner) Messages() []openai.ChatCompletionMessage { return r.msgs }

// Run runs the task to its end; an error (a *Fatal) says why it ended
// without an answer.
func (r *Runner) Run(ctx context.Context) (*Result, error) {
	if r.cfg.Next != nil && strings.TrimSpace(r.cfg.Task) == "" && len(r.cfg.Start) == 0 {
		// A chat that starts with the user's first message: the recall
		// is for it.
		text, err := r.next(ctx, 0)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return &Result{}, nil // nothing asked, nothing said
			}
			return &Result{}, err
		}
		r.cfg.Task = text
	}
	skills, err := r.open(ctx)
	if err != nil {
		return &Result{}, err
	}
	var schema json.RawMessage
	if r.cfg.Schema != nil {
		schema = r.cfg.Schema.Raw()
	}
	tools := append(append(Tools(), r.wasmTools(ctx)...), r.msgToolList()...)
	if len(skills) > 0 {
		tools = append(tools, skillToolDef(skills))
	}
	tools = r.offered(append(tools, r.mcpTools(ctx)...))
	defer r.closeMCP()
	toolTokens := llm.EstimateTools(tools)
	res := &Result{}
	compacted := false
	// The turn limit bounds the model calls of each message of a chat.
	limit, messages := r.cfg.MaxTurns, 1
	for res.Turns < limit {
		if err := ctx.Err(); err != nil {
			return res, cancelled(ctx)
		}
		maxTokens, capped := r.cfg.MaxTokens, false
		if !r.metered {
			// A model called directly: the runner reserves and charges.
			prompt := r.estimate(toolTokens)
			b, err := r.k.BudgetCheck(ctx, int64(prompt+minAnswer))
			if err != nil {
				return res, r.fatal(ctx, err)
			}
			maxTokens, capped = r.room(b, prompt)
		}
		start := r.cfg.Now()
		turn, err := r.m.Chat(ctx, r.msgs, tools, llm.Options{MaxTokens: maxTokens, Temperature: r.cfg.Temperature, OnDelta: r.delta, Schema: schema})
		r.flushDelta()
		if err != nil {
			if ctx.Err() != nil {
				return res, cancelled(ctx)
			}
			var le *llm.Error
			if !errors.As(err, &le) {
				var pe *proto.Error
				if errors.As(err, &pe) {
					// The kernel's answer (llm.chat): over budget, or
					// refused (a model the policy does not list).
					if pe.Code == proto.EPERM || pe.Code == proto.EACCES {
						return res, &Fatal{Code: pe.Code, Err: err}
					}
					return res, r.fatal(ctx, err)
				}
				return res, &Fatal{Code: proto.EHOSTDOWN, Endpoint: true, Err: err}
			}
			// What the failed attempts used was spent: charged, and an
			// answer cut by the call's timeout is kept.
			if le.Partial != "" {
				r.emit(&proto.MessageRecord{Type: proto.RecordMessage, Role: openai.ChatMessageRoleAssistant, Text: le.Partial})
				res.Summary = le.Partial
			}
			if le.Spent.TotalTokens > 0 {
				t := &llm.Turn{Model: le.Model, Attempts: le.Attempts, Spent: le.Spent, Charged: le.Charged}
				if f := r.charge(ctx, t, 0, r.cfg.Now().Sub(start)); f != nil {
					res.Tokens = r.tokens
					return res, f
				}
				res.Tokens = r.tokens
			}
			if le.Class == llm.Overflow && !compacted {
				if r.compact() {
					compacted = true
					continue
				}
			}
			if len(tools) > 0 && refusesTools(le) {
				// llama-server without --jinja: a plain chat still works.
				tools, toolTokens = nil, 0
				r.emit(&proto.EndpointRecord{Type: proto.RecordEndpoint, Event: "no-tools",
					Text: fmt.Sprintf("the endpoint refuses tools (%v): asking again without them, as a plain chat", le.Err)})
				continue
			}
			return res, endpointFatal(le)
		}
		compacted = false
		res.Turns++
		r.answers++
		am := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: turn.Content, ToolCalls: turn.ToolCalls}
		r.msgs = append(r.msgs, am)
		// The answer is shown before it is charged: it was paid for,
		// even if the charge then ends the run.
		if turn.Content != "" {
			r.emit(&proto.MessageRecord{Type: proto.RecordMessage, Role: am.Role, Turn: r.answers, Text: turn.Content})
			res.Summary = turn.Content
		}
		err = r.charge(ctx, turn, r.answers, r.cfg.Now().Sub(start))
		res.Tokens = r.tokens
		if err != nil {
			return res, err
		}
		r.known = turn.Usage.PromptTokens + turn.Usage.CompletionTokens
		r.knownN = len(r.msgs)
		if turn.Charged {
			maxTokens, capped = turn.MaxTokens, turn.Capped
		}
		if turn.Finish == string(openai.FinishReasonLength) && capped {
			return res, &Fatal{Code: proto.EDQUOT, Err: fmt.Errorf("budget exhausted: the answer was cut at the %d tokens the budget had left (the run used %d tokens; ox-budget show -a %s)", maxTokens, r.tokens, r.cfg.Agent)}
		}
		if len(turn.ToolCalls) == 0 {
			// An answer without tool calls is the model's last word.
			if r.cfg.Schema != nil {
				v, again, err := r.answerShape(turn.Content)
				if err != nil {
					return res, err
				}
				if again {
					continue
				}
				r.result(v)
			}
			more, err := r.nextMessage(ctx, res, messages)
			if err != nil || !more {
				return res, err
			}
			limit, messages = res.Turns+r.cfg.MaxTurns, messages+1
			continue
		}
		finished := false
		for _, tc := range turn.ToolCalls {
			r.emit(&proto.ToolCallRecord{Type: proto.RecordToolCall, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
				Turn: r.answers, Text: tc.Function.Name + " " + tc.Function.Arguments})
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
			if r.cfg.Schema != nil {
				v, again, err := r.answerShape(res.Summary)
				if err != nil {
					return res, err
				}
				if again {
					continue
				}
				r.result(v)
			}
			more, err := r.nextMessage(ctx, res, messages)
			if err != nil || !more {
				return res, err
			}
			limit, messages = res.Turns+r.cfg.MaxTurns, messages+1
		}
	}
	return res, &Fatal{Code: proto.ELOOP, Err: fmt.Errorf("no answer after %d model turns (the run's turn limit, --max-turns)", r.cfg.MaxTurns)}
}

// open says the opening of the conversation: the system prompts, the
// memories recalled, the context, the skills, the fragments and the
// task (or Config.Start as it is). It returns the skills the run may
// load.
func (r *Runner) open(ctx context.Context) ([]*skill.Installed, error) {
	if len(r.cfg.Start) > 0 {
		for _, m := range r.cfg.Start {
			r.say(m.Role, m.Content)
		}
		return r.skills(ctx), nil
	}
	if len(r.cfg.History) > 0 {
		// A continued conversation keeps its system prompt; a new
		// --system or persona is said again.
		r.msgs = append(r.msgs, r.cfg.History...)
		if r.cfg.System != "" {
			r.say(openai.ChatMessageRoleSystem, r.cfg.System)
		}
	} else {
		r.say(openai.ChatMessageRoleSystem, fmt.Sprintf(systemPrompt, r.cfg.Agent, r.cfg.Run))
		if r.cfg.System != "" {
			r.say(openai.ChatMessageRoleSystem, r.cfg.System)
		}
	}
	if mem := r.recall(ctx); mem != "" {
		r.say(openai.ChatMessageRoleSystem, mem)
	}
	if c := strings.TrimSpace(r.cfg.Context); c != "" {
		r.say(openai.ChatMessageRoleUser, contextPrefix+c)
	}
	skills := r.skills(ctx)
	if p := skillsPrompt(skills); p != "" {
		r.say(openai.ChatMessageRoleSystem, p)
	}
	if err := r.fragments(ctx); err != nil {
		return nil, r.fatal(ctx, err)
	}
	r.say(openai.ChatMessageRoleUser, r.cfg.Task)
	return skills, nil
}

// nextMessage ends a run whose model gave its last word, remembering its
// summary, or, in a chat, says the next message of the user and returns
// true; answered is how many messages were answered.
func (r *Runner) nextMessage(ctx context.Context, res *Result, answered int) (bool, error) {
	if r.cfg.Next == nil {
		r.remember(ctx, res.Summary)
		return false, nil
	}
	text, err := r.next(ctx, answered)
	if errors.Is(err, io.EOF) {
		r.remember(ctx, res.Summary)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.say(openai.ChatMessageRoleUser, text)
	return true, nil
}

// next emits a turn record and waits for the user's next message (Next):
// io.EOF at the end of the chat, a *Fatal if it cannot be read.
func (r *Runner) next(ctx context.Context, answered int) (string, error) {
	r.emit(&proto.TurnRecord{Type: proto.RecordTurn, Turn: answered, Tokens: r.tokens,
		Text: fmt.Sprintf("answered %d; waiting for the next message", answered)})
	text, err := r.cfg.Next(ctx)
	switch {
	case err == nil, errors.Is(err, io.EOF):
		return text, err
	case ctx.Err() != nil:
		return "", cancelled(ctx)
	}
	return "", &Fatal{Code: proto.EIO, Err: fmt.Errorf("the next message: %w", err)}
}

// refusesTools reports whether a model call failed because the endpoint
// does not take tools (llama-server without --jinja: "tools param
// requires --jinja flag"; others: tools "not supported").
func refusesTools(le *llm.Error) bool {
	if le.Class != llm.Refused {
		return false
	}
	m := strings.ToLower(le.Err.Error())
	return strings.Contains(m, "--jinja") || strings.Contains(m, "tool") && (strings.Contains(m, "not supported") || strings.Contains(m, "unsupported") || strings.Contains(m, "does not support"))
}

// endpointFatal is the Fatal of a failed model call, coded by its class.
func endpointFatal(le *llm.Error) *Fatal {
	code := proto.EHOSTDOWN
	switch le.Class {
	case llm.Auth:
		code = proto.EACCES
	case llm.NotFound:
		code = proto.ENOENT
	case llm.Overflow:
		code = proto.E2BIG
	case llm.Refused:
		code = proto.EINVAL
	case llm.InStream:
		code = proto.EPROTO
	}
	return &Fatal{Code: code, Endpoint: true, Err: le}
}

// room is the max_tokens of the next call: what the budget has left after
// the prompt, or the configured cap if that is less; capped says the
// budget set it.
func (r *Runner) room(b proto.BudgetRecord, prompt int) (int, bool) {
	left := int64(-1)
	limit := func(lim, used int64) {
		if lim > 0 && (left < 0 || lim-used < left) {
			left = lim - used
		}
	}
	limit(b.Limit.Tokens, b.Used.Tokens)
	if b.RunUsed != nil {
		limit(b.RunLimit.Tokens, b.RunUsed.Tokens)
	}
	n := r.cfg.MaxTokens
	if left < 0 {
		return n, false
	}
	room := int(max(left-int64(prompt), minAnswer))
	if n > 0 && n <= room {
		return n, false
	}
	return room, true
}

// estimate is the tokens of the next prompt: what the endpoint reported
// for the conversation so far, and a conservative estimate of what came
// since (or of all of it, before the first answer).
func (r *Runner) estimate(toolTokens int) int {
	if r.known == 0 || r.knownN > len(r.msgs) {
		return llm.EstimateMessages(r.msgs) + toolTokens
	}
	n := r.known
	for _, m := range r.msgs[r.knownN:] {
		n += llm.EstimateMessage(m)
	}
	return n
}

// delta emits a piece of the answer as it comes: the first at once, the
// rest at most every deltaEvery (a fast stream in fewer records).
func (r *Runner) delta(s string) {
	if !r.cfg.Stream {
		return
	}
	r.pending.WriteString(s)
	if now := time.Now(); now.Sub(r.lastDelta) >= deltaEvery {
		r.flushDelta()
		r.lastDelta = now
	}
}

const deltaEvery = 20 * time.Millisecond

func (r *Runner) flushDelta() {
	if r.pending.Len() == 0 {
		return
	}
	r.emit(&proto.DeltaRecord{Type: proto.RecordDelta, Text: r.pending.String()})
	r.pending.Reset()
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
	case *proto.DeltaRecord:
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
	case *proto.TurnRecord:
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
	case "discarded":
		r.flushDelta()
		rec.Text = fmt.Sprintf("attempt %d failed after %d bytes of its answer: that text is discarded", e.Attempt, e.Discarded)
	default:
		rec.Text = "circuit " + e.Kind
	}
	r.emit(rec)
}

// EndpointRecord records an event of the endpoint as the kernel told it
// (llm.chat): a retry, a change of the breaker, an attempt's text
// discarded, the config file refused (said once).
func (r *Runner) EndpointRecord(e proto.EndpointRecord) {
	if e.Event == "config" {
		if r.configSaid {
			return
		}
		r.configSaid = true
	}
	r.flushDelta()
	e.Type = proto.RecordEndpoint
	r.emit(&e)
}

// ConfigRefused records that oxiosd refused its config file: the run goes
// on with the config in force, which the user may not expect.
func (r *Runner) ConfigRefused(why, url string) {
	r.emit(&proto.EndpointRecord{Type: proto.RecordEndpoint, Event: "config",
		Text: fmt.Sprintf("oxiosd refused its config file (%s); this run uses the config in force, endpoint %s", why, url)})
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

// charge reports what a call used to the kernel (its answer's tokens and
// those of its failed attempts), and records it; turn numbers the answer
// (0: the call gave none).
func (r *Runner) charge(ctx context.Context, t *llm.Turn, turn int, took time.Duration) error {
	p := int64(t.Usage.PromptTokens + t.Spent.PromptTokens)
	c := int64(t.Usage.CompletionTokens + t.Spent.CompletionTokens)
	failed := int64(t.Spent.PromptTokens + t.Spent.CompletionTokens)
	r.tokens += p + c
	model := t.Model
	if model == "" {
		model = r.cfg.Model
	}
	var b proto.BudgetRecord
	var err error
	if t.Charged {
		// The kernel charged it (llm.chat): the run's figures are its.
		r.tokens = max(r.tokens, t.RunTokens)
		b.RunUsed = &proto.Budget{Tokens: t.RunTokens, Cost: t.RunCost}
		if t.Over != "" {
			err = proto.Errorf(proto.EDQUOT, "%s", t.Over)
		}
	} else {
		b, err = r.k.BudgetCharge(ctx, model, p, c)
	}
	rec := &proto.UsageRecord{Type: proto.RecordUsage, Model: model, PromptTokens: int64(t.Usage.PromptTokens), CompletionTokens: int64(t.Usage.CompletionTokens),
		FailedTokens: failed, RunTokens: r.tokens, Seconds: took.Seconds(), Attempts: t.Attempts, Turn: turn}
	if turn > 0 {
		rec.Finish = t.Finish
	}
	if b.RunUsed != nil {
		rec.Cost = b.RunUsed.Cost
	}
	rec.Text = fmt.Sprintf("%d prompt + %d completion tokens (run: %d)", rec.PromptTokens, rec.CompletionTokens, r.tokens)
	if failed > 0 {
		rec.Text = fmt.Sprintf("%d prompt + %d completion tokens, %d in failed attempts (run: %d)", rec.PromptTokens, rec.CompletionTokens, failed, r.tokens)
	}
	r.emit(rec)
	if err != nil {
		f := r.fatal(ctx, err)
		var ff *Fatal
		if errors.As(f, &ff) && ff.Code == proto.EDQUOT {
			ff.Err = fmt.Errorf("budget exhausted: this call used %d tokens (%d prompt + %d completion), the run %d in all: %w", p+c, p, c, r.tokens, err)
		}
		return f
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

// offered is the tools of the run: all, or those Config.Tools names.
func (r *Runner) offered(all []openai.Tool) []openai.Tool {
	if len(r.cfg.Tools) == 0 {
		return all
	}
	want := map[string]bool{"finish": true}
	for _, n := range r.cfg.Tools {
		want[n] = true
	}
	var out []openai.Tool
	for _, t := range all {
		// MCP tools and skills are granted by the agent's policy and
		// state, not by a persona's list of built-in tools.
		if t.Function != nil && (want[t.Function.Name] || strings.HasPrefix(t.Function.Name, mcpbridge.FuncPrefix) || t.Function.Name == skillTool) {
			out = append(out, t)
		}
	}
	return out
}

// recall returns the memories the task brings back, as a system message:
// each text once, and none the conversation already holds.
func (r *Runner) recall(ctx context.Context) string {
	if r.cfg.Recall < 0 || strings.TrimSpace(r.cfg.Task) == "" {
		return ""
	}
	mems, err := r.k.Recall(ctx, r.cfg.Task, r.cfg.Recall)
	if err != nil || len(mems) == 0 {
		return ""
	}
	r.recalled = map[string]bool{}
	var said strings.Builder
	for _, m := range r.msgs {
		said.WriteString(m.Content)
	}
	var b strings.Builder
	for _, m := range mems {
		text := OneLine(m.Text, 500)
		if r.recalled[text] || strings.Contains(said.String(), text) {
			r.recalled[text] = true
			continue
		}
		r.recalled[text] = true
		fmt.Fprintf(&b, "- [%s %s] %s\n", m.Kind, m.Created.Format("2006-01-02"), text)
	}
	if b.Len() == 0 {
		return ""
	}
	return "Memories of yours that may be relevant:\n" + b.String()
}

// remember keeps an episodic summary of the run, when it says something
// worth recalling: not when the run has no outcome, and not when the
// same summary is already a memory.
func (r *Runner) remember(ctx context.Context, summary string) {
	s := strings.TrimSpace(summary)
	if r.cfg.NoSummary || s == "" {
		return
	}
	text := "Task: " + OneLine(r.cfg.Task, 300) + "\nOutcome: " + OneLine(s, 2000)
	res := &proto.ToolResultRecord{Type: proto.RecordToolResult, Name: "remember", ID: "summary"}
	if r.recalled[OneLine(text, 500)] {
		res.Text = "the run's summary is already a memory; not kept again"
		r.emit(res)
		return
	}
	m, err := r.k.Remember(ctx, proto.MemoryInput{Kind: "episodic", Text: text, Tags: []string{"run"}, Source: "run:" + r.cfg.Run})
	if err != nil {
		res.Error, res.Text = true, "the run's summary was not remembered: "+err.Error()
	} else {
		res.Text = "remembered the run's summary as " + m.ID
	}
	r.emit(res)
}

// OneLine is s on one line, cut at n bytes (not inside a UTF-8
// character) and ended with "…" where cut.
func OneLine(s string, n int) string {
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
