package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Model calls, made by the kernel for an agent's runner (llm.chat): the
// endpoint and its API key stay here, so no process of a run can call the
// model behind the budget's back (a run needs no network for its model);
// before every attempt, retries included, the answer's max_tokens is what
// the budget has left; what each attempt used (the endpoint's usage, or
// the count of what it streamed when it reports none, also when the run is
// killed mid-stream) is charged to the agent and the run with its audit
// entry; and the endpoint's breaker is the daemon's (llmhealth.go).

// minAnswer is the least room for an answer a call is made with.
const minAnswer = 16

// llmClients keeps one client per endpoint config, so that calls reuse
// their connections.
type llmClients struct {
	mu sync.Mutex
	m  map[string]*llm.Client
}

// client returns the client of the [llm] section l, made on first use.
func (h *llmClients) client(l config.LLM, key string, gate llm.Gate) *llm.Client {
	id := strings.Join([]string{l.BaseURL, key, l.Timeout, l.FirstTokenTimeout, fmt.Sprint(l.Retries)}, "\x00")
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.m[id]; ok {
		return c
	}
	if h.m == nil || len(h.m) >= 16 {
		h.m = map[string]*llm.Client{}
	}
	cfg := llm.DefaultConfig(l.BaseURL, key, l.Model)
	if d, err := time.ParseDuration(l.Timeout); err == nil {
		cfg.Timeout = d
	}
	if d, err := time.ParseDuration(l.FirstTokenTimeout); err == nil {
		cfg.FirstToken = d
	}
	cfg.Retries = max(l.Retries, 0)
	cfg.Gate = gate
	c := llm.New(cfg)
	h.m[id] = c
	return c
}

// promptMemo remembers, for each caller (a run), the prompt tokens the
// endpoint counted for the conversation of its last call, keyed by the
// digest of its messages and tools: the next call's prompt is that and an
// estimate of what came since, far closer than an estimate of the whole.
// A caller cannot make it say less than the truth: only a prefix the
// endpoint counted matches.
type promptMemo struct {
	mu sync.Mutex
	m  map[string]promptKnown
	// ratio is, per agent, endpoint and model, what the endpoint counted of a
	// prompt over the conservative estimate of it (at most 1): a new
	// conversation's estimate is scaled by it, with a margin, so that it
	// comes near the server's count instead of several times over it.
	ratio map[string]float64
}

// ratioMargin is what a learned ratio is raised by: an estimate errs
// high by this much rather than low.
const ratioMargin = 1.15

type promptKnown struct {
	n      int      // messages counted
	sum    [32]byte // digest of the tools and those messages
	tokens int
}

// digests returns the digest of tools and of each prefix of msgs.
func digests(tools json.RawMessage, msgs []openai.ChatCompletionMessage) [][32]byte {
	h := blake3.New(32, nil)
	h.Write(tools)
	out := make([][32]byte, len(msgs)+1)
	copy(out[0][:], h.Sum(nil))
	for i, m := range msgs {
		b, _ := json.Marshal(m)
		h.Write(b)
		copy(out[i+1][:], h.Sum(nil))
	}
	return out
}

// estimate is the prompt tokens of msgs (with tools, toolTokens of
// them) for caller, whose prefixes digest to sums, at the endpoint and
// model of key; full says it is all estimated (no prefix was counted).
func (p *promptMemo) estimate(caller, key string, msgs []openai.ChatCompletionMessage, sums [][32]byte, toolTokens int) (n int, full bool) {
	p.mu.Lock()
	k, ok := p.m[caller]
	r := p.ratio[key]
	p.mu.Unlock()
	if ok && k.n <= len(msgs) && sums[k.n] == k.sum {
		n := k.tokens
		for _, m := range msgs[k.n:] {
			n += llm.EstimateMessage(m)
		}
		return n, false
	}
	n = llm.EstimateMessages(msgs) + toolTokens
	if r > 0 {
		n = min(n, int(float64(n)*r*ratioMargin)+1)
	}
	return n, true
}

