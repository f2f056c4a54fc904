package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// MemRemember stores a batch of memories of one agent (all or none) and
// returns their records, without text, in order.
func (c *Client) MemRemember(ctx context.Context, a proto.MemRememberArgs) ([]proto.MemoryRecord, error) {
	var res proto.MemRememberResult
	err := c.Call(ctx, proto.OpMemRemember, a, &res)
	return res.Memories, err
}

// MemRecall calls fn with each memory that matches, best first.
func (c *Client) MemRecall(ctx context.Context, a proto.MemRecallArgs, fn func(proto.MemoryRecord) error) error {
	return c.memStream(ctx, proto.OpMemRecall, a, fn)
}

// MemForget forgets memories and calls fn with the record of each.
func (c *Client) MemForget(ctx context.Context, a proto.MemForgetArgs, fn func(proto.MemoryRecord) error) error {
	return c.memStream(ctx, proto.OpMemForget, a, fn)
}

// MemList calls fn with each memory that matches, oldest first.
func (c *Client) MemList(ctx context.Context, a proto.MemListArgs, fn func(proto.MemoryRecord) error) error {
	return c.memStream(ctx, proto.OpMemList, a, fn)
}

func (c *Client) memStream(ctx context.Context, op string, args any, fn func(proto.MemoryRecord) error) error {
	return c.Stream(ctx, op, args, func(item json.RawMessage) error {
		var rec proto.MemoryRecord
		if !proto.ParseMemoryRecord(item, &rec) {
			rec = proto.MemoryRecord{}
			if err := json.Unmarshal(item, &rec); err != nil {
				return err
			}
		}
		return fn(rec)
	})
}
