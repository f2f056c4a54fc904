package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oxios/oxios/pkg/proto"
)

// mcpSession connects the official Go SDK client to `ox-mcp -a agent`
// over stdio, started with cred (nil: as us, the admin).
type mcpSession struct {
	*mcp.ClientSession
	updated     chan string
	listChanged chan struct{}
}

func (d *daemon) mcpConnect(t *testing.T, agent string, cred *syscall.Credential) *mcpSession {
	t.Helper()
	cmd := exec.Command(bin("ox-mcp"), "-a", agent)
	cmd.Env = []string{"OXIOS_SOCKET=" + d.sock, "PATH=/usr/bin:/bin", "GORACE=" + os.Getenv("GORACE")}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cmd.Stderr = os.Stderr
	return mcpDial(t, &mcp.CommandTransport{Command: cmd})
}

func mcpDial(t *testing.T, tr mcp.Transport) *mcpSession {
	t.Helper()
	s := &mcpSession{updated: make(chan string, 64), listChanged: make(chan struct{}, 64)}
	c := mcp.NewClient(&mcp.Implementation{Name: "oxios-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			s.updated <- r.Params.URI
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			select {
			case s.listChanged <- struct{}{}:
			default:
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connecting to ox-mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	s.ClientSession = cs
	return s
}

// call calls a tool and returns its text and whether it was a tool error.
func (s *mcpSession) call(t *testing.T, name string, args any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func (s *mcpSession) mustCall(t *testing.T, name string, args any) string {
	t.Helper()
	out, isErr := s.call(t, name, args)
	if isErr {
		t.Fatalf("%s %v: tool error %s", name, args, out)
	}
	return out
}

func (s *mcpSession) resourceURIs(t *testing.T) []string {
	t.Helper()
	var uris []string
	for r, err := range s.Resources(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		uris = append(uris, r.URI)
	}
	return uris
}

// TestMCPServe drives ox-mcp with the official Go SDK client: the tools
// are the agent's syscalls, its keys and memories resources, and a change
// made by someone else reaches a subscribed client.
func TestMCPServe(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.ox("", "ox-state", "save", "-a", "ops", "notes/before.md", "there before")
	s := d.mcpConnect(t, "ops", nil)
	ctx := context.Background()

	var names []string
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.InputSchema == nil {
			t.Errorf("tool %s has no input schema", tool.Name)
		}
	}
	for _, want := range []string{"state_read", "state_write", "state_list", "state_delete", "remember", "recall", "forget",
		"spawn", "ps", "wait", "kill", "commit", "log", "diff", "restore", "audit_log", "audit_verify"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	out := s.mustCall(t, "state_write", map[string]any{"key": "notes/mcp.md", "value": "from an MCP client"})
	if !strings.Contains(out, `"key":"notes/mcp.md"`) {
		t.Fatalf("state_write: %s", out)
	}
	if r := d.ox("", "ox-state", "load", "-a", "ops", "notes/mcp.md"); r.stdout != "from an MCP client" {
		t.Fatalf("the MCP write is not in the agent's state: %+v", r)
	}
	if out := s.mustCall(t, "state_read", map[string]any{"key": "notes/before.md"}); !strings.Contains(out, `"value":"there before"`) {
		t.Fatalf("state_read: %s", out)
	}
	// Bad input is a tool error naming the problem, and nothing is done.
	if out, isErr := s.call(t, "state_write", map[string]any{"key": "../escape", "value": "x"}); !isErr || !strings.Contains(out, "EINVAL") {
		t.Fatalf("state_write ../escape: error=%v %s", isErr, out)
	}
	if out, isErr := s.call(t, "state_read", map[string]any{"key": "no/such"}); !isErr || !strings.Contains(out, "ENOENT") {
		t.Fatalf("state_read of a missing key: error=%v %s", isErr, out)
	}
	if _, isErr := s.call(t, "state_write", map[string]any{"key": "k"}); !isErr {
		t.Fatalf("state_write without a value was accepted")
	}

	// Resources: the keys listed before and since, readable by URI.
	before := "oxios://ops/state/notes/before.md"
	waitFor(t, "the written key listed as a resource", func() bool {
		return slices.Contains(s.resourceURIs(t), "oxios://ops/state/notes/mcp.md")
	})
	if uris := s.resourceURIs(t); !slices.Contains(uris, before) {
		t.Fatalf("resources/list lacks %s: %v", before, uris)
	}
	rr, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: before})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "there before" {
		t.Fatalf("resources/read %s: %v %+v", before, err, rr)
	}
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "oxios://other/state/notes/before.md"}); err == nil {
		t.Fatal("read a resource of another agent through the bridge of ops")
	}
	if _, err := s.ReadResource(ctx, &mcp.ReadResourceParams{URI: "oxios://ops/state/no/such"}); err == nil {
		t.Fatal("read a key that does not exist")
	}

	// Subscriptions: a save by another client is announced.
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: before}); err != nil {
		t.Fatal(err)
	}
	d.ox("", "ox-state", "save", "-a", "ops", "notes/before.md", "changed by the shell")
	select {
	case uri := <-s.updated:
		if uri != before {
			t.Fatalf("notified of %s, want %s", uri, before)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no resources/updated after the key changed")
	}
	rr, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: before})
	if err != nil || rr.Contents[0].Text != "changed by the shell" {
		t.Fatalf("re-read after the notification: %v %+v", err, rr)
	}

	// Memories: remember, then the memory is a resource and recallable.
	out = s.mustCall(t, "remember", map[string]any{"text": "the deploy key rotates on fridays", "tags": []string{"ops"}})
	var mem proto.MemoryRecord
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &mem); err != nil || mem.ID == "" {
		t.Fatalf("remember: %v %s", err, out)
	}
	muri := "oxios://ops/memory/" + mem.ID
	waitFor(t, "the memory listed", func() bool { return slices.Contains(s.resourceURIs(t), muri) })
	rr, err = s.ReadResource(ctx, &mcp.ReadResourceParams{URI: muri})
	if err != nil || !strings.Contains(rr.Contents[0].Text, "fridays") {
		t.Fatalf("read memory: %v %+v", err, rr)
	}
	if out := s.mustCall(t, "recall", map[string]any{"query": "deploy key rotation"}); !strings.Contains(out, mem.ID) {
		t.Fatalf("recall: %s", out)
	}
	s.mustCall(t, "forget", map[string]any{"ids": []string{mem.ID}})
	waitFor(t, "the forgotten memory unlisted", func() bool { return !slices.Contains(s.resourceURIs(t), muri) })

	// Versions: commit, change, diff, restore.
	c := s.mustCall(t, "commit", map[string]any{"message": "via mcp", "tag": "mcp-1"})
	if !strings.Contains(c, `"type":"commit"`) {
		t.Fatalf("commit: %s", c)
	}
	s.mustCall(t, "state_write", map[string]any{"key": "notes/later.md", "value": "after the commit"})
	if out := s.mustCall(t, "diff", map[string]any{"from": "mcp-1"}); !strings.Contains(out, "notes/later.md") {
		t.Fatalf("diff: %s", out)
	}
	if out := s.mustCall(t, "log", map[string]any{}); !strings.Contains(out, "via mcp") {
		t.Fatalf("log: %s", out)
	}
	s.mustCall(t, "restore", map[string]any{"rev": "mcp-1"})
	if r := d.ox("", "ox-state", "load", "-a", "ops", "notes/later.md"); r.code == 0 {
		t.Fatalf("restore left notes/later.md: %+v", r)
	}
	waitFor(t, "the restored-away key unlisted", func() bool {
		return !slices.Contains(s.resourceURIs(t), "oxios://ops/state/notes/later.md")
	})

	// Runs: spawn a command, wait for it; a run of another agent is not
	// this bridge's to kill or wait for.
	out = s.mustCall(t, "spawn", map[string]any{"command": []string{"/bin/sh", "-c", "exit 3"}})
	var run proto.RunRecord
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &run); err != nil || run.ID == "" {
		t.Fatalf("spawn: %v %s", err, out)
	}
	if out := s.mustCall(t, "wait", map[string]any{"runs": []string{run.ID}}); !strings.Contains(out, `"status":3`) {
		t.Fatalf("wait: %s", out)
	}
	if out := s.mustCall(t, "ps", map[string]any{"all": true}); !strings.Contains(out, run.ID) {
		t.Fatalf("ps: %s", out)
	}
	other := d.ox("", "ox-spawn", "-a", "dev", "-d", "--json", "--", "/bin/sleep", "30")
	var orun proto.RunRecord
	if err := json.Unmarshal([]byte(strings.TrimSpace(other.stdout)), &orun); err != nil {
		t.Fatalf("spawn dev: %v %+v", err, other)
	}
	t.Cleanup(func() { d.ox("", "ox-kill", "-s", "KILL", orun.ID) })
	if out, isErr := s.call(t, "kill", map[string]any{"runs": []string{orun.ID}, "signal": "KILL"}); !isErr || !strings.Contains(out, "ESRCH") {
		t.Fatalf("killed a run of another agent: error=%v %s", isErr, out)
	}

	// Every MCP call was a syscall on the audit log, and the chain holds.
	au := s.mustCall(t, "audit_log", map[string]any{"op": "state.save"})
	if !strings.Contains(au, "ops:notes/mcp.md") {
		t.Fatalf("audit_log lacks the MCP save: %s", au)
	}
	if out := s.mustCall(t, "audit_verify", map[string]any{}); !strings.Contains(out, `"ok":true`) {
		t.Fatalf("audit_verify: %s", out)
	}
	verifyAudit(t, d)
}