// calibrate keeps, for the endpoint and model of key, the ratio of what
// the endpoint counted of a prompt (counted) to its conservative
// estimate (estimated).
func (p *promptMemo) calibrate(key string, counted, estimated int) {
	if counted <= 0 || estimated <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ratio == nil || len(p.ratio) >= 256 {
		p.ratio = map[string]float64{}
	}
	p.ratio[key] = min(1, float64(counted)/float64(estimated))
}

// learn keeps what the endpoint counted for caller's msgs.
func (p *promptMemo) learn(caller string, n int, sum [32]byte, tokens int) {
	if caller == "" || tokens <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= 4096 {
		p.m = map[string]promptKnown{}
	}
	p.m[caller] = promptKnown{n: n, sum: sum, tokens: tokens}
}

// tokensLeft is what the token limits of agent (policy p) and of run r
// leave, -1 when none binds; a cost limit counts too, at the prices.
func (k *Kernel) tokensLeft(agent string, p *policy.Policy, r *supervisor.Run, prompt int, l config.LLM) int64 {
	lim, runLim, used := k.budgets.Limits(agent, p)
	left := int64(-1)
	limit := func(lim, used int64) {
		if lim > 0 && (left < 0 || lim-used < left) {
			left = lim - used
		}
	}
	cost := func(lim, used float64) {
		if lim <= 0 || l.CompletionPrice <= 0 {
			return
		}
		rest := (lim-used)*1e6 - float64(prompt)*l.PromptPrice
		limit(int64(rest/l.CompletionPrice)+int64(prompt), 0)
	}
	limit(lim.Tokens, used.Tokens)
	cost(lim.Cost, used.Cost)
	if r != nil {
		u := budget.RunUsed(r)
		limit(runLim.Tokens, u.Tokens)
		cost(runLim.Cost, u.Cost)
	}
	return left
}

// LLMChat is llm.chat: one model call for a.Agent, its answer's pieces
// sent to emit as they come (a.Stream) with the endpoint's events, and
// the answer returned. Each attempt is charged and audited as it ends.
func (k *Kernel) LLMChat(ctx context.Context, c *Cred, a proto.LLMChatArgs, raw []byte, emit func(any) error) (proto.LLMTurnRecord, error) {
	return sysLLMChat.Call(k, ctx, c, chatting{a, emit}, raw)
}

// chatting is what llm.chat takes: its args, and where the pieces of
// the answer and the endpoint's events go.
type chatting struct {
	proto.LLMChatArgs
	emit func(any) error
}

