package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// AuditLog calls fn with the line of each selected audit entry, exactly as
// stored (so it can be re-verified). With a.Follow it returns only when
// ctx ends or the connection does.
func (c *Client) AuditLog(ctx context.Context, a proto.AuditLogArgs, fn func(line json.RawMessage) error) error {
	return c.Stream(ctx, proto.OpAuditLog, a, fn)
}

// AuditShow returns the line of entry seq.
func (c *Client) AuditShow(ctx context.Context, seq uint64) (json.RawMessage, error) {
	var line json.RawMessage
	err := c.Call(ctx, proto.OpAuditShow, proto.AuditShowArgs{Seq: seq}, &line)
	return line, err
}

// AuditHead makes the log durable and returns its head.
func (c *Client) AuditHead(ctx context.Context) (proto.AuditHead, error) {
	var h proto.AuditHead
	err := c.Call(ctx, proto.OpAuditHead, nil, &h)
	return h, err
}

// AuditVerify has the daemon recompute the chain of its live log.
func (c *Client) AuditVerify(ctx context.Context) (proto.AuditVerify, error) {
	var r proto.AuditVerify
	err := c.Call(ctx, proto.OpAuditVerify, nil, &r)
	return r, err
}

// AuditExport calls fn with each line of a self-contained export: every
// entry, then the head line.
func (c *Client) AuditExport(ctx context.Context, fn func(line json.RawMessage) error) error {
	return c.Stream(ctx, proto.OpAuditExport, nil, fn)
}