// TestMCPServeIdentity: ox-mcp acts with the identity of whoever started
// it: a user granted web-* reaches web-1 under web-1's policy, and
// neither ops nor a key its policy forbids.
func TestMCPServeIdentity(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run ox-mcp as another uid")
	}
	const nobody = 65534
	d := startDaemon(t, daemonOpts{config: fmt.Sprintf("socket_group = \"%d\"\n[access.users]\n\"%d\" = [\"web-*\"]\n", nobody, nobody)})
	os.Chmod(d.dir, 0o755)
	if r := d.ox("", "ox-policy", "set", "-a", "web-1", writePolicy(t, "[state]\nread = [\"**\"]\nwrite = [\"notes/**\"]\n")); r.code != 0 {
		t.Fatalf("policy set: %+v", r)
	}
	as := &syscall.Credential{Uid: nobody, Gid: nobody}
	s := d.mcpConnect(t, "web-1", as)
	s.mustCall(t, "state_write", map[string]any{"key": "notes/a", "value": "ok"})
	out, isErr := s.call(t, "state_write", map[string]any{"key": "etc/a", "value": "no"})
	if !isErr || !strings.Contains(out, "EPERM") || !strings.Contains(out, "state.write") {
		t.Fatalf("write outside the policy: error=%v %s", isErr, out)
	}
	if r := d.ox("", "ox-state", "load", "-a", "web-1", "etc/a"); r.code == 0 {
		t.Fatalf("a refused write was applied: %+v", r)
	}
	au := d.ox("", "ox-audit", "log", "-a", "web-1", "--json").stdout
	if !strings.Contains(au, "[state.write]") || !strings.Contains(au, fmt.Sprintf(`"uid":%d`, nobody)) {
		t.Fatalf("the refusal is not audited under the caller's uid:\n%s", au)
	}
	// Another agent: the daemon refuses the bridge's connection its calls.
	o := d.mcpConnect(t, "ops", as)
	if out, isErr := o.call(t, "state_list", map[string]any{}); !isErr || !strings.Contains(out, "EPERM") {
		t.Fatalf("ungranted agent through ox-mcp: error=%v %s", isErr, out)
	}
	verifyAudit(t, d)
}

