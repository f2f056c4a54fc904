package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// Events calls fn with each record of an event subscription ("event" and
// "lost" records, as sent). It returns only when ctx ends, fn fails or the
// connection does.
func (c *Client) Events(ctx context.Context, a proto.EventsArgs, fn func(rec json.RawMessage) error) error {
	return c.Stream(ctx, proto.OpEvents, a, fn)
}
