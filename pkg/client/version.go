package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// Commit commits the uncommitted state of an agent ("" for all).
func (c *Client) Commit(ctx context.Context, a proto.CommitArgs) (proto.CommitRecord, error) {
	var rec proto.CommitRecord
	err := c.Call(ctx, proto.OpCommit, a, &rec)
	return rec, err
}

// CommitLog calls fn with each commit that changed the agent (or
// anything), newest first.
func (c *Client) CommitLog(ctx context.Context, a proto.CommitLogArgs, fn func(proto.CommitRecord) error) error {
	return c.Stream(ctx, proto.OpCommitLog, a, func(item json.RawMessage) error {
		var rec proto.CommitRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// CommitShow returns one commit.
func (c *Client) CommitShow(ctx context.Context, a proto.CommitShowArgs) (proto.CommitRecord, error) {
	var rec proto.CommitRecord
	err := c.Call(ctx, proto.OpCommitShow, a, &rec)
	return rec, err
}

// CommitDiff calls fn with each path that differs.
func (c *Client) CommitDiff(ctx context.Context, a proto.CommitDiffArgs, fn func(proto.DiffRecord) error) error {
	return c.Stream(ctx, proto.OpCommitDiff, a, func(item json.RawMessage) error {
		var rec proto.DiffRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// CommitTag names a commit.
func (c *Client) CommitTag(ctx context.Context, a proto.CommitTagArgs) (proto.CommitRecord, error) {
	var rec proto.CommitRecord
	err := c.Call(ctx, proto.OpCommitTag, a, &rec)
	return rec, err
}

// CommitRestore makes an agent's state equal to a commit's and commits it.
func (c *Client) CommitRestore(ctx context.Context, a proto.CommitRestoreArgs) (proto.CommitRecord, error) {
	var rec proto.CommitRecord
	err := c.Call(ctx, proto.OpCommitRestore, a, &rec)
	return rec, err
}
