package kernel

import (
	"context"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

// The model endpoint's health, kept here rather than in each runner: one
// circuit breaker per endpoint shared by every run of the daemon, so that
// when the endpoint is down one run probes it and the others wait; and
// why a config file was refused, for ox-spawn and ox-status to say.

// llmHealth is the kernel's part: the breakers by endpoint
// (llm.Breakers), and why the config file was refused.
type llmHealth struct {
	breakers llm.Breakers
	mu       sync.Mutex
	refused  string
}

// configRefused notes why a config file was refused ("" once one loads).
func (k *Kernel) configRefused(err error) {
	k.llmh.mu.Lock()
	defer k.llmh.mu.Unlock()
	k.llmh.refused = ""
	if err != nil {
		k.llmh.refused = err.Error()
	}
}

// ConfigRefused is why the config file was last refused, "" if it was not.
func (k *Kernel) ConfigRefused() string {
	k.llmh.mu.Lock()
	defer k.llmh.mu.Unlock()
	return k.llmh.refused
}

// LLMState is the state of the breaker of the configured endpoint.
func (k *Kernel) LLMState() string {
	url := k.liveCfg().LLM.BaseURL
	if url == "" {
		return ""
	}
	return k.llmh.breakers.State(url).String()
}

// LLMGate is llm.gate: may a model call go now, or how did one go.
func (k *Kernel) LLMGate(ctx context.Context, c *Cred, a proto.LLMGateArgs, raw []byte) (proto.LLMGateRecord, error) {
	if err := k.gate(call{op: proto.OpLLMGate, c: c, agent: a.Agent, raw: raw}); err != nil {
		return proto.LLMGateRecord{}, err
	}
	// A report moves the breaker of every run: only a run of the agent
	// (its runner) or the admin may make one.
	rec, err := k.llmh.breakers.Gate(a, llm.Lease(k.liveCfg().LLM.Timeout), c.Admin || c.Run != "", time.Now())
	if err != nil {
		return proto.LLMGateRecord{}, err
	}
	rec.ConfigError = k.ConfigRefused()
	return rec, nil
}
