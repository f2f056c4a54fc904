package llm

import (
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// DefaultLease is the probe lease of a breaker when llm.timeout does
// not say.
const DefaultLease = 10 * time.Minute

// Lease is the probe lease of a breaker made now: the configured
// llm.timeout (a duration such as 5m), DefaultLease when it is unset or
// not one.
func Lease(timeout string) time.Duration {
	if d, err := time.ParseDuration(timeout); err == nil && d > 0 {
		return d
	}
	return DefaultLease
}

// Gate answers llm.gate for a.Endpoint with its breaker (lease: the
// probe lease of a breaker made now): with no outcome, whether a model
// call may go now or how long to wait (a half-open breaker's call is its
// probe); with "ok" or "failed", the report of how one went, which moves
// the breaker of every run, so only a caller that mayReport makes one.
func (h *Breakers) Gate(a proto.LLMGateArgs, lease time.Duration, mayReport bool, now time.Time) (proto.LLMGateRecord, *proto.Error) {
	if a.Endpoint == "" || len(a.Endpoint) > 2048 {
		return proto.LLMGateRecord{}, proto.Errorf(proto.EINVAL, "endpoint: want the base URL of the model endpoint (at most 2048 bytes)")
	}
	b := h.Get(a.Endpoint, lease)
	rec := proto.LLMGateRecord{Type: proto.RecordLLMGate, Endpoint: a.Endpoint}
	switch a.Outcome {
	case "":
		wait, ok := b.Allow(now)
		if !ok {
			rec.Wait = max(wait, time.Millisecond).Seconds()
		} else {
			rec.Probe = b.State() == HalfOpen
		}
	case "ok", "failed":
		if !mayReport {
			return proto.LLMGateRecord{}, proto.Errorf(proto.EPERM, "only an agent's run reports how its model calls went")
		}
		if a.Outcome == "ok" && b.Success() {
			rec.Changed = Closed.String()
		} else if a.Outcome == "failed" && b.Failure(now) {
			rec.Changed = Open.String()
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
