package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// ToolRun runs a WASM tool for an agent under its policy.
func (c *Client) ToolRun(ctx context.Context, a proto.ToolRunArgs) (proto.ToolRecord, error) {
	var rec proto.ToolRecord
	err := c.Call(ctx, proto.OpToolRun, a, &rec)
	return rec, err
}

// ToolList calls fn with each WASM tool there is, and whether agent may
// run it.
func (c *Client) ToolList(ctx context.Context, agent string, fn func(proto.ToolInfoRecord) error) error {
	return c.Stream(ctx, proto.OpToolList, proto.ToolListArgs{Agent: agent}, func(item json.RawMessage) error {
		var rec proto.ToolInfoRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}
