package proto

import (
	"encoding/json"
	"time"
)

// The model endpoint's health, kept by the daemon for every run (issue
// 20): one circuit breaker per endpoint, so that queued runs do not each
// probe a dead endpoint, and the refusal of a config that would change it.

// OpLLMGate asks whether a model call may go now, or reports how one went.
const OpLLMGate = "llm.gate"

// RecordLLMGate is the record type of LLMGateRecord.
const RecordLLMGate = "llm_gate"

// LLMGateArgs are the args of llm.gate. Outcome "" asks to call the
// endpoint; "ok" (it answered) and "failed" (it did not) report a call.
// Reports are taken from the runs of the agent and from the admin.
type LLMGateArgs struct {
	Agent    string `json:"agent"`
	Endpoint string `json:"endpoint"` // the base URL
	Outcome  string `json:"outcome,omitempty"`
}

// LLMGateRecord is the answer of llm.gate: the breaker's state, how long
// to wait before calling (0: call now), whether the call is the half-open
// probe, and the state a report changed it to ("" if none).
type LLMGateRecord struct {
	Type     string  `json:"type"` // always "llm_gate"
	Endpoint string  `json:"endpoint"`
	State    string  `json:"state"` // closed, open, half-open
	Wait     float64 `json:"wait,omitempty"`
	Probe    bool    `json:"probe,omitempty"`
	Changed  string  `json:"changed,omitempty"`
	// ConfigError is why the daemon refused its config file the last
	// time it changed, if it did (the config in force stays).
	ConfigError string `json:"config_error,omitempty"`
	Text        string `json:"text"`
}

// OpLLMChat is one model call of an agent, made by the kernel: the
// endpoint and its key are the kernel's (never in a run's world), the
// answer's max_tokens is what the budget has left before every attempt,
// and what each attempt used is charged and audited as it ends.
const OpLLMChat = "llm.chat"

// The record types of llm.chat: the items of its stream (pieces of the
// answer, the endpoint's events, the failure of the call) and its result.
const (
	RecordLLMDelta = "llm_delta"
	RecordLLMError = "llm_error"
	RecordLLMTurn  = "llm_turn"
)

// LLMChatArgs are the args of llm.chat. Messages and Tools are in the
// OpenAI chat-completions shape. Model "" is the calling run's model, else
// the [llm] model. MaxTokens caps the answer (the budget caps it too);
// Temperature, if set, is sent exactly (0 is greedy). Stream asks for the
// answer's pieces as items as they come; Wait for a call that finds the
// endpoint's breaker open to wait for its probe instead of failing at once.
type LLMChatArgs struct {
	Agent       string          `json:"agent"`
	Model       string          `json:"model,omitempty"`
	Messages    json.RawMessage `json:"messages"`
	Tools       json.RawMessage `json:"tools,omitempty"`
	MaxTokens   int             `json:"max_tokens,omitempty"`
	Temperature *float32        `json:"temperature,omitempty"`
	Stream      bool            `json:"stream,omitempty"`
	Wait        bool            `json:"wait,omitempty"`
	// Schema, if set, is a JSON Schema the answer must match: sent to the
	// endpoint as the answer's format (response_format).
	Schema json.RawMessage `json:"schema,omitempty"`
}

// LLMDeltaRecord is a piece of the answer's text as it came (an item of
// llm.chat). Attempt says which attempt streamed it: the text of an
// attempt that then failed is discarded (an "endpoint" item with event
// "discarded" says so).
type LLMDeltaRecord struct {
	Type    string `json:"type"` // always "llm_delta"
	Attempt int    `json:"attempt"`
	Text    string `json:"text"`
}

// LLMErrorRecord is why a model call failed at the endpoint, the last item
// of its stream before the error reply: the kind of failure (Class: auth,
// notfound, overflow, refused, stream, transport, timeout, server, rate,
// breaker), the HTTP status, the text of an answer cut by the call's
// timeout (Partial, which was charged), the tokens the attempts used, and
// for an open breaker when the endpoint is tried again.
type LLMErrorRecord struct {
	Type         string    `json:"type"` // always "llm_error"
	Class        string    `json:"class"`
	Status       int       `json:"status,omitempty"`
	Attempts     int       `json:"attempts"`
	Model        string    `json:"model,omitempty"`
	Partial      string    `json:"partial,omitempty"`
	PromptTokens int64     `json:"prompt_tokens,omitempty"`
	FailedTokens int64     `json:"failed_tokens,omitempty"`
	RetryAt      time.Time `json:"retry_at,omitzero"`
	Text         string    `json:"text"`
}

// LLMTurnRecord is the result of llm.chat: the model's answer (text and
// tool calls, in the OpenAI shape), the usage the endpoint reported (or
// the count of what it streamed), what failed attempts used, what the
// call cost, the run's total, the max_tokens of the answer's attempt and
// whether the budget set it (Capped), and the digest of the answer as
// audited. Over is set when the answer took the agent or the run past a
// budget: the answer was paid for, and the run is ended.
type LLMTurnRecord struct {
	Type             string          `json:"type"` // always "llm_turn"
	Model            string          `json:"model"`
	Content          string          `json:"content"`
	ToolCalls        json.RawMessage `json:"tool_calls,omitempty"`
	Finish           string          `json:"finish,omitempty"`
	PromptTokens     int64           `json:"prompt_tokens"`
	CompletionTokens int64           `json:"completion_tokens"`
	FailedTokens     int64           `json:"failed_tokens,omitempty"`
	Attempts         int             `json:"attempts"`
	MaxTokens        int             `json:"max_tokens,omitempty"`
	Capped           bool            `json:"capped,omitempty"`
	Cost             float64         `json:"cost"`
	RunTokens        int64           `json:"run_tokens,omitempty"`
	RunCost          float64         `json:"run_cost,omitempty"`
	Answer           string          `json:"answer"`
	Over             string          `json:"over,omitempty"`
	Text             string          `json:"text"`
}
