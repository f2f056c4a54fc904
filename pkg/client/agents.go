package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// AgentList calls fn with each agent the caller may act on, by name.
func (c *Client) AgentList(ctx context.Context, fn func(proto.AgentRecord) error) error {
	return c.Stream(ctx, proto.OpAgentList, struct{}{}, func(item json.RawMessage) error {
		var rec proto.AgentRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// AgentShow describes one agent; ENOENT if it does not exist.
func (c *Client) AgentShow(ctx context.Context, agent string) (proto.AgentRecord, error) {
	var rec proto.AgentRecord
	err := c.Call(ctx, proto.OpAgentShow, proto.AgentArgs{Agent: agent}, &rec)
	return rec, err
}

// AgentRemove removes an agent and returns what it removed.
func (c *Client) AgentRemove(ctx context.Context, agent string) (proto.AgentRecord, error) {
	var rec proto.AgentRecord
	err := c.Call(ctx, proto.OpAgentRemove, proto.AgentArgs{Agent: agent}, &rec)
	return rec, err
}
