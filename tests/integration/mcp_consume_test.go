package integration

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// A small MCP server of our own: this test binary, started with
// OXIOS_TEST_MCP_SERVER=1, serves it on stdio and exits. Its tools: echo,
// secret (which the policy does not allow), hang (never answers, and
// ignores SIGTERM), crash (exits mid-call).
func init() {
	if os.Getenv("OXIOS_TEST_MCP_SERVER") != "1" {
		return
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "oxios-test-server", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "secret", Description: "Not for agents."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the secret"}}}, nil, nil
	})
	hung := make(chan struct{})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answers."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		signal.Ignore(syscall.SIGTERM)
		close(hung)
		select {}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Dies."}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		os.Exit(3)
		return nil, nil, nil
	})
	s.Run(context.Background(), &mcp.StdioTransport{})
	select {
	case <-hung:
		// A hung server does not leave when its input ends: only SIGKILL
		// ends it (bounded, so a broken test leaks nothing for long).
		time.Sleep(30 * time.Second)
	default:
	}
	os.Exit(0)
}

// TestMCPConsume: an LLM run calls the tools of an MCP server its policy
// lists. Each call is authorized and audited by the kernel; a tool the
// policy does not allow is refused; a server that hangs or crashes is a
// tool error and is started again for the next call; the run goes on.
func TestMCPConsume(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, s := llmDaemon(t, "",
		llmtest.Turn{ToolCalls: []llmtest.Call{call("mcp_test_echo", `{"text":"hello mcp"}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("mcp_test_secret", `{}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("mcp_test_hang", `{}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("mcp_test_echo", `{"text":"after the hang"}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("mcp_test_crash", `{}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("mcp_test_echo", `{"text":"after the crash"}`)}},
		llmtest.Turn{Content: "done"})
	// The server is this test binary: the run's sandbox shows its folder
	// read-only, as a policy would show any program it grants.
	pol := fmt.Sprintf(`[sandbox]
read_only = [%q]

[state]
read = ["**"]
write = ["**"]

[memory]
kinds = ["episodic", "semantic", "working"]

[[mcp.servers]]
name = "test"
command = [%q]
env = ["OXIOS_TEST_MCP_SERVER=1", "GORACE=atexit_sleep_ms=0"]
allow = ["echo", "hang", "crash"]
timeout = "2s"
`, filepath.Dir(self), self)
	if r := d.ox("", "ox-policy", "set", "-a", "ops", writePolicy(t, pol)); r.code != 0 {
		t.Fatalf("policy set: %+v", r)
	}
	r := d.ox("", "ox-spawn", "-a", "ops", "use the test server")
	if r.code != 0 {
		t.Fatalf("ox-spawn: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var offered []string
	for _, tl := range s.Requests()[0].Body.Tools {
		if strings.HasPrefix(tl.Function.Name, "mcp_") {
			offered = append(offered, tl.Function.Name)
		}
	}
	if strings.Join(offered, ",") != "mcp_test_crash,mcp_test_echo,mcp_test_hang" {
		t.Fatalf("MCP tools offered: %v (want the allowed ones only)", offered)
	}
	recs := records(t, r.stdout)
	var res []map[string]any
	for _, tr := range ofType(recs, "tool_result") {
		if strings.HasPrefix(tr["name"].(string), "mcp_") {
			res = append(res, tr)
		}
	}
	if len(res) != 6 {
		t.Fatalf("%d tool results, want 6:\n%s", len(res), r.stdout)
	}
	want := []struct {
		ok   bool
		code string
		text string
	}{
		{true, "", "echo: hello mcp"},
		{false, "EPERM", "mcp.allow"},
		{false, "ETIMEDOUT", "did not answer"},
		{true, "", "echo: after the hang"},
		{false, "EPIPE", "failed during crash"},
		{true, "", "echo: after the crash"},
	}
	for i, w := range want {
		got := res[i]
		isErr, _ := got["error"].(bool)
		code, _ := got["code"].(string)
		if isErr == w.ok || code != w.code || !strings.Contains(got["text"].(string), w.text) {
			t.Errorf("tool result %d: %v, want error=%v code %q text with %q", i, got, !w.ok, w.code, w.text)
		}
	}
	if ex := recs[len(recs)-1]; ex["type"] != "exit" || ex["status"] != 0.0 {
		t.Fatalf("the run did not end well: %v", ex)
	}

	// The audit log has each call with its arguments' digest, its outcome
	// with its result's digest, and the refusal with its rule.
	au := d.ox("", "ox-audit", "log", "-a", "ops", "--json").stdout
	for _, w := range []string{
		`"op":"mcp.call","target":"ops:mcp test/echo"`,
		`"op":"mcp.call","target":"ops:mcp test/secret [mcp.allow]"`,
		`"result":"ETIMEDOUT"`, `"result":"EPIPE"`,
		`"op":"mcp.result","target":"ops:mcp test/echo call `,
	} {
		if !strings.Contains(au, w) {
			t.Errorf("audit log lacks %s:\n%s", w, au)
		}
	}
	if n := strings.Count(au, `"op":"mcp.call"`); n != 6 {
		t.Errorf("%d mcp.call entries, want 6 (5 authorized, 1 refused)", n)
	}
	// Each call counts against the exec budget.
	if b := d.ox("", "ox-budget", "show", "-a", "ops", "--json").stdout; !strings.Contains(b, `"execs":5`) {
		t.Errorf("exec budget after 5 MCP calls: %s", b)
	}
	verifyAudit(t, d)
}
