package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// inspector finds the official MCP Inspector's command: $OXIOS_MCP_INSPECTOR,
// or mcp-inspector on PATH (npm install -g @modelcontextprotocol/inspector).
// The test does not fetch it: without it (no Node, no network) it skips.
func inspector(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OXIOS_MCP_INSPECTOR"); p != "" {
		return p
	}
	p, err := exec.LookPath("mcp-inspector")
	if err != nil {
		t.Skip("no MCP Inspector: npm install -g @modelcontextprotocol/inspector, or set OXIOS_MCP_INSPECTOR")
	}
	return p
}

// TestMCPInspector lists and calls the tools of ox-mcp, and reads a
// resource, with the official MCP Inspector's CLI mode (the TypeScript
// SDK's client).
func TestMCPInspector(t *testing.T) {
	t.Parallel()
	insp := inspector(t)
	d := startDaemon(t, daemonOpts{})
	d.ox("", "ox-state", "save", "-a", "ops", "notes/today.md", "from the shell")
	wantErr := false
	cli := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// The server's command comes first, the method's options after it:
		// --tool-arg takes every word that follows it, so a command after
		// it would be read as one more key=value pair. The agent comes from
		// the environment for the same reason (an -a after the command
		// would be the inspector's unknown option).
		all := []string{"--cli", "-e", "OXIOS_SOCKET=" + d.sock, "-e", "OXIOS_AGENT=ops", bin("ox-mcp")}
		all = append(all, args...)
		out, err := exec.CommandContext(ctx, insp, all...).CombinedOutput()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && wantErr) {
			t.Fatalf("mcp-inspector %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	out := cli("--method", "tools/list")
	for _, tool := range []string{`"state_read"`, `"state_write"`, `"recall"`, `"spawn"`, `"audit_verify"`} {
		if !strings.Contains(out, tool) {
			t.Errorf("tools/list lacks %s:\n%.2000s", tool, out)
		}
	}
	out = cli("--method", "tools/call", "--tool-name", "state_write", "--tool-arg", "key=notes/inspector", "value=from the inspector")
	if !strings.Contains(out, `notes/inspector`) || strings.Contains(out, `"isError": true`) {
		t.Fatalf("tools/call state_write:\n%s", out)
	}
	if r := d.ox("", "ox-state", "load", "-a", "ops", "notes/inspector"); r.stdout != "from the inspector" {
		t.Fatalf("the inspector's write: %+v", r)
	}
	out = cli("--method", "resources/read", "--uri", "oxios://ops/state/notes/today.md")
	if !strings.Contains(out, "from the shell") {
		t.Fatalf("resources/read:\n%s", out)
	}
	// A tool error: the inspector exits non-zero and prints the result.
	wantErr = true
	out = cli("--method", "tools/call", "--tool-name", "state_read", "--tool-arg", "key=../etc/passwd")
	if !strings.Contains(out, "EINVAL") || !strings.Contains(out, `"isError": true`) {
		t.Fatalf("a bad key through the inspector:\n%s", out)
	}
	verifyAudit(t, d)
}
