package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpToolRun] = handler{serve: serveToolRun}
	handlers[proto.OpToolList] = handler{serve: serveToolList}
}

func serveToolRun(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ToolRunArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, c.refused(req, "tool", err)
	}
	rec, err := c.s.k.ToolRun(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveToolList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ToolListArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.ToolList(ctx, c.cred, a, func(rec *proto.ToolInfoRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
}
