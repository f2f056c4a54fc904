package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpScheduleAdd] = handler{serve: serveScheduleAdd}
	handlers[proto.OpScheduleList] = handler{serve: serveScheduleList}
	handlers[proto.OpScheduleRm] = handler{serve: serveScheduleRm}
	handlers[proto.OpScheduleRun] = handler{serve: serveScheduleRun}
}

func serveScheduleAdd(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ScheduleAddArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.ScheduleAdd(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveScheduleList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ScheduleListArgs
	if len(req.Args) > 0 {
		if err := decodeArgs(req, &a); err != nil {
			return nil, err
		}
	}
	return nil, c.s.k.ScheduleList(ctx, c.cred, a, req.Args, func(rec *proto.JobRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
}

func serveScheduleRm(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ScheduleArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.ScheduleRm(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

// serveScheduleRun fires a job now; the reply is the run record.
func serveScheduleRun(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ScheduleArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.ScheduleRun(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}
