package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
)

// The MCP servers of an LLM run (issue 23). The run starts and talks to
// them itself (a stdio server is a child of the run, so it is inside
// whatever the run is inside); the kernel decides which tool calls may be
// made, charges each to the exec budget, and audits the call with the
// digest of its arguments and then its outcome with the digest of its
// result.

// MCPServers returns the MCP servers of agent's policy.
func (k *Kernel) MCPServers(ctx context.Context, c *Cred, a proto.MCPServersArgs) (proto.MCPServersResult, error) {
	return sysMCPServers.Call(k, ctx, c, a, nil)
}

func (k *Kernel) mcpServers(_ context.Context, _ *Cred, a proto.MCPServersArgs, _ []byte) (proto.MCPServersResult, error) {
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.MCPServersResult{}, proto.AsError(err)
	}
	return p.MCPServers(), nil
}

// MCPCall authorizes one MCP tool call for a.Agent: the policy must list
// the server and allow the tool (for the admin too, as exec), and the
// exec budget must allow one more, which the call is charged. The call is
// audited with the digest of its arguments; a refusal with the rule that
// refused it, and the policy's on_violation applied to the calling run.
func (k *Kernel) MCPCall(ctx context.Context, c *Cred, a proto.MCPCallArgs, raw []byte) (proto.MCPCallRecord, error) {
	return sysMCPCall.Call(k, ctx, c, a, raw)
}

func (k *Kernel) mcpCall(ctx context.Context, c *Cred, a proto.MCPCallArgs, raw []byte) (proto.MCPCallRecord, error) {
	tgt := runspec.MCPTarget(a.Agent, a.Server, a.Tool, "")
	if err := policy.CheckMCPCall(a.Server, a.Tool); err != nil {
		return proto.MCPCallRecord{}, err
	}
	var srv *policy.MCPServer
	if err := k.enforce(c, a.Agent, proto.OpMCPCall, tgt, raw, func(p *policy.Policy) error {
		s, err := p.CheckMCP(a.Server, a.Tool)
		srv = s
		if err != nil {
			return err
		}
		return k.hook(ctx, p, c, proto.OpMCPCall, a.Agent, asking{ask: askMCP, key: a.Server, tool: a.Tool}, false)
	}); err != nil {
		return proto.MCPCallRecord{}, err
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.MCPCallRecord{}, proto.AsError(err)
	}
	if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Execs: 1}); qerr != nil {
		k.auditDenied(c, proto.OpMCPCall, tgt+" [budget]", raw, qerr.Code)
		return proto.MCPCallRecord{}, qerr
	}
	rec := runspec.MCPRecord(a.Agent, c.Run, a.Server, a.Tool, srv.CallTimeout())
	ev := rec // the event's own: rec is completed below
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpMCPCall, Target: tgt, Args: audit.ArgsDigest(raw), Result: "ok"}, data: &ev}
	if err := k.commitExec(ctx, a.Agent, k.callerRun(c, a.Agent), t); err != nil {
		return proto.MCPCallRecord{}, err
	}
	runspec.MCPAuthorized(&rec, t.entry.Seq)
	return rec, nil
}

// MCPResult audits how an authorized MCP call ended: its result's digest
// and, when it failed, the errno name saying how.
func (k *Kernel) MCPResult(ctx context.Context, c *Cred, a proto.MCPResultArgs, raw []byte) error {
	_, err := sysMCPResult.Call(k, ctx, c, a, raw)
	return err
}

func (k *Kernel) mcpResult(ctx context.Context, c *Cred, a proto.MCPResultArgs, raw []byte) (struct{}, error) {
	result, perr := policy.CheckMCPResult(&a)
	if perr != nil {
		return struct{}{}, perr
	}
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpMCPResult, Target: runspec.MCPResultTarget(&a, result), Args: audit.ArgsDigest(raw), Result: result}}
	return struct{}{}, k.submit(ctx, t, true)
}
