package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpEvents] = handler{serve: serveEvents}
}

// serveEvents streams events until the client closes its side of the
// connection or the daemon stops; each record is flushed as it comes.
func serveEvents(_ context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.EventsArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	err := c.s.k.Events(c.follow, c.cred, a, req.Args, func(rec any) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	}, func() error {
		c.flush()
		return nil
	})
	return nil, err
}
