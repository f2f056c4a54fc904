package client

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// LLMGate asks the daemon's circuit breaker whether a model call may go
// (a.Outcome ""), or tells it how one went ("ok", "failed").
func (c *Client) LLMGate(ctx context.Context, a proto.LLMGateArgs) (proto.LLMGateRecord, error) {
	var rec proto.LLMGateRecord
	err := c.Call(ctx, proto.OpLLMGate, a, &rec)
	return rec, err
}
