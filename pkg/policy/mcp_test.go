package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestMCPPolicy(t *testing.T) {
	p, err := Parse([]byte("[[mcp.servers]]\nname = \"files\"\ncommand = [\"mcp-files\", \"--root\", \".\"]\nallow = [\"read_*\", \"list\"]\ntimeout = \"5s\"\n\n[[mcp.servers]]\nname = \"web\"\nurl = \"https://mcp.example.com/mcp\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := p.CheckMCP("files", "read_file"); err != nil || s.Timeout.D().Seconds() != 5 {
		t.Fatalf("read_file: %v", err)
	}
	var d *Denied
	if _, err := p.CheckMCP("files", "write_file"); !errors.As(err, &d) || d.Rule != "mcp.allow" {
		t.Fatalf("write_file: %v", err)
	}
	if _, err := p.CheckMCP("web", "anything"); !errors.As(err, &d) || d.Rule != "mcp.allow" {
		t.Fatalf("a server with no allow list allowed a tool: %v", err)
	}
	if _, err := p.CheckMCP("nope", "x"); !errors.As(err, &d) || d.Rule != "mcp.servers" {
		t.Fatalf("unlisted server: %v", err)
	}
	for in, want := range map[string]string{
		"[[mcp.servers]]\nname = \"a\"\n":                                                                      "one of them",
		"[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nurl = \"http://h/\"\n":                              "one of them",
		"[[mcp.servers]]\nname = \"A_b\"\ncommand = [\"x\"]\n":                                                 "not allowed",
		"[[mcp.servers]]\nname = \"a\"\nurl = \"file:///etc/passwd\"\n":                                        "not an http",
		"[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nallow = [\"[\"]\n":                                  "glob",
		"[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nenv = [\"NOEQ\"]\n":                                 "KEY=VALUE",
		"[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\n[[mcp.servers]]\nname = \"a\"\ncommand = [\"y\"]\n": "twice",
		"[[mcp.servers]]\nname = \"a\"\ncommand = [\"x\"]\nalow = [\"x\"]\n":                                   "unknown key",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want %q", in, err, want)
		}
	}
}

func TestMCPServersTimeoutsAndCallChecks(t *testing.T) {
	p, err := Parse([]byte("[[mcp.servers]]\nname = \"files\"\ncommand = [\"mcp-files\"]\nallow = [\"read_*\"]\ntimeout = \"5s\"\n\n[[mcp.servers]]\nname = \"web\"\nurl = \"https://mcp.example.com/mcp\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	res := p.MCPServers()
	if len(res.Servers) != 2 || res.Servers[0].Timeout != 5 || res.Servers[0].Allow[0] != "read_*" || res.Servers[1].Timeout != DefaultMCPTimeout.Seconds() || res.Servers[1].URL == "" {
		t.Fatalf("%+v", res)
	}
	empty, _ := Parse(nil)
	if res := empty.MCPServers(); res.Servers == nil || len(res.Servers) != 0 {
		t.Fatalf("no servers is an empty list, not null: %+v", res)
	}
	if err := CheckMCPCall("files", "read_file"); err != nil {
		t.Fatal(err)
	}
	if err := CheckMCPCall("A_b", "x"); err == nil || err.Code != "EINVAL" || !strings.Contains(err.Message, "not allowed") {
		t.Fatal(err)
	}
	if err := CheckMCPCall("files", strings.Repeat("x", 129)); err == nil || !strings.Contains(err.Message, "want 1 to 128 bytes") {
		t.Fatal(err)
	}
}

func TestCheckMCPResult(t *testing.T) {
	a := proto.MCPResultArgs{Agent: "ops", Server: "git", Tool: "status", Call: 3, Digest: strings.Repeat("ab", 32)}
	if got, err := CheckMCPResult(&a); err != nil || got != "ok" {
		t.Fatal(got, err)
	}
	a.Error = proto.ETIMEDOUT
	if got, err := CheckMCPResult(&a); err != nil || got != proto.ETIMEDOUT {
		t.Fatal(got, err)
	}
	a.Server = "bad name"
	if _, err := CheckMCPResult(&a); err == nil || err.Code != proto.EINVAL {
		t.Fatal(err)
	}
}