func (k *Kernel) llmChat(ctx context.Context, c *Cred, a chatting, raw []byte) (proto.LLMTurnRecord, error) {
	emit := a.emit
	var msgs []openai.ChatCompletionMessage
	if err := json.Unmarshal(a.Messages, &msgs); err != nil || len(msgs) == 0 {
		return proto.LLMTurnRecord{}, proto.Errorf(proto.EINVAL, "messages: want a JSON array of chat messages, at least one")
	}
	var tools []openai.Tool
	if len(a.Tools) > 0 && string(a.Tools) != "null" {
		if err := json.Unmarshal(a.Tools, &tools); err != nil {
			return proto.LLMTurnRecord{}, proto.Errorf(proto.EINVAL, "tools: want a JSON array of tool definitions: %v", err)
		}
	}
	if a.MaxTokens < 0 {
		return proto.LLMTurnRecord{}, proto.Errorf(proto.EINVAL, "max_tokens %d: want 0 (no cap) or more", a.MaxTokens)
	}
	if len(a.Schema) > 0 {
		if _, err := llm.ParseSchema(a.Schema); err != nil {
			return proto.LLMTurnRecord{}, proto.Errorf(proto.EINVAL, "schema: %v", err)
		}
	}
	if a.Temperature != nil && (*a.Temperature < 0 || *a.Temperature > 2) {
		return proto.LLMTurnRecord{}, proto.Errorf(proto.EINVAL, "temperature %v: want 0 to 2", *a.Temperature)
	}
	l := k.liveCfg().LLM
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.LLMTurnRecord{}, err
	}
	r := k.callerRun(c, a.Agent)
	name := a.Model
	if name == "" && r != nil {
		name = r.Spec().Model
	}
	if name == "" {
		name = l.Model
	}
	// The agent's policy names the models it may ask for (llm.models),
	// by the name asked: the admin too acts as the agent here. Like a
	// refused exec, a refused model only fails (no on_violation).
	if d := policy.AsDenied(k.hooked(k.root, p, c, proto.OpLLMChat, a.Agent, asking{ask: askModel, key: name})); d != nil {
		k.auditDenied(c, proto.OpLLMChat, a.Agent+":"+name+" ["+d.Rule+"]", raw, proto.EPERM)
		return proto.LLMTurnRecord{}, proto.Errorf(proto.EPERM, "%s: %s (policy rule %s)", a.Agent, d.Reason, d.Rule)
	}
	// A [models.NAME] of that name brings its endpoint, key, prices and
	// options; another name is a model of [llm]'s endpoint.
	l, model, entry := l.Resolve(name)
	if l.BaseURL == "" {
		return proto.LLMTurnRecord{}, proto.Errorf(proto.ENOEXEC, "no model endpoint is configured: set base_url in the [llm] section of oxios.toml (or of [models.%s])", name)
	}
	if a.MaxTokens == 0 && l.MaxTokens > 0 {
		a.MaxTokens = l.MaxTokens // the config's cap, for a caller that sets none
	}
	if entry != nil {
		if entry.MaxTokens > 0 && (a.MaxTokens == 0 || a.MaxTokens > entry.MaxTokens) {
			a.MaxTokens = entry.MaxTokens
		}
		if a.Temperature == nil && entry.Temperature != nil {
			t := float32(*entry.Temperature)
			a.Temperature = &t
		}
	}
	caller := c.Run
	if caller == "" {
		caller = fmt.Sprintf("%s/%d", a.Agent, c.PID)
	}
	sums := digests(a.Tools, msgs)
	toolTokens := llm.EstimateTools(tools)
	// Per agent too: what one agent sends cannot make another's estimates
	// low.
	ratioKey := a.Agent + "\x00" + l.BaseURL + "\x00" + model
	gate := k.breakers.Get(l.BaseURL, llm.Lease(l.Timeout)).Gate()
	cl := k.llmClients.client(l, os.Getenv(l.KeyEnv), gate)

	if why := k.ConfigRefused(); why != "" {
		emit(&proto.EndpointRecord{Type: proto.RecordEndpoint, Event: "config",
			Text: fmt.Sprintf("oxiosd refused its config file (%s); this call uses the config in force, endpoint %s", why, l.BaseURL)})
	}
	rec := proto.LLMTurnRecord{Type: proto.RecordLLMTurn, Model: model}
	var over *proto.Error
	var prompt int
	attemptNo := 0
	before := func(attempt int) (int, error) {
		attemptNo = attempt
		prompt, _ = k.prompts.estimate(caller, ratioKey, msgs, sums, toolTokens)
		if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Tokens: int64(prompt + minAnswer)}); qerr != nil {
			k.auditDenied(c, proto.OpLLMChat, a.Agent+":"+model, raw, qerr.Code)
			r.OverBudget(qerr.Message)
			if attempt > 1 {
				qerr = proto.Errorf(qerr.Code, "%s (after %d attempts of the call, %d tokens in failed ones)", qerr.Message, attempt-1, rec.FailedTokens)
			}
			return 0, qerr
		}
		n, capped := a.MaxTokens, false
		if left := k.tokensLeft(a.Agent, p, r, prompt, l); left >= 0 {
			room := int(max(left-int64(prompt), minAnswer))
			if n == 0 || n > room {
				n, capped = room, true
			}
		}
		rec.MaxTokens, rec.Capped = n, capped
		return n, nil
	}
	spent := func(attempt int, u openai.Usage, ans *llm.Turn, f *llm.Error) {
		pt, ct := int64(u.PromptTokens), int64(u.CompletionTokens)
		result, answer := "ok", ""
		if f != nil {
			result = llmErrno(f)
			if ctx.Err() != nil {
				result = proto.ECANCELED // the caller went (a run killed)
			}
			rec.FailedTokens += pt + ct
		} else {
			answer = answerDigest(ans)
			rec.Answer = answer
		}
		if pt+ct == 0 {
			return // nothing used: the call's end is audited below
		}
		d := budget.Price(pt, ct, l.PromptPrice, l.CompletionPrice)
		if f == nil {
			rec.Cost = d.Cost
		}
		qerr := k.budgets.OverAfter(a.Agent, p, budgetRun(r), d)
		target := fmt.Sprintf("%s:%s %d+%d tokens, cost %.6g", a.Agent, model, pt, ct, d.Cost)
		if answer != "" {
			target += ", answer " + answer
		} else {
			target += fmt.Sprintf(", attempt %d failed", attempt)
		}
		e := &audit.Entry{Actor: c.Actor(), Op: proto.OpLLMChat, Target: target, Args: audit.ArgsDigest(raw), Result: result}
		if qerr != nil && f == nil {
			e.Result = qerr.Code
		}
		ev := llmChatEvent{Agent: a.Agent, Run: c.Run, Model: model, PromptTokens: pt, CompletionTokens: ct, Cost: d.Cost, Answer: answer, Result: e.Result}
		// Charged even when the caller is gone (a run killed mid-stream):
		// the endpoint did the work.
		if err := k.budgets.ChargeAudited(context.WithoutCancel(ctx), a.Agent, d, budgetRun(r), e, &ev); err != nil {
			k.log.Warn("llm.chat: charge not recorded", "agent", a.Agent, "err", err)
		}
		if qerr != nil {
			over = qerr
			r.OverBudget(qerr.Message)
		}
	}
	opt := llm.Options{
		Model: model, MaxTokens: a.MaxTokens, Temperature: a.Temperature, Wait: a.Wait, Schema: a.Schema,
		Before: before, Spent: spent,
		Observe: func(e llm.Event) { emit(endpointItem(e)) },
	}
	if a.Stream {
		opt.OnDelta = func(s string) {
			emit(&proto.LLMDeltaRecord{Type: proto.RecordLLMDelta, Attempt: attemptNo, Text: s})
		}
	}
	turn, err := cl.Chat(ctx, msgs, tools, opt)
	if err != nil {
		var le *llm.Error
		if !errors.As(err, &le) {
			var pe *proto.Error
			if errors.As(err, &pe) {
				return proto.LLMTurnRecord{}, pe
			}
			if ctx.Err() != nil {
				return proto.LLMTurnRecord{}, proto.Errorf(proto.ECANCELED, "llm.chat: cancelled: %v", context.Cause(ctx))
			}
			return proto.LLMTurnRecord{}, proto.Errorf(proto.EHOSTDOWN, "model endpoint: %v", err)
		}
		code := llmErrno(le)
		if le.Spent.TotalTokens == 0 {
			// Nothing was charged, so nothing audited it yet.
			e := &audit.Entry{Actor: c.Actor(), Op: proto.OpLLMChat, Target: fmt.Sprintf("%s:%s %s", a.Agent, model, le.Class), Args: audit.ArgsDigest(raw), Result: code}
			k.submit(k.record(), &tx{entry: e}, false)
		}
		emit(&proto.LLMErrorRecord{Type: proto.RecordLLMError, Class: string(le.Class), Status: le.Status, Attempts: le.Attempts,
			Model: le.Model, Partial: le.Partial, PromptTokens: int64(le.Spent.PromptTokens), FailedTokens: int64(le.Spent.TotalTokens),
			RetryAt: le.RetryAt, Text: le.Err.Error()})
		return proto.LLMTurnRecord{}, proto.Errorf(code, "%s", le.Error())
	}
	if turn.Model != "" {
		rec.Model = turn.Model
	}
	k.prompts.learn(caller, len(msgs), sums[len(msgs)], turn.Usage.PromptTokens)
	if turn.Usage.PromptTokens > 0 {
		k.prompts.calibrate(ratioKey, turn.Usage.PromptTokens, llm.EstimateMessages(msgs)+toolTokens)
	}
	rec.Content, rec.Finish, rec.Attempts = turn.Content, turn.Finish, turn.Attempts
	if len(turn.ToolCalls) > 0 {
		rec.ToolCalls, _ = json.Marshal(turn.ToolCalls)
	}
	rec.PromptTokens, rec.CompletionTokens = int64(turn.Usage.PromptTokens), int64(turn.Usage.CompletionTokens)
	if r != nil {
		u := budget.RunUsed(r)
		rec.RunTokens, rec.RunCost = u.Tokens, u.Cost
	}
	if over != nil {
		rec.Over = over.Message
	}
	rec.Text = fmt.Sprintf("%s: %d prompt + %d completion tokens", rec.Model, rec.PromptTokens, rec.CompletionTokens)
	return rec, nil
}

