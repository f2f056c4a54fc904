package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func serveHello(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.HelloArgs
	if len(req.Args) > 0 {
		if err := decodeArgs(req, &a); err != nil {
			return nil, err
		}
		if a.Proto != 0 && a.Proto != proto.Version {
			return nil, proto.Errorf(proto.EPROTO, "client speaks protocol %d, oxiosd speaks %d", a.Proto, proto.Version)
		}
	}
	h := c.s.k.Hello(c.cred)
	return marshal(&h)
}

func serveStateSave(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.StateSaveArgs
	if !fastSaveArgs(req.Args, &a) {
		a = proto.StateSaveArgs{}
		if err := decodeArgs(req, &a); err != nil {
			return nil, err
		}
	}
	rec, err := c.s.k.StateSave(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return proto.AppendStateRecord(nil, &rec), nil
}

func serveStateDelete(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.StateArgs
	if err := stateArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.StateDelete(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return proto.AppendStateRecord(nil, &rec), nil
}

func serveStateLoad(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.StateArgs
	if err := stateArgs(req, &a); err != nil {
		return nil, err
	}
	v, rec, err := c.s.k.StateLoad(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	val, enc := proto.EncodeValue(v)
	rec.Value, rec.Encoding = &val, enc
	return proto.AppendStateRecord(make([]byte, 0, 160+len(val)), &rec), nil
}

func serveStateList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.StateListArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	var buf []byte
	err := c.s.k.StateList(ctx, c.cred, a, req.Args, func(r *proto.StateRecord) error {
		buf = proto.AppendStateRecord(buf[:0], r)
		return c.sendItem(req.ID, buf)
	})
	return nil, err
}

// stateArgs decodes the args of state.load and state.delete: the fast
// path, or encoding/json with its error messages.
func stateArgs(req *proto.Request, a *proto.StateArgs) error {
	if fastStateArgs(req.Args, a) {
		return nil
	}
	*a = proto.StateArgs{}
	return decodeArgs(req, a)
}
