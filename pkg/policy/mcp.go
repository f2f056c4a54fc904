package policy

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// MCP lists the MCP servers an agent's LLM runs may use, and which of
// their tools. A server is a command the run starts over stdio (inside
// the run, so inside its sandbox) or the URL of a streamable HTTP server.
type MCP struct {
	Servers []MCPServer `toml:"servers"`
}

// MCPServer is one [[mcp.servers]] entry.
type MCPServer struct {
	Name    string   `toml:"name" json:"name"`
	Command []string `toml:"command" json:"command,omitempty"`
	URL     string   `toml:"url" json:"url,omitempty"`
	// Env adds KEY=VALUE pairs to a command's environment.
	Env []string `toml:"env" json:"env,omitempty"`
	// Allow is the tools the agent may call, as names or globs ("read_*");
	// none: no tool.
	Allow []string `toml:"allow" json:"allow,omitempty"`
	// Timeout bounds one call (default 30s).
	Timeout Duration `toml:"timeout" json:"-"`
	// StartTimeout bounds starting the server and listing its tools
	// (default 10s).
	StartTimeout Duration `toml:"start_timeout" json:"-"`
}

// checkMCP validates the [mcp] section.
func (m *MCP) check(b []byte) error {
	seen := map[string]bool{}
	for i := range m.Servers {
		s := &m.Servers[i]
		line := lineOf(b, "[[mcp.servers]]")
		if err := CheckMCPName(s.Name); err != nil {
			return &Error{Line: line, Reason: "mcp.servers: " + err.Error()}
		}
		if seen[s.Name] {
			return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers: %q given twice", s.Name)}
		}
		seen[s.Name] = true
		if (len(s.Command) == 0) == (s.URL == "") {
			return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers %s: give a command (a stdio server) or a url, one of them", s.Name)}
		}
		if len(s.Command) > 0 && s.Command[0] == "" {
			return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers %s: the command is empty", s.Name)}
		}
		if s.URL != "" {
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers %s: url %q is not an http or https URL", s.Name, s.URL)}
			}
		}
		for _, e := range s.Env {
			if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
				return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers %s: env %q is not KEY=VALUE", s.Name, e)}
			}
		}
		for _, a := range s.Allow {
			if _, err := path.Match(a, ""); err != nil || a == "" {
				return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers %s: allow %q is not a tool name or glob", s.Name, a)}
			}
		}
		if s.Timeout < 0 || s.StartTimeout < 0 {
			return &Error{Line: line, Reason: fmt.Sprintf("mcp.servers %s: timeout and start_timeout may not be negative", s.Name)}
		}
	}
	return nil
}

// CheckMCPName reports why name is not an MCP server name: 1 to 32 of
// a-z, 0-9 and -, so that the model's function names (mcp_NAME_TOOL)
// stay short and unambiguous.
func CheckMCPName(name string) error {
	if name == "" || len(name) > 32 {
		return fmt.Errorf("server name %q: want 1 to 32 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("server name %q: byte %d (%q) not allowed; names are a-z, 0-9 and -", name, i, c)
		}
	}
	return nil
}

// CheckMCP reports whether the agent may call tool of MCP server: the
// server must be listed and the tool on its allow list.
func (p *Policy) CheckMCP(server, tool string) (*MCPServer, error) {
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		if s.Name != server {
			continue
		}
		for _, a := range s.Allow {
			if ok, _ := path.Match(a, tool); ok {
				return s, nil
			}
		}
		return nil, &Denied{Rule: "mcp.allow", Reason: fmt.Sprintf("tool %q of MCP server %s is not on its allow list", tool, server)}
	}
	return nil, &Denied{Rule: "mcp.servers", Reason: fmt.Sprintf("no MCP server %q in the policy", server)}
}

// DefaultMCPTimeout bounds one MCP call when the policy says nothing.
const DefaultMCPTimeout = 30 * time.Second

// CallTimeout bounds one call of a tool of s: its timeout, or
// DefaultMCPTimeout.
func (s *MCPServer) CallTimeout() time.Duration {
	if t := s.Timeout.D(); t > 0 {
		return t
	}
	return DefaultMCPTimeout
}

// MCPServers is p's [[mcp.servers]] as mcp.servers answers them.
func (p *Policy) MCPServers() proto.MCPServersResult {
	res := proto.MCPServersResult{Servers: []proto.MCPServerInfo{}}
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		res.Servers = append(res.Servers, proto.MCPServerInfo{Name: s.Name, Command: s.Command, URL: s.URL, Env: s.Env, Allow: s.Allow, Timeout: s.CallTimeout().Seconds(), StartTimeout: s.StartTimeout.D().Seconds()})
	}
	return res
}

// CheckMCPResult checks the server an mcp.result names and what it
// reports, and returns the result its audit entry names (ok, or the
// errno name of how the call failed).
func CheckMCPResult(a *proto.MCPResultArgs) (string, *proto.Error) {
	if err := CheckMCPName(a.Server); err != nil {
		return "", proto.Errorf(proto.EINVAL, "%v", err)
	}
	return a.Result()
}

// CheckMCPCall checks the server and tool an mcp.call names.
func CheckMCPCall(server, tool string) *proto.Error {
	if err := CheckMCPName(server); err != nil {
		return proto.Errorf(proto.EINVAL, "%v", err)
	}
	if tool == "" || len(tool) > 128 {
		return proto.Errorf(proto.EINVAL, "tool name %.20q: want 1 to 128 bytes", tool)
	}
	return nil
}
