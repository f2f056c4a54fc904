package mcpbridge

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/proto"
)

// Authorizer is what the pool asks of the kernel around each call: may
// it be made (authorized, charged, audited with its arguments' digest),
// and how did it end (audited with its result's digest).
type Authorizer interface {
	MCPCall(ctx context.Context, a proto.MCPCallArgs) (proto.MCPCallRecord, error)
	MCPResult(ctx context.Context, a proto.MCPResultArgs) error
}

// FuncPrefix starts the name of every MCP tool offered to a model:
// mcp_SERVER_TOOL. Server names have no "_", so the first "_" after the
// prefix ends the server's name.
const FuncPrefix = "mcp_"

// maxRestarts bounds how often a server that hung or died is started
// again in one run.
const maxRestarts = 3

// Tool is an MCP tool as offered to a model.
type Tool struct {
	Func        string // the model's function name
	Server      string
	Name        string
	Description string
	Schema      json.RawMessage
}

// Options say how stdio servers are started.
type Options struct {
	Dir    string    // their working directory (the run's workspace)
	Stderr io.Writer // where their standard error goes (nil: discarded)
	// StartTimeout bounds starting a server and listing its tools (0: 10s).
	StartTimeout time.Duration
}

// Pool is the MCP servers of one run, started when the run starts.
type Pool struct {
	auth    Authorizer
	opts    Options
	servers map[string]*server
	tools   []Tool
	byFunc  map[string]Tool
	closing sync.WaitGroup
}

type server struct {
	info    proto.MCPServerInfo
	opts    *Options
	closing *sync.WaitGroup // the pool's sessions being closed

	mu       sync.Mutex
	sess     *mcp.ClientSession
	restarts int
	dead     error // set once it may not be started again
}

// Open starts every server, lists its tools and keeps those its allow
// list names. A server that cannot be started or listed is left out, and
// its error returned among errs: the run goes on without it.
func Open(ctx context.Context, infos []proto.MCPServerInfo, auth Authorizer, opts Options) (p *Pool, errs []error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 10 * time.Second
	}
	p = &Pool{auth: auth, opts: opts, servers: map[string]*server{}, byFunc: map[string]Tool{}}
	type listed struct {
		tools []Tool
		err   error
	}
	res := make([]listed, len(infos))
	var wg sync.WaitGroup
	for i, info := range infos {
		s := &server{info: info, opts: &p.opts, closing: &p.closing}
		p.servers[info.Name] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].tools, res[i].err = s.list(ctx)
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("MCP server %s: %w", infos[i].Name, r.err))
			continue
		}
		for _, t := range r.tools {
			if _, dup := p.byFunc[t.Func]; dup || len(t.Func) > 64 {
				errs = append(errs, fmt.Errorf("MCP server %s: tool %q left out: its function name %s is taken or too long", t.Server, t.Name, t.Func))
				continue
			}
			p.byFunc[t.Func] = t
			p.tools = append(p.tools, t)
		}
	}
	return p, errs
}

// Tools returns the tools offered, sorted by function name.
func (p *Pool) Tools() []Tool {
	out := append([]Tool(nil), p.tools...)
	sort.Slice(out, func(i, j int) bool { return out[i].Func < out[j].Func })
	return out
}

// Close ends every server, and waits until each has exited (a stdio
// server that ignores the end of its input gets SIGTERM after a second,
// SIGKILL after another), so that none outlives the run.
func (p *Pool) Close() {
	for _, s := range p.servers {
		s.mu.Lock()
		s.closeLocked()
		s.mu.Unlock()
	}
	p.closing.Wait()
}