// TestMCPServeHTTP: streamable HTTP on a loopback port needs the bearer
// token; a non-loopback address is refused; a Unix socket is 0600.
func TestMCPServeHTTP(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	if r := d.ox("", "ox-mcp", "-a", "ops", "--http", "0.0.0.0:0"); r.code != 2 || !strings.Contains(r.stderr, "loopback") {
		t.Fatalf("--http 0.0.0.0: %+v", r)
	}
	start := func(addr string) {
		cmd := exec.Command(bin("ox-mcp"), "-a", "ops", "--http", addr)
		cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock, "OXIOS_MCP_TOKEN=sesame")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	}
	port := freePort(t)
	start(fmt.Sprintf("127.0.0.1:%d", port))
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	waitFor(t, "the HTTP listener", func() bool {
		r, err := http.Get(url)
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	r, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: HTTP %d, want 401", r.StatusCode)
	}
	hc := &http.Client{Transport: tokenTransport{"sesame"}}
	s := mcpDial(t, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc})
	s.mustCall(t, "state_write", map[string]any{"key": "notes/http", "value": "over http"})
	if r := d.ox("", "ox-state", "load", "-a", "ops", "notes/http"); r.stdout != "over http" {
		t.Fatalf("HTTP write: %+v", r)
	}

	sock := filepath.Join(d.dir, "mcp.sock")
	start("unix:" + sock)
	waitFor(t, "the unix socket", func() bool { _, err := os.Stat(sock); return err == nil })
	if fi, _ := os.Stat(sock); fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode())
	}
}

type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// verifyAudit ends a test as restic's end with a repository check: the
// daemon's audit chain must verify.
func verifyAudit(t *testing.T, d *daemon) {
	t.Helper()
	if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("ox-audit verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
