package agent

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

// Gate is the daemon's circuit breaker of the endpoint (llm.gate), as an
// llm.Gate: every run of the daemon shares it, so that one run probes a
// dead endpoint while the others wait. An oxiosd that does not have it
// (ENOSYS), or that cannot answer, leaves the run its own breaker.
type Gate struct {
	C        *client.Client
	Agent    string
	Endpoint string
	// Local is the breaker used when the daemon's is not there.
	Local llm.Gate
	// OnConfigError is told, once, that the daemon refused its config
	// file (the run goes on with the config in force).
	OnConfigError func(string)

	once   sync.Once
	local  bool
	mu     sync.Mutex
	probed bool
}

var _ llm.Gate = (*Gate)(nil)

func (g *Gate) call(ctx context.Context, outcome string) (proto.LLMGateRecord, bool) {
	if g.useLocal() {
		return proto.LLMGateRecord{}, false
	}
	rec, err := g.C.LLMGate(ctx, proto.LLMGateArgs{Agent: g.Agent, Endpoint: g.Endpoint, Outcome: outcome})
	if err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.ENOSYS || pe.Code == proto.EPERM) {
			g.mu.Lock()
			g.local = true
			g.mu.Unlock()
		}
		return rec, false
	}
	if rec.ConfigError != "" && g.OnConfigError != nil {
		g.once.Do(func() { g.OnConfigError(rec.ConfigError) })
	}
	return rec, true
}

func (g *Gate) useLocal() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.local
}

// Allow implements llm.Gate.
func (g *Gate) Allow(ctx context.Context) (time.Duration, bool, error) {
	rec, ok := g.call(ctx, "")
	if !ok {
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		return g.Local.Allow(ctx)
	}
	return time.Duration(rec.Wait * float64(time.Second)), rec.Probe, nil
}

// Report implements llm.Gate.
func (g *Gate) Report(ctx context.Context, ok bool) (string, error) {
	outcome := "failed"
	if ok {
		outcome = "ok"
	}
	rec, answered := g.call(ctx, outcome)
	if !answered {
		return g.Local.Report(ctx, ok)
	}
	return rec.Changed, nil
}
