package client

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// NetFetch makes an HTTP request for an agent under its policy's [net].
func (c *Client) NetFetch(ctx context.Context, a proto.FetchArgs) (proto.FetchRecord, error) {
	var rec proto.FetchRecord
	err := c.Call(ctx, proto.OpNetFetch, a, &rec)
	return rec, err
}
