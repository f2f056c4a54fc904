package client

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// MCPServers returns the MCP servers of an agent's policy.
func (c *Client) MCPServers(ctx context.Context, agent string) ([]proto.MCPServerInfo, error) {
	var res proto.MCPServersResult
	err := c.Call(ctx, proto.OpMCPServers, proto.MCPServersArgs{Agent: agent}, &res)
	return res.Servers, err
}

// MCPCall asks the kernel to authorize (and charge, and audit) one call
// of an MCP tool: a *proto.Error (EPERM, EDQUOT) if it may not be made.
func (c *Client) MCPCall(ctx context.Context, a proto.MCPCallArgs) (proto.MCPCallRecord, error) {
	var rec proto.MCPCallRecord
	err := c.Call(ctx, proto.OpMCPCall, a, &rec)
	return rec, err
}

// MCPResult audits how an authorized MCP call ended.
func (c *Client) MCPResult(ctx context.Context, a proto.MCPResultArgs) error {
	return c.Call(ctx, proto.OpMCPResult, a, nil)
}