// funcName is the model's name for tool of server: mcp_SERVER_TOOL, with
// what a function name may not hold replaced by "_".
func funcName(server, tool string) string {
	b := []byte(FuncPrefix + server + "_" + tool)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

func allowed(allow []string, tool string) bool {
	for _, a := range allow {
		if matchGlob(a, tool) {
			return true
		}
	}
	return false
}

// startTimeout bounds starting s: its policy's, else the pool's.
func (s *server) startTimeout() time.Duration {
	if t := time.Duration(s.info.StartTimeout * float64(time.Second)); t > 0 {
		return t
	}
	return s.opts.StartTimeout
}

func (s *server) list(ctx context.Context) ([]Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.startTimeout())
	defer cancel()
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	var out []Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			s.mu.Lock()
			s.closeLocked()
			s.mu.Unlock()
			return nil, fmt.Errorf("listing its tools: %w", describe(ctx, err))
		}
		if !allowed(s.info.Allow, t.Name) {
			continue
		}
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = []byte(`{"type":"object"}`)
		}
		out = append(out, Tool{Func: funcName(s.info.Name, t.Name), Server: s.info.Name, Name: t.Name, Description: t.Description, Schema: schema})
	}
	return out, nil
}

// session returns the server's session, starting the server if it is not
// running (again, after a hang or a crash, up to maxRestarts times).
func (s *server) session(ctx context.Context) (*mcp.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		return s.sess, nil
	}
	if s.dead != nil {
		return nil, s.dead
	}
	var tr mcp.Transport
	if len(s.info.Command) > 0 {
		// A child of the run: whatever confines the run (its cgroup, its
		// namespaces, its identity with oxiosd) confines the server.
		cmd := exec.Command(s.info.Command[0], s.info.Command[1:]...)
		cmd.Dir = s.opts.Dir
		cmd.Env = serverEnv(s.info.Env)
		cmd.Stderr = s.opts.Stderr
		tr = &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	} else {
		tr = &mcp.StreamableClientTransport{Endpoint: s.info.URL, MaxRetries: 1, DisableStandaloneSSE: true}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "oxios-agent", Version: "0.1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	sess, err := c.Connect(ctx, tr, nil)
	if err != nil {
		s.restarts++
		if s.restarts > maxRestarts {
			s.dead = fmt.Errorf("it failed to start %d times; last: %v", s.restarts, err)
		}
		return nil, fmt.Errorf("starting it: %w", describe(ctx, err))
	}
	s.sess = sess
	return sess, nil
}

// closeLocked ends the session (and a stdio server's process) without
// waiting for it: a hung server takes seconds to be killed.
func (s *server) closeLocked() {
	if s.sess == nil {
		return
	}
	sess := s.sess
	s.closing.Add(1)
	go func() {
		defer s.closing.Done()
		sess.Close()
	}()
	s.sess = nil
}

// failed drops a session that hung or broke, so that the next call
// starts the server again.
func (s *server) failed(sess *mcp.ClientSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == sess {
		s.closeLocked()
		s.restarts++
		if s.restarts > maxRestarts {
			s.dead = fmt.Errorf("it hung or stopped %d times in this run", s.restarts)
		}
	}
}

