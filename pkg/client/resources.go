package client

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// Resources samples what the runs (of agent, or all the caller may see)
// use now, the host's load and the state of admission.
func (c *Client) Resources(ctx context.Context, agent string) (proto.ResourcesRecord, error) {
	var rec proto.ResourcesRecord
	err := c.Call(ctx, proto.OpResources, proto.ResourcesArgs{Agent: agent}, &rec)
	return rec, err
}

// Status describes the daemon: what it runs with, and whether it can
// write its data dir.
func (c *Client) Status(ctx context.Context) (proto.DaemonRecord, error) {
	var rec proto.DaemonRecord
	err := c.Call(ctx, proto.OpStatus, struct{}{}, &rec)
	return rec, err
}