// models lists the models runs may ask for: [llm]'s, then each
// [models.NAME] by name, with the state of its endpoint's breaker.
func (k *Kernel) models() []proto.ModelInfo {
	l := k.liveCfg().LLM
	if l.BaseURL == "" && len(l.Models) == 0 {
		return nil
	}
	var out []proto.ModelInfo
	if l.BaseURL != "" {
		out = append(out, proto.ModelInfo{Name: l.Model, Model: l.Model, Endpoint: l.BaseURL, PromptPrice: l.PromptPrice,
			CompletionPrice: l.CompletionPrice, State: k.breakers.Says(l.BaseURL), Default: true})
	}
	names := make([]string, 0, len(l.Models))
	for n := range l.Models {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		r, model, _ := l.Resolve(n)
		out = append(out, proto.ModelInfo{Name: n, Model: model, Endpoint: r.BaseURL, PromptPrice: r.PromptPrice,
			CompletionPrice: r.CompletionPrice, State: k.breakers.Says(r.BaseURL)})
	}
	return out
}

// llmChatEvent is the bus event of a charged model call.
type llmChatEvent struct {
	Agent            string  `json:"agent"`
	Run              string  `json:"run,omitempty"`
	Model            string  `json:"model"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Cost             float64 `json:"cost"`
	Answer           string  `json:"answer,omitempty"`
	Result           string  `json:"result"`
}

// answerDigest is the hex BLAKE3-256 digest of an answer: its text and
// its tool calls as JSON.
func answerDigest(t *llm.Turn) string {
	h := blake3.New(32, nil)
	h.Write([]byte(t.Content))
	if len(t.ToolCalls) > 0 {
		b, _ := json.Marshal(t.ToolCalls)
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// llmErrno is the errno of a failed model call, by its class: the key
// refused EACCES, no such URL or model ENOENT, a prompt over the context
// E2BIG, a request refused EINVAL, an error inside the answer's stream
// EPROTO, and the endpoint down (no answer, timeouts, 5xx, an open
// breaker) EHOSTDOWN.
func llmErrno(e *llm.Error) string {
	switch e.Class {
	case llm.Auth:
		return proto.EACCES
	case llm.NotFound:
		return proto.ENOENT
	case llm.Overflow:
		return proto.E2BIG
	case llm.Refused:
		return proto.EINVAL
	case llm.InStream:
		return proto.EPROTO
	}
	return proto.EHOSTDOWN
}

// endpointItem is the stream item of an endpoint's event.
func endpointItem(e llm.Event) *proto.EndpointRecord {
	rec := &proto.EndpointRecord{Type: proto.RecordEndpoint, Event: e.Kind, Attempt: e.Attempt, Wait: e.Wait.Seconds()}
	switch e.Kind {
	case "retry":
		rec.Text = fmt.Sprintf("model call failed (attempt %d): %v; retrying in %v", e.Attempt, e.Err, e.Wait.Round(time.Millisecond))
	case "open":
		rec.Text = fmt.Sprintf("circuit open after %d failed attempts: %v", e.Attempt, e.Err)
	case "discarded":
		rec.Text = fmt.Sprintf("attempt %d failed after %d bytes of its answer: that text is discarded", e.Attempt, e.Discarded)
	default:
		rec.Text = "circuit " + e.Kind
	}
	return rec
}
