package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpCommit] = handler{serve: serveCommit}
	handlers[proto.OpCommitLog] = handler{serve: serveCommitLog}
	handlers[proto.OpCommitShow] = handler{serve: serveCommitShow}
	handlers[proto.OpCommitDiff] = handler{serve: serveCommitDiff}
	handlers[proto.OpCommitTag] = handler{serve: serveCommitTag}
	handlers[proto.OpCommitRestore] = handler{serve: serveCommitRestore}
}

func serveCommit(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.CommitArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.Commit(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveCommitLog(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.CommitLogArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	err := c.s.k.CommitLog(ctx, c.cred, a, req.Args, func(rec *proto.CommitRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
	return nil, err
}

func serveCommitShow(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.CommitShowArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.CommitShow(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveCommitDiff(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.CommitDiffArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	err := c.s.k.CommitDiff(ctx, c.cred, a, req.Args, func(rec *proto.DiffRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
	return nil, err
}

func serveCommitTag(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.CommitTagArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.CommitTag(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveCommitRestore(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.CommitRestoreArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.CommitRestore(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}
