// Package mcpbridge connects Oxios to the Model Context Protocol both ways.
//
// Serving (NewServer): an agent's syscalls become MCP tools and its state
// keys and memories MCP resources, for any MCP client (an IDE assistant, a
// desktop chat app, another agent framework). The bridge is an ordinary
// client of oxiosd over its socket: every tool call is one syscall made
// under the identity of whoever started the bridge, checked against the
// agent's policy and audited by the kernel like any other. There is no
// second path into the kernel.
//
// Consuming (Pool): an LLM run calls the tools of the MCP servers its
// policy lists, each call authorized and audited by the kernel.
package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// Config says which agent a Server serves and how it reaches oxiosd.
type Config struct {
	Agent   string
	Version string
	// Dial opens a connection to oxiosd. The server keeps one for its
	// calls and opens others for what waits (wait, the event stream), so
	// that a wait given up does not take the shared connection with it.
	Dial func(ctx context.Context) (*client.Client, error)
	// MaxListed bounds the state keys and the memories listed as
	// resources, each (0: 10000). Every key and memory can be read by its
	// URI whether it is listed or not.
	MaxListed int
}

// Server is the MCP server of one agent.
type Server struct {
	cfg Config
	mcp *mcp.Server
	c   *client.Client

	mu     sync.Mutex
	keys   map[string]bool // state keys listed as resources
	mems   map[string]bool // memory ids listed as resources
	synced chan struct{}   // closed once the resources are first listed
}

// NewServer connects to oxiosd and returns the MCP server of cfg.Agent.
func NewServer(ctx context.Context, cfg Config) (*Server, error) {
	if err := proto.CheckAgent(cfg.Agent); err != nil {
		return nil, err
	}
	if cfg.MaxListed <= 0 {
		cfg.MaxListed = 10000
	}
	c, err := cfg.Dial(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, c: c, keys: map[string]bool{}, mems: map[string]bool{}, synced: make(chan struct{})}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "oxios", Title: "Oxios agent " + cfg.Agent, Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: fmt.Sprintf(instructions, cfg.Agent),
		// The SDK keeps the subscriptions; accepting them is all we do.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: false},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		},
	})
	s.addTools()
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "state", Title: "State key", URITemplate: "oxios://" + cfg.Agent + "/state/{+key}",
		Description: "The value of a state key of agent " + cfg.Agent + ".",
	}, s.read)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name: "memory", Title: "Memory", URITemplate: "oxios://" + cfg.Agent + "/memory/{id}", MIMEType: "text/markdown",
		Description: "A memory of agent " + cfg.Agent + ".",
	}, s.read)
	return s, nil
}

const instructions = `These tools act on the Oxios agent %q: its versioned state, its memory, its runs and the audit log. Each call is a system call of oxiosd, checked against the agent's policy and written to its audit log; a refusal comes back as a tool error naming the errno code (EPERM, ENOENT...) and the policy rule.`

// MCP returns the SDK server, for transports this package does not wire.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Close closes the connection to oxiosd.
func (s *Server) Close() error { return s.c.Close() }

// Run serves one session on t (stdio: &mcp.StdioTransport{}) and keeps
// the resources in step with the daemon's events until ctx ends or the
// client goes. The resources are listed before the session starts: a
// client that asks resources/list right after initialize, and then
// leaves, sees them, not the empty list of a server still listing.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Watch(ctx)
	select {
	case <-s.synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.mcp.Run(ctx, t)
}

// StateURI is the resource URI of key of agent.
func StateURI(agent, key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "oxios://" + agent + "/state/" + strings.Join(parts, "/")
}

// MemoryURI is the resource URI of memory id of agent.
func MemoryURI(agent, id string) string {
	return "oxios://" + agent + "/memory/" + url.PathEscape(id)
}

// parseURI splits a resource URI of this server's agent into its kind
// ("state" or "memory") and the key or id.
func (s *Server) parseURI(uri string) (kind, name string, err error) {
	u, perr := url.Parse(uri)
	if perr != nil || u.Scheme != "oxios" {
		return "", "", mcp.ResourceNotFoundError(uri)
	}
	if u.Host != s.cfg.Agent {
		return "", "", fmt.Errorf("%s: this server serves agent %s only", uri, s.cfg.Agent)
	}
	kind, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || name == "" || kind != "state" && kind != "memory" {
		return "", "", mcp.ResourceNotFoundError(uri)
	}
	return kind, name, nil
}

// read serves resources/read: a state key's value or a memory's text, read
// through the same syscalls as the tools.
func (s *Server) read(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	kind, name, err := s.parseURI(uri)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "state":
		if perr := proto.CheckKey(name); perr != nil {
			return nil, perr
		}
		v, _, err := s.c.StateLoad(ctx, s.cfg.Agent, name)
		if isCode(err, proto.ENOENT) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, err
		}
		val, enc := proto.EncodeValue(v)
		rc := &mcp.ResourceContents{URI: uri}
		if enc == "" {
			rc.MIMEType, rc.Text = "text/plain", val
		} else {
			rc.MIMEType, rc.Blob = "application/octet-stream", v
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{rc}}, nil
	default:
		m, err := s.memory(ctx, name)
		if err != nil {
			return nil, err
		}
		if m == nil {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/markdown", Text: m.Text}}}, nil
	}
}

// memory finds one memory by id. There is no syscall that loads one
// memory, so it is looked for in the list (which the kernel authorizes).
func (s *Server) memory(ctx context.Context, id string) (*proto.MemoryRecord, error) {
	var found *proto.MemoryRecord
	err := s.c.MemList(ctx, proto.MemListArgs{Agent: s.cfg.Agent}, func(m proto.MemoryRecord) error {
		if m.ID == id {
			found = &m
		}
		return nil
	})
	return found, err
}

