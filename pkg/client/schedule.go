package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// ScheduleAdd adds a scheduled job.
func (c *Client) ScheduleAdd(ctx context.Context, a proto.ScheduleAddArgs) (proto.JobRecord, error) {
	var rec proto.JobRecord
	err := c.Call(ctx, proto.OpScheduleAdd, a, &rec)
	return rec, err
}

// ScheduleList calls fn with each job (of agent, if not empty), by name.
func (c *Client) ScheduleList(ctx context.Context, agent string, fn func(proto.JobRecord) error) error {
	return c.Stream(ctx, proto.OpScheduleList, proto.ScheduleListArgs{Agent: agent}, func(item json.RawMessage) error {
		var rec proto.JobRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// ScheduleRm removes a job and returns its last record.
func (c *Client) ScheduleRm(ctx context.Context, a proto.ScheduleArgs) (proto.JobRecord, error) {
	var rec proto.JobRecord
	err := c.Call(ctx, proto.OpScheduleRm, a, &rec)
	return rec, err
}

// ScheduleEnable enables (or with a.Disable disables) a job.
func (c *Client) ScheduleEnable(ctx context.Context, a proto.ScheduleEnableArgs) (proto.JobRecord, error) {
	var rec proto.JobRecord
	err := c.Call(ctx, proto.OpScheduleEnable, a, &rec)
	return rec, err
}

// ScheduleRun fires a job now, once, and returns the record of its run.
func (c *Client) ScheduleRun(ctx context.Context, a proto.ScheduleArgs) (proto.RunRecord, error) {
	var rec proto.RunRecord
	err := c.Call(ctx, proto.OpScheduleRun, a, &rec)
	return rec, err
}
