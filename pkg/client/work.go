package client

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// WorkList calls fn with the work of each run on a host folder (of
// agent, when not "").
func (c *Client) WorkList(ctx context.Context, agent string, fn func(proto.WorkRecord) error) error {
	return c.Stream(ctx, proto.OpWorkList, proto.WorkArgs{Agent: agent}, streamOf(fn))
}

// WorkDiff is run's work with its patch (stat: its diffstat).
func (c *Client) WorkDiff(ctx context.Context, run string, stat bool) (proto.WorkRecord, error) {
	var rec proto.WorkRecord
	err := c.Call(ctx, proto.OpWorkDiff, proto.WorkArgs{Run: run, Stat: stat}, &rec)
	return rec, err
}

// WorkView reads path ("" for the top) of the view of run's pending
// work: a folder's entries or a file's content.
func (c *Client) WorkView(ctx context.Context, run, path string) (proto.WorkView, error) {
	var v proto.WorkView
	err := c.Call(ctx, proto.OpWorkView, proto.WorkArgs{Run: run, Path: path}, &v)
	return v, err
}

// WorkApply writes run's pending work to its folder (force: over
// conflicts).
func (c *Client) WorkApply(ctx context.Context, run string, force bool) (proto.WorkRecord, error) {
	var rec proto.WorkRecord
	err := c.Call(ctx, proto.OpWorkApply, proto.WorkArgs{Run: run, Force: force}, &rec)
	return rec, err
}

// WorkDiscard throws run's pending work away.
func (c *Client) WorkDiscard(ctx context.Context, run string) (proto.WorkRecord, error) {
	var rec proto.WorkRecord
	err := c.Call(ctx, proto.OpWorkDiscard, proto.WorkArgs{Run: run}, &rec)
	return rec, err
}

// RunReceipt calls fn with each line of run's receipt, in order.
func (c *Client) RunReceipt(ctx context.Context, run string, fn func(proto.ReceiptLine) error) error {
	return c.Stream(ctx, proto.OpRunReceipt, proto.ReceiptArgs{Run: run}, streamOf(fn))
}
