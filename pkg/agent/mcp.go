package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/mcpbridge"
	"github.com/oxios/oxios/pkg/proto"
)

// MCPKernel is what a Kernel offers when its agent may use MCP servers:
// the servers of the agent's policy, and the kernel's say on each call.
// It is a separate interface so that a Kernel without it runs with no
// MCP tools.
type MCPKernel interface {
	MCPServers(ctx context.Context) ([]proto.MCPServerInfo, error)
	mcpbridge.Authorizer
}

var _ MCPKernel = (*Client)(nil)

func (c *Client) MCPServers(ctx context.Context) ([]proto.MCPServerInfo, error) {
	return c.C.MCPServers(ctx, c.Agent)
}

func (c *Client) MCPCall(ctx context.Context, a proto.MCPCallArgs) (proto.MCPCallRecord, error) {
	a.Agent = c.Agent
	return c.C.MCPCall(ctx, a)
}

func (c *Client) MCPResult(ctx context.Context, a proto.MCPResultArgs) error {
	a.Agent = c.Agent
	return c.C.MCPResult(ctx, a)
}

// mcpTools starts the MCP servers of the agent's policy (stdio ones as
// children of this run, in its workspace, so inside whatever confines
// the run) and returns the tools their allow lists name. A server that
// does not start is left out with a line on stderr; the run goes on.
func (r *Runner) mcpTools(ctx context.Context) []openai.Tool {
	mk, ok := r.k.(MCPKernel)
	if !ok {
		return nil
	}
	infos, err := mk.MCPServers(ctx)
	if err != nil || len(infos) == 0 {
		return nil
	}
	dir, _ := os.Getwd()
	pool, errs := mcpbridge.Open(ctx, infos, mk, mcpbridge.Options{Dir: dir, Stderr: os.Stderr})
	for _, err := range errs {
		// On the record, not only on stderr: the run goes on without the
		// server's tools, and whoever reads its log learns why.
		r.emit(&proto.ToolResultRecord{Type: proto.RecordToolResult, Name: "mcp", Error: true,
			Text: fmt.Sprintf("an MCP server did not start, and its tools are not offered: %v (start_timeout of its [[mcp.servers]] in the policy)", err)})
	}
	r.mcp = pool
	var out []openai.Tool
	for _, t := range pool.Tools() {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name:        t.Func,
			Description: "Tool " + t.Name + " of the MCP server " + t.Server + ". " + t.Description,
			Parameters:  t.Schema,
		}})
	}
	return out
}

// callMCP calls an MCP tool: a syscall authorizes it, the call is bounded
// by the policy's timeout, and its result is audited. Any failure of the
// server is an error for the model, never the end of the run.
func (r *Runner) callMCP(ctx context.Context, name, args string) (string, error) {
	if r.mcp == nil {
		return "", toolErrorf("no tool %q: this run has no MCP servers", name)
	}
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	out, err := r.mcp.Call(ctx, name, json.RawMessage(args))
	var ce *mcpbridge.CallError
	if errors.As(err, &ce) {
		return "", proto.Errorf(ce.Code, "%s", ce.Msg)
	}
	if err != nil {
		return "", err
	}
	return clip(out), nil
}

func (r *Runner) closeMCP() {
	if r.mcp != nil {
		r.mcp.Close()
	}
}
