package serve

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// llmChat serves llm.chat: the answer's pieces and the endpoint's events
// as items, each flushed as it comes (a runner shows the answer live),
// and the answer as the result.
func llmChat(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	a, err := decode[proto.LLMChatArgs](false, r)
	if err != nil {
		return nil, err
	}
	send := flushed(r.Out)
	rec, err := k.LLMChat(ctx, c, a, r.Args, func(item any) error {
		b, err := proto.Marshal(item)
		if err != nil {
			return err
		}
		return send(b)
	})
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&rec)
}
