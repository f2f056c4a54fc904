package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpResources] = handler{serve: serveResources}
	handlers[proto.OpStatus] = handler{serve: serveStatus}
}

func serveResources(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ResourcesArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.Resources(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveStatus(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	rec := c.s.k.Status(ctx, c.cred)
	return marshal(&rec)
}
