package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// PolicyShow returns an agent's policy.
func (c *Client) PolicyShow(ctx context.Context, agent string) (proto.PolicyRecord, error) {
	var rec proto.PolicyRecord
	err := c.Call(ctx, proto.OpPolicyShow, proto.BudgetArgs{Agent: agent}, &rec)
	return rec, err
}

// PolicySet replaces an agent's policy (admin only).
func (c *Client) PolicySet(ctx context.Context, agent, text string) (proto.PolicyRecord, error) {
	var rec proto.PolicyRecord
	err := c.Call(ctx, proto.OpPolicySet, proto.PolicySetArgs{Agent: agent, Text: text}, &rec)
	return rec, err
}

// PolicyCheck asks whether an op would be allowed.
func (c *Client) PolicyCheck(ctx context.Context, a proto.PolicyCheckArgs) (proto.PolicyCheckRecord, error) {
	var rec proto.PolicyCheckRecord
	err := c.Call(ctx, proto.OpPolicyCheck, a, &rec)
	return rec, err
}

// PolicyTest replays audit entries against a proposed policy: fn gets each
// past action it judges otherwise; the result counts.
func (c *Client) PolicyTest(ctx context.Context, a proto.PolicyTestArgs, fn func(proto.PolicyTestRecord) error) (proto.PolicyTestResult, error) {
	var res proto.PolicyTestResult
	err := c.StreamResult(ctx, proto.OpPolicyTest, a, func(item json.RawMessage) error {
		var rec proto.PolicyTestRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	}, &res)
	return res, err
}
