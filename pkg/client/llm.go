package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// LLMGate asks the daemon's circuit breaker whether a model call may go
// (a.Outcome ""), or tells it how one went ("ok", "failed").
func (c *Client) LLMGate(ctx context.Context, a proto.LLMGateArgs) (proto.LLMGateRecord, error) {
	var rec proto.LLMGateRecord
	err := c.Call(ctx, proto.OpLLMGate, a, &rec)
	return rec, err
}

// LLMChat asks the kernel for one model call of a.Agent: fn is given each
// item of its stream as it comes (llm_delta, endpoint, and llm_error
// before a failure's error), and the answer is returned.
func (c *Client) LLMChat(ctx context.Context, a proto.LLMChatArgs, fn func(item json.RawMessage) error) (proto.LLMTurnRecord, error) {
	var rec proto.LLMTurnRecord
	err := c.StreamResult(ctx, proto.OpLLMChat, a, fn, &rec)
	return rec, err
}
