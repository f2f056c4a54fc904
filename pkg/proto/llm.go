package proto

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
