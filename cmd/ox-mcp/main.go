// Command ox-mcp serves an agent's syscalls, state and memory to MCP
// clients. See ox-mcp(1).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/mcpbridge"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-mcp", "serve an agent to MCP clients (Model Context Protocol)")
	app.Version = version
	app.Description = "Speaks MCP on stdin and stdout (or streamable HTTP with --http): the agent's syscalls are tools, its state keys and memories resources. Every call is a syscall of oxiosd under your identity, checked against the agent's policy and audited."
	app.Flags = []cli.Flag{
		cliutil.AgentFlag, cliutil.SocketFlag,
		&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP on `ADDR` (unix:PATH, or a loopback HOST:PORT) instead of stdio"},
	}
	app.Action = serve
	cliutil.Run(app)
}

func serve(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	sock := c.String("socket")
	s, err := mcpbridge.NewServer(c.Context, mcpbridge.Config{
		Agent: agent, Version: version,
		Dial: func(ctx context.Context) (*client.Client, error) { return client.Dial(ctx, sock) },
	})
	if err != nil {
		return err
	}
	defer s.Close()
	addr := c.String("http")
	if addr == "" {
		// stdout is the protocol's: diagnostics go to stderr only.
		err := s.Run(c.Context, &mcp.StdioTransport{})
		if c.Context.Err() != nil {
			return nil
		}
		return err
	}
	l, err := mcpbridge.Listen(addr)
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	token := ""
	if l.Addr().Network() == "tcp" {
		token = os.Getenv("OXIOS_MCP_TOKEN")
		if token == "" {
			token = mcpbridge.NewToken()
			fmt.Fprintf(os.Stderr, "ox-mcp: bearer token %s (send it as Authorization: Bearer TOKEN; set OXIOS_MCP_TOKEN to choose it)\n", token)
		}
	}
	fmt.Fprintf(os.Stderr, "ox-mcp: serving agent %s on %s\n", agent, l.Addr())
	return s.ServeHTTP(c.Context, l, token)
}
