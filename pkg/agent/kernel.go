package agent

import (
	"context"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// Client is Kernel over a connection to oxiosd, for one agent. The
// kernel knows the run by the caller's pid, so budgets are the run's.
type Client struct {
	C     *client.Client
	Agent string
}

var _ Kernel = (*Client)(nil)

func (c *Client) StateLoad(ctx context.Context, key string) ([]byte, error) {
	v, _, err := c.C.StateLoad(ctx, c.Agent, key)
	return v, err
}

func (c *Client) StateSave(ctx context.Context, key string, value []byte) error {
	_, err := c.C.StateSave(ctx, c.Agent, key, value)
	return err
}

func (c *Client) StateList(ctx context.Context, prefix string) ([]proto.StateRecord, error) {
	var out []proto.StateRecord
	err := c.C.StateList(ctx, c.Agent, prefix, func(r proto.StateRecord) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func (c *Client) Remember(ctx context.Context, m proto.MemoryInput) (proto.MemoryRecord, error) {
	recs, err := c.C.MemRemember(ctx, proto.MemRememberArgs{Agent: c.Agent, Memories: []proto.MemoryInput{m}})
	if err != nil || len(recs) == 0 {
		return proto.MemoryRecord{}, err
	}
	return recs[0], nil
}

func (c *Client) Recall(ctx context.Context, query string, k int) ([]proto.MemoryRecord, error) {
	return c.RecallArgs(ctx, proto.MemRecallArgs{Query: query, K: k})
}

// RecallArgs is Recall with the args of mem.recall (a kind, tags), of the
// agent's memories.
func (c *Client) RecallArgs(ctx context.Context, a proto.MemRecallArgs) ([]proto.MemoryRecord, error) {
	a.Agent = c.Agent
	var out []proto.MemoryRecord
	err := c.C.MemRecall(ctx, a, func(r proto.MemoryRecord) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func (c *Client) Exec(ctx context.Context, a proto.ExecArgs) (proto.ExecRecord, error) {
	a.Agent = c.Agent
	return c.C.Exec(ctx, a)
}

func (c *Client) ToolList(ctx context.Context) ([]proto.ToolInfoRecord, error) {
	var out []proto.ToolInfoRecord
	err := c.C.ToolList(ctx, c.Agent, func(r proto.ToolInfoRecord) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

func (c *Client) ToolRun(ctx context.Context, a proto.ToolRunArgs) (proto.ToolRecord, error) {
	a.Agent = c.Agent
	return c.C.ToolRun(ctx, a)
}

func (c *Client) Fetch(ctx context.Context, a proto.FetchArgs) (proto.FetchRecord, error) {
	a.Agent = c.Agent
	return c.C.NetFetch(ctx, a)
}

func (c *Client) BudgetCheck(ctx context.Context, tokens int64) (proto.BudgetRecord, error) {
	return c.C.BudgetCheck(ctx, c.Agent, tokens)
}

func (c *Client) BudgetCharge(ctx context.Context, model string, prompt, completion int64) (proto.BudgetRecord, error) {
	return c.C.BudgetCharge(ctx, proto.BudgetChargeArgs{Agent: c.Agent, Model: model, PromptTokens: prompt, CompletionTokens: completion})
}
