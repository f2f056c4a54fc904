package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpAuditLog] = handler{serve: serveAuditLog}
	handlers[proto.OpAuditShow] = handler{serve: serveAuditShow}
	handlers[proto.OpAuditHead] = handler{serve: serveAuditHead}
	handlers[proto.OpAuditVerify] = handler{serve: serveAuditVerify}
	handlers[proto.OpAuditExport] = handler{serve: serveAuditExport}
}

// optionalArgs decodes args when present: ops whose args are all optional.
func optionalArgs(req *proto.Request, v any) error {
	if len(req.Args) == 0 || string(req.Args) == "null" {
		return nil
	}
	return decodeArgs(req, v)
}

func serveAuditLog(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.AuditLogArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	if a.Follow {
		ctx = c.follow
	}
	// Entries already flow as JSON: each line is sent as the item itself.
	// A follower gets each batch as it comes, not when a buffer fills.
	err := c.s.k.AuditLog(ctx, c.cred, a, req.Args, func(line []byte) error {
		return c.sendItem(req.ID, line)
	}, func() error {
		c.flush()
		return nil
	})
	return nil, err
}

func serveAuditShow(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.AuditShowArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	line, err := c.s.k.AuditShow(ctx, c.cred, a.Seq)
	if err != nil {
		return nil, err
	}
	return line, nil
}

func serveAuditHead(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	h, err := c.s.k.AuditHead(ctx, c.cred)
	if err != nil {
		return nil, err
	}
	return marshal(&h)
}

func serveAuditVerify(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	r, err := c.s.k.AuditVerify(ctx, c.cred)
	if err != nil {
		return nil, err
	}
	return marshal(&r)
}

func serveAuditExport(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	err := c.s.k.AuditExport(ctx, c.cred, func(line []byte) error {
		return c.sendItem(req.ID, line)
	})
	return nil, err
}
