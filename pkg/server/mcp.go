package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpMCPServers] = handler{serve: serveMCPServers}
	handlers[proto.OpMCPCall] = handler{serve: serveMCPCall}
	handlers[proto.OpMCPResult] = handler{serve: serveMCPResult}
}

func serveMCPServers(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MCPServersArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	res, err := c.s.k.MCPServers(ctx, c.cred, a)
	if err != nil {
		return nil, err
	}
	return marshal(&res)
}

func serveMCPCall(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MCPCallArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, c.refused(req, "mcp", err)
	}
	rec, err := c.s.k.MCPCall(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveMCPResult(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MCPResultArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, c.refused(req, "mcp", err)
	}
	if err := c.s.k.MCPResult(ctx, c.cred, a, req.Args); err != nil {
		return nil, err
	}
	return []byte(`{}`), nil
}
