package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// streamOf decodes each item of a stream as a T.
func streamOf[T any](fn func(T) error) func(json.RawMessage) error {
	return func(item json.RawMessage) error {
		var rec T
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	}
}

// Fork copies an agent as a new one.
func (c *Client) Fork(ctx context.Context, a proto.ForkArgs) (proto.ForkRecord, error) {
	var rec proto.ForkRecord
	err := c.Call(ctx, proto.OpAgentFork, a, &rec)
	return rec, err
}

// AgentDiff calls fn with each file that differs between two agents, or
// an agent and its fork point.
func (c *Client) AgentDiff(ctx context.Context, a proto.AgentDiffArgs, fn func(proto.DiffRecord) error) error {
	return c.Stream(ctx, proto.OpAgentDiff, a, streamOf(fn))
}

// MsgSend sends a message.
func (c *Client) MsgSend(ctx context.Context, a proto.MsgSendArgs) (proto.MsgRecord, error) {
	var rec proto.MsgRecord
	err := c.Call(ctx, proto.OpMsgSend, a, &rec)
	return rec, err
}

// MsgList calls fn with the messages of an inbox.
func (c *Client) MsgList(ctx context.Context, a proto.MsgListArgs, fn func(proto.MsgRecord) error) error {
	return c.Stream(ctx, proto.OpMsgList, a, streamOf(fn))
}

// MsgRecv calls fn with each unread message, marking it read.
func (c *Client) MsgRecv(ctx context.Context, a proto.MsgListArgs, fn func(proto.MsgRecord) error) error {
	return c.Stream(ctx, proto.OpMsgRecv, a, streamOf(fn))
}

// ApproveList calls fn with the approval requests.
func (c *Client) ApproveList(ctx context.Context, a proto.ApproveListArgs, fn func(proto.ApprovalRecord) error) error {
	return c.Stream(ctx, proto.OpApproveList, a, streamOf(fn))
}

// ApproveDecide approves or denies a request.
func (c *Client) ApproveDecide(ctx context.Context, a proto.ApproveDecideArgs) (proto.ApprovalRecord, error) {
	var rec proto.ApprovalRecord
	err := c.Call(ctx, proto.OpApproveDecide, a, &rec)
	return rec, err
}
