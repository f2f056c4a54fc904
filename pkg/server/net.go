package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpNetFetch] = handler{serve: serveNetFetch}
}

func serveNetFetch(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.FetchArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, c.refused(req, "fetch", err)
	}
	rec, err := c.s.k.NetFetch(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}
