package proto

import (
	"encoding/json"
	"regexp"
)

// Ops of the MCP servers an LLM run uses (issue 23). The run talks to
// the servers itself; the kernel says which it may use, authorizes and
// charges each call before it is made, and audits it and its result.
const (
	// OpMCPServers returns the MCP servers of an agent's policy.
	OpMCPServers = "mcp.servers"
	// OpMCPCall authorizes one tool call: the policy must list the server
	// and allow the tool, the exec budget must allow one more. It is
	// audited with the digest of the call's arguments.
	OpMCPCall = "mcp.call"
	// OpMCPResult audits how an authorized call ended, with the digest of
	// its result.
	OpMCPResult = "mcp.result"
)

// RecordMCPCall is the record type of MCPCallRecord.
const RecordMCPCall = "mcp_call"

// MCPServersArgs are the args of mcp.servers.
type MCPServersArgs struct {
	Agent string `json:"agent"`
}

// MCPServerInfo is an [[mcp.servers]] entry of a policy.
type MCPServerInfo struct {
	Name    string   `json:"name"`
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
	Env     []string `json:"env,omitempty"`
	Allow   []string `json:"allow,omitempty"`
	Timeout float64  `json:"timeout"` // seconds
	// StartTimeout bounds starting the server and listing its tools
	// (seconds; 0: the runner's default).
	StartTimeout float64 `json:"start_timeout,omitempty"`
}

// MCPServersResult is the reply of mcp.servers.
type MCPServersResult struct {
	Servers []MCPServerInfo `json:"servers"`
}

// MCPCallArgs are the args of mcp.call. Arguments are the tool's, as the
// model gave them; only their digest is kept.
type MCPCallArgs struct {
	Agent     string          `json:"agent"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// MCPCallRecord is the "mcp_call" record: an authorized call. Seq is its
// audit entry, which mcp.result names; Timeout (seconds) is the policy's
// bound on the call.
type MCPCallRecord struct {
	Type    string  `json:"type"` // always "mcp_call"
	Agent   string  `json:"agent"`
	Run     string  `json:"run,omitempty"`
	Server  string  `json:"server"`
	Tool    string  `json:"tool"`
	Seq     uint64  `json:"seq"`
	Timeout float64 `json:"timeout"`
	Text    string  `json:"text"`
}

// MCPResultArgs are the args of mcp.result: how call Call ended. Digest
// is the hex BLAKE3-256 of the result as the model was given it; Error
// is an errno name when the call failed (ETIMEDOUT: the server hung;
// EPIPE: it went away; EIO: it answered with an error).
type MCPResultArgs struct {
	Agent    string  `json:"agent"`
	Server   string  `json:"server"`
	Tool     string  `json:"tool"`
	Call     uint64  `json:"call"`
	Digest   string  `json:"digest"`
	Error    string  `json:"error,omitempty"`
	Duration float64 `json:"duration"` // seconds
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Result checks a's tool, call, digest and error (its server's name is
// the policy's to check) and returns the result its audit entry has: "ok",
// or the errno name of how the call failed.
func (a *MCPResultArgs) Result() (string, *Error) {
	if a.Tool == "" || len(a.Tool) > 128 || a.Call == 0 {
		return "", Errorf(EINVAL, "mcp.result names the tool and the call (the seq mcp.call returned)")
	}
	if !hexDigest.MatchString(a.Digest) {
		return "", Errorf(EINVAL, "digest %.20q: want the hex BLAKE3-256 of the result", a.Digest)
	}
	switch a.Error {
	case "":
		return "ok", nil
	case ETIMEDOUT, EIO, EPROTO, "EPIPE", ECANCELED:
		return a.Error, nil
	}
	return "", Errorf(EINVAL, "error %.20q: want ETIMEDOUT, EPIPE, EIO, EPROTO or ECANCELED", a.Error)
}