func isCode(err error, code string) bool {
	pe, ok := err.(*proto.Error)
	return ok && pe.Code == code
}

// Watch keeps the listed resources in step with the agent's state and
// memory, and tells subscribed clients which changed, until ctx ends. It
// lists everything once, then follows the event stream from the audit
// seq it listed at, so no change between the two is missed.
func (s *Server) Watch(ctx context.Context) {
	head, herr := s.c.AuditHead(ctx)
	s.sync(ctx, true, true)
	close(s.synced)
	if ctx.Err() != nil {
		return
	}
	ec, err := s.cfg.Dial(ctx)
	if err != nil {
		return
	}
	defer ec.Close()
	a := proto.EventsArgs{Agent: s.cfg.Agent}
	if herr == nil {
		a.SinceSeq = head.Seq + 1
	}
	// One resync per burst of memory events, not one per event.
	var resync struct {
		sync.Mutex
		state, mems, pending bool
	}
	kick := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			resync.Lock()
			st, me := resync.state, resync.mems
			resync.state, resync.mems = false, false
			resync.Unlock()
			s.sync(ctx, st, me)
		}
	}()
	later := func(state, mems bool) {
		resync.Lock()
		resync.state = resync.state || state
		resync.mems = resync.mems || mems
		resync.Unlock()
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	ec.Events(ctx, a, func(raw json.RawMessage) error {
		var ev proto.EventRecord
		if json.Unmarshal(raw, &ev) != nil {
			return nil
		}
		switch {
		case ev.Type == proto.RecordLost:
			later(true, true)
		case ev.Event == "state.changed" && ev.Key != "":
			s.stateChanged(ctx, ev.Key, ev.Deleted || ev.Op == proto.OpStateDelete)
		case strings.HasPrefix(ev.Event, "memory."):
			later(false, true)
		case ev.Op == proto.OpCommitRestore && ev.Result == "ok":
			later(true, true)
		}
		return nil
	})
}

// Synced is closed once the resources have been listed the first time.
func (s *Server) Synced() <-chan struct{} { return s.synced }

func (s *Server) stateChanged(ctx context.Context, key string, deleted bool) {
	uri := StateURI(s.cfg.Agent, key)
	s.mu.Lock()
	listed := s.keys[key]
	switch {
	case deleted && listed:
		delete(s.keys, key)
		s.mcp.RemoveResources(uri)
	case !deleted && !listed && len(s.keys) < s.cfg.MaxListed:
		s.keys[key] = true
		s.mcp.AddResource(s.stateResource(key), s.read)
	}
	s.mu.Unlock()
	s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
}

func (s *Server) stateResource(key string) *mcp.Resource {
	return &mcp.Resource{URI: StateURI(s.cfg.Agent, key), Name: key, Title: "state " + key}
}

func (s *Server) memoryResource(m proto.MemoryRecord) *mcp.Resource {
	return &mcp.Resource{URI: MemoryURI(s.cfg.Agent, m.ID), Name: m.ID, MIMEType: "text/markdown",
		Title: m.Kind + " memory " + m.ID, Description: oneLine(m.Text, 200)}
}

// sync lists the state keys and/or the memories and brings the listed
// resources in step: new ones added, gone ones removed, and a subscribed
// client told of each (a resync follows a restore or lost events, so any
// listed key may have changed).
func (s *Server) sync(ctx context.Context, state, mems bool) {
	var changed []string
	if state {
		now := map[string]bool{}
		err := s.c.StateList(ctx, s.cfg.Agent, "", func(r proto.StateRecord) error {
			if len(now) < s.cfg.MaxListed {
				now[r.Key] = true
			}
			return nil
		})
		if err == nil {
			s.mu.Lock()
			var add []*mcp.Resource
			var gone []string
			for k := range now {
				if !s.keys[k] {
					add = append(add, s.stateResource(k))
				}
				changed = append(changed, StateURI(s.cfg.Agent, k))
			}
			for k := range s.keys {
				if !now[k] {
					gone = append(gone, StateURI(s.cfg.Agent, k))
				}
			}
			s.keys = now
			s.apply(add, gone)
			s.mu.Unlock()
			changed = append(changed, gone...)
		}
	}
	if mems {
		now := map[string]proto.MemoryRecord{}
		err := s.c.MemList(ctx, proto.MemListArgs{Agent: s.cfg.Agent}, func(m proto.MemoryRecord) error {
			if len(now) < s.cfg.MaxListed {
				now[m.ID] = m
			}
			return nil
		})
		if err == nil {
			s.mu.Lock()
			var add []*mcp.Resource
			var gone []string
			ids := map[string]bool{}
			for id, m := range now {
				ids[id] = true
				if !s.mems[id] {
					add = append(add, s.memoryResource(m))
					changed = append(changed, MemoryURI(s.cfg.Agent, id))
				}
			}
			for id := range s.mems {
				if !ids[id] {
					gone = append(gone, MemoryURI(s.cfg.Agent, id))
				}
			}
			s.mems = ids
			s.apply(add, gone)
			s.mu.Unlock()
			changed = append(changed, gone...)
		}
	}
	slices.Sort(changed)
	for _, uri := range slices.Compact(changed) {
		s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}

// apply adds and removes listed resources; s.mu is held.
func (s *Server) apply(add []*mcp.Resource, gone []string) {
	for _, r := range add {
		s.mcp.AddResource(r, s.read)
	}
	if len(gone) > 0 {
		s.mcp.RemoveResources(gone...)
	}
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		i := max
		for i > 0 && s[i]&0xC0 == 0x80 {
			i--
		}
		s = s[:i] + "…"
	}
	return s
}

// waitCap bounds how long one wait tool call blocks.
const waitCap = 10 * time.Minute
