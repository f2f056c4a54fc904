package runspec

import (
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// The record and the audit targets of an MCP tool call of an LLM run:
// the run makes the call itself, the kernel authorizes it (mcp.call) and
// audits how it ended (mcp.result).

// MCPTarget is the target of an MCP call's audit entries.
func MCPTarget(agent, server, tool, outcome string) string {
	return agent + ":mcp " + audit.Clip(server, 32) + "/" + audit.Clip(tool, 128) + outcome
}

// MCPRecord is the record of a call of tool of server for agent (run:
// the caller's run, "" if none) bounded by timeout; MCPAuthorized
// completes it once its audit entry is durable.
func MCPRecord(agent, run, server, tool string, timeout time.Duration) proto.MCPCallRecord {
	return proto.MCPCallRecord{Type: proto.RecordMCPCall, Agent: agent, Run: run, Server: server, Tool: tool, Timeout: timeout.Seconds()}
}

// MCPAuthorized gives rec the seq of the audit entry that authorized it,
// and its text.
func MCPAuthorized(rec *proto.MCPCallRecord, seq uint64) {
	rec.Seq = seq
	rec.Text = fmt.Sprintf("mcp %s/%s authorized (audit entry %d)", rec.Server, rec.Tool, seq)
}

// MCPResultTarget is the target of the audit entry of how call a ended,
// with result (what proto.MCPResultArgs.Result says).
func MCPResultTarget(a *proto.MCPResultArgs, result string) string {
	return MCPTarget(a.Agent, a.Server, a.Tool, fmt.Sprintf(" call %d => %s result %s", a.Call, result, a.Digest[:16]))
}
