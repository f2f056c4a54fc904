package kernel

import (
	"context"
	"time"

	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

// The model endpoint's health, kept here rather than in each runner: one
// circuit breaker per endpoint shared by every run of the daemon
// (llm.Breakers), so that when the endpoint is down one run probes it and
// the others wait; and why a config file was refused (reload.Live), for
// ox-spawn and ox-status to say.

// ConfigRefused is why the config file was last refused, "" if it was not.
func (k *Kernel) ConfigRefused() string { return k.live.Refused() }

// LLMState is the state of the breaker of the configured endpoint.
func (k *Kernel) LLMState() string {
	return k.breakers.Says(k.liveCfg().LLM.BaseURL)
}

// LLMGate is llm.gate: may a model call go now, or how did one go.
func (k *Kernel) LLMGate(ctx context.Context, c *Cred, a proto.LLMGateArgs, raw []byte) (proto.LLMGateRecord, error) {
	return sysLLMGate.Call(k, ctx, c, a, raw)
}

func (k *Kernel) llmGate(ctx context.Context, c *Cred, a proto.LLMGateArgs, raw []byte) (proto.LLMGateRecord, error) {
	// A report moves the breaker of every run: only a run of the agent
	// (its runner) or the admin may make one.
	rec, err := k.breakers.Gate(a, llm.Lease(k.liveCfg().LLM.Timeout), c.Admin || c.Run != "", time.Now())
	if err != nil {
		return proto.LLMGateRecord{}, err
	}
	rec.ConfigError = k.ConfigRefused()
	return rec, nil
}
