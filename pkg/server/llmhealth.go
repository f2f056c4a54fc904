package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpLLMGate] = handler{serve: serveLLMGate}
}

// serveLLMGate is llm.gate: the daemon's circuit breaker of the model
// endpoint, asked before each model call and told after it.
func serveLLMGate(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.LLMGateArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.LLMGate(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}
