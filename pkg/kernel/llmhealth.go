package kernel

import (
	"context"
	"fmt"
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
	if a.Endpoint == "" || len(a.Endpoint) > 2048 {
		return proto.LLMGateRecord{}, proto.Errorf(proto.EINVAL, "endpoint: want the base URL of the model endpoint (at most 2048 bytes)")
	}
	lease := 10 * time.Minute
	if d, err := time.ParseDuration(k.liveCfg().LLM.Timeout); err == nil && d > 0 {
		lease = d
	}
	b := k.llmh.breakers.Get(a.Endpoint, lease)
	rec := proto.LLMGateRecord{Type: proto.RecordLLMGate, Endpoint: a.Endpoint, ConfigError: k.ConfigRefused()}
	now := time.Now()
	switch a.Outcome {
	case "":
		wait, ok := b.Allow(now)
		if !ok {
			rec.Wait = max(wait, time.Millisecond).Seconds()
		} else {
			rec.Probe = b.State() == llm.HalfOpen
		}
	case "ok", "failed":
		// A report moves the breaker of every run: only a run of the
		// agent (its runner) or the admin may make one.
		if !c.Admin && c.Run == "" {
			return proto.LLMGateRecord{}, proto.Errorf(proto.EPERM, "only an agent's run reports how its model calls went")
		}
		if a.Outcome == "ok" && b.Success() {
			rec.Changed = llm.Closed.String()
		} else if a.Outcome == "failed" && b.Failure(now) {
			rec.Changed = llm.Open.String()
		}
	default:
		return proto.LLMGateRecord{}, proto.Errorf(proto.EINVAL, "outcome %q: want \"\" (ask), ok or failed", a.Outcome)
	}
	rec.State = b.State().String()
	rec.Text = fmt.Sprintf("%s: circuit %s", a.Endpoint, rec.State)
	if rec.Wait > 0 {
		rec.Text += fmt.Sprintf(", next call in %.1fs", rec.Wait)
	}
	return rec, nil
}
