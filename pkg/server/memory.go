package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpMemRemember] = handler{serve: serveMemRemember}
	handlers[proto.OpMemRecall] = handler{serve: serveMemRecall}
	handlers[proto.OpMemForget] = handler{serve: serveMemForget}
	handlers[proto.OpMemList] = handler{serve: serveMemList}
}

func serveMemRemember(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MemRememberArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	res, err := c.s.k.MemRemember(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&res)
}

func serveMemRecall(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MemRecallArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	err := c.s.k.MemRecall(ctx, c.cred, a, req.Args, func(rec *proto.MemoryRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
	return nil, err
}

// serveMemForget streams the forgotten memories' records: forget is one
// commit, and its result may be long (--before).
func serveMemForget(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MemForgetArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	recs, err := c.s.k.MemForget(ctx, c.cred, a, req.Args)
	for i := range recs {
		b, merr := marshal(&recs[i])
		if merr != nil {
			return nil, merr
		}
		if serr := c.sendItem(req.ID, b); serr != nil {
			return nil, serr
		}
	}
	return nil, err
}

func serveMemList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MemListArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	err := c.s.k.MemList(ctx, c.cred, a, req.Args, func(rec *proto.MemoryRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
	return nil, err
}