// serverEnv is a stdio server's environment: the basics of the run's,
// and what the policy gives it. Not the whole of the run's: the runner's
// environment may hold the model endpoint's key.
func serverEnv(extra []string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "OXIOS_AGENT", "OXIOS_RUN", "OXIOS_SOCKET"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// CallError is a call that failed in a way the model should hear about
// (the tool went wrong, the server hung or died): Code is the errno name.
type CallError struct {
	Code string
	Msg  string
}

func (e *CallError) Error() string { return e.Msg + " (" + e.Code + ")" }

// Call calls the tool behind the model's function name fn. The kernel
// authorizes it first (a refusal is returned as is, a *proto.Error), the
// call is bounded by the policy's timeout, and its outcome is audited.
// A server that hangs or dies makes a *CallError, and is started again at
// the next call.
func (p *Pool) Call(ctx context.Context, fn string, args json.RawMessage) (string, error) {
	t, ok := p.byFunc[fn]
	if !ok {
		// Not offered; the kernel still decides, and audits, a call the
		// model made up (mcp_SERVER_TOOL of a tool not allowed).
		rest := strings.TrimPrefix(fn, FuncPrefix)
		srv, tool, _ := strings.Cut(rest, "_")
		t = Tool{Func: fn, Server: srv, Name: tool}
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	var argMap map[string]any
	if err := json.Unmarshal(args, &argMap); err != nil {
		return "", &CallError{Code: proto.EINVAL, Msg: fmt.Sprintf("%s: arguments are not a JSON object: %v", fn, err)}
	}
	rec, err := p.auth.MCPCall(ctx, proto.MCPCallArgs{Server: t.Server, Tool: t.Name, Arguments: args})
	if err != nil {
		return "", err
	}
	s := p.servers[t.Server]
	if s == nil {
		// Allowed by the policy, but the server was not there when the run
		// started (the policy changed since).
		err := &CallError{Code: "EPIPE", Msg: fmt.Sprintf("MCP server %s is not running in this run", t.Server)}
		p.audit(ctx, t, rec, "", err, 0)
		return "", err
	}
	start := time.Now()
	timeout := time.Duration(rec.Timeout * float64(time.Second))
	text, cerr := s.call(ctx, t.Name, argMap, timeout)
	if cerr == nil {
		p.audit(ctx, t, rec, text, nil, time.Since(start))
		return text, nil
	}
	if ctx.Err() != nil {
		cerr = &CallError{Code: proto.ECANCELED, Msg: "the run was cancelled during the call"}
	}
	p.audit(ctx, t, rec, text, cerr, time.Since(start))
	return "", cerr
}

// call makes one call. Starting the server again (after a hang or a
// crash) has its own time limit, StartTimeout: the call's timeout is the
// policy's bound on the tool, not on the server's start.
func (s *server) call(ctx context.Context, tool string, args map[string]any, timeout time.Duration) (string, *CallError) {
	sctx, cancel := context.WithTimeout(ctx, s.startTimeout())
	sess, err := s.session(sctx)
	cancel()
	if err != nil {
		code := "EPIPE"
		if sctx.Err() != nil {
			code = proto.ETIMEDOUT
		}
		return "", &CallError{Code: code, Msg: fmt.Sprintf("MCP server %s: %v", s.info.Name, err)}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := sess.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		s.failed(sess)
		if cctx.Err() != nil {
			return "", &CallError{Code: proto.ETIMEDOUT, Msg: fmt.Sprintf("MCP server %s did not answer %s within %s; it is restarted for the next call", s.info.Name, tool, timeout)}
		}
		return "", &CallError{Code: "EPIPE", Msg: fmt.Sprintf("MCP server %s failed during %s: %v; it is restarted for the next call", s.info.Name, tool, err)}
	}
	text := resultText(res)
	if res.IsError {
		return text, &CallError{Code: proto.EIO, Msg: fmt.Sprintf("%s/%s: %s", s.info.Name, tool, text)}
	}
	return text, nil
}

// audit records how a call ended; the run goes on if it cannot.
func (p *Pool) audit(ctx context.Context, t Tool, rec proto.MCPCallRecord, text string, cerr error, took time.Duration) {
	a := proto.MCPResultArgs{Server: t.Server, Tool: t.Name, Call: rec.Seq, Duration: took.Seconds()}
	var ce *CallError
	if errors.As(cerr, &ce) && ce.Code != proto.EINVAL {
		a.Error = ce.Code
		if text == "" {
			text = ce.Msg
		}
	}
	sum := blake3.Sum256([]byte(text))
	a.Digest = hex.EncodeToString(sum[:])
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p.auth.MCPResult(actx, a)
}

// resultText is a tool result as the model reads it: its text, and a
// note for each part that is not text.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "(an image, %s, %d bytes)", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "(audio, %s, %d bytes)", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "(a resource: %s)", c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "(a resource: %s)", c.Resource.URI)
			}
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		j, _ := json.Marshal(res.StructuredContent)
		b.Write(j)
	}
	return b.String()
}

func describe(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("no answer in time (%w)", err)
	}
	return err
}

// matchGlob is path.Match without its errors (the policy's globs are
// checked when it is set).
func matchGlob(pat, name string) bool {
	ok, _ := path.Match(pat, name)
	return ok
}
