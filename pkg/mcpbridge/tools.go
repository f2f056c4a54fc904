package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oxios/oxios/pkg/proto"
)

// The tools: one a syscall; those an LLM run has too are defined once,
// in specs.go. Arguments are the wire args of the syscall minus the
// agent, which is the server's.

type forgetIn struct {
	IDs  []string `json:"ids,omitempty" jsonschema:"the memories to forget, by id"`
	Tags []string `json:"tags,omitempty" jsonschema:"forget the memories with all these tags"`
}

type spawnIn struct {
	Task    string   `json:"task,omitempty" jsonschema:"a task for an LLM run of the agent"`
	Command []string `json:"command,omitempty" jsonschema:"or a command to run as the agent (argv)"`
	Input   string   `json:"input,omitempty" jsonschema:"the run's stdin (records or text)"`
	Model   string   `json:"model,omitempty"`
}

type psIn struct {
	All bool `json:"all,omitempty" jsonschema:"also the runs that have exited"`
}

type runsIn struct {
	Runs    []string `json:"runs" jsonschema:"run ids, as spawn and ps give them"`
	Timeout string   `json:"timeout,omitempty" jsonschema:"how long to wait, a Go duration (default 60s, at most 10m)"`
}

type killIn struct {
	Runs   []string `json:"runs" jsonschema:"run ids, as spawn and ps give them"`
	Signal string   `json:"signal,omitempty" jsonschema:"TERM (the default), INT, KILL, STOP, CONT"`
}

type commitIn struct {
	Message string `json:"message,omitempty"`
	Tag     string `json:"tag,omitempty" jsonschema:"also name the commit"`
}

type logIn struct {
	N   int    `json:"n,omitempty" jsonschema:"at most this many commits (default 20)"`
	Rev string `json:"rev,omitempty" jsonschema:"start here (default HEAD)"`
}

type diffIn struct {
	From  string `json:"from" jsonschema:"a commit, tag or HEAD~N"`
	To    string `json:"to,omitempty" jsonschema:"a commit (default: the current state, committed or not)"`
	Patch bool   `json:"patch,omitempty" jsonschema:"include unified diffs"`
}

type restoreIn struct {
	Rev string `json:"rev" jsonschema:"the commit or tag whose state to restore"`
}

type auditLogIn struct {
	Op       string `json:"op,omitempty" jsonschema:"an op name or glob, e.g. state.*"`
	SinceSeq uint64 `json:"since_seq,omitempty"`
	N        int    `json:"n,omitempty" jsonschema:"the last N entries (default 50)"`
}

type noIn struct{}

// addTool adds a tool whose input schema is inferred from In
// (schemaFor).
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	t.InputSchema = schemaFor[In](t.Name)
	mcp.AddTool(s, t, h)
}

// addShared adds the tool of spec, which the LLM runner's tools share
// (Shared), with its description and input.
func addShared[In, Out any](s *mcp.Server, name string, ann *mcp.ToolAnnotations, h mcp.ToolHandlerFor[In, Out]) {
	sp := SharedTool(name)
	addTool(s, &mcp.Tool{Name: sp.Name, Description: sp.Description, Annotations: ann}, h)
}

func (s *Server) addTools() {
	ag := s.cfg.Agent
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	idem := &mcp.ToolAnnotations{IdempotentHint: true}
	addShared(s.mcp, "state_read", ro,
		func(ctx context.Context, _ *mcp.CallToolRequest, in KeyIn) (*mcp.CallToolResult, any, error) {
			_, rec, err := s.c.StateLoad(ctx, ag, in.Key)
			return records(err, rec)
		})
	addShared(s.mcp, "state_write", idem,
		func(ctx context.Context, _ *mcp.CallToolRequest, in WriteIn) (*mcp.CallToolResult, any, error) {
			v, perr := proto.DecodeValue(in.Value, in.Encoding)
			if perr != nil {
				return nil, nil, perr
			}
			rec, err := s.c.StateSave(ctx, ag, in.Key, v)
			return records(err, rec)
		})
	addShared(s.mcp, "state_list", ro,
		func(ctx context.Context, _ *mcp.CallToolRequest, in ListIn) (*mcp.CallToolResult, any, error) {
			var out []any
			err := s.c.StateList(ctx, ag, in.Prefix, func(r proto.StateRecord) error { out = append(out, r); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "state_delete", Description: "Delete a state key.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in KeyIn) (*mcp.CallToolResult, any, error) {
			rec, err := s.c.StateDelete(ctx, ag, in.Key)
			return records(err, rec)
		})
	addShared(s.mcp, "remember", nil,
		func(ctx context.Context, _ *mcp.CallToolRequest, in RememberIn) (*mcp.CallToolResult, any, error) {
			recs, err := s.c.MemRemember(ctx, proto.MemRememberArgs{Agent: ag, Memories: []proto.MemoryInput{{
				Kind: in.Kind, Text: in.Text, Tags: in.Tags, TTL: in.TTL, Importance: in.Importance, Source: "mcp"}}})
			return records(err, anys(recs)...)
		})
	addShared(s.mcp, "recall", ro,
		func(ctx context.Context, _ *mcp.CallToolRequest, in RecallIn) (*mcp.CallToolResult, any, error) {
			if in.K <= 0 {
				in.K = 10
			}
			var out []any
			err := s.c.MemRecall(ctx, proto.MemRecallArgs{Agent: ag, Query: in.Query, K: in.K, Kind: in.Kind, Tags: in.Tags},
				func(m proto.MemoryRecord) error { out = append(out, m); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "forget", Description: "Forget memories by id or by tags.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in forgetIn) (*mcp.CallToolResult, any, error) {
			if len(in.IDs) == 0 && len(in.Tags) == 0 {
				return nil, nil, proto.Errorf(proto.EINVAL, "forget: give ids or tags (forgetting everything takes ox-forget)")
			}
			var out []any
			err := s.c.MemForget(ctx, proto.MemForgetArgs{Agent: ag, IDs: in.IDs, Tags: in.Tags},
				func(m proto.MemoryRecord) error { out = append(out, m); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "spawn", Description: "Start a run of the agent: an LLM run with a task, or a command. Returns the run record at once; follow it with wait."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in spawnIn) (*mcp.CallToolResult, any, error) {
			if (in.Task == "") == (len(in.Command) == 0) {
				return nil, nil, proto.Errorf(proto.EINVAL, "spawn: give a task or a command, one of them")
			}
			rec, err := s.c.Spawn(ctx, proto.SpawnArgs{Agent: ag, Task: in.Task, Command: in.Command, Input: in.Input, Model: in.Model})
			return records(err, rec)
		})
	addTool(s.mcp, &mcp.Tool{Name: "ps", Description: "List the agent's runs.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in psIn) (*mcp.CallToolResult, any, error) {
			var out []any
			err := s.c.Ps(ctx, proto.PsArgs{Agent: ag, All: in.All}, func(r proto.RunRecord) error { out = append(out, r); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "wait", Description: "Wait for runs to exit and return their exit records; on timeout, the ones that exited and a note.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in runsIn) (*mcp.CallToolResult, any, error) {
			return s.wait(ctx, in)
		})
	addTool(s.mcp, &mcp.Tool{Name: "kill", Description: "Send a signal to runs of the agent (TERM by default)."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in killIn) (*mcp.CallToolResult, any, error) {
			if err := s.ownRuns(ctx, in.Runs); err != nil {
				return nil, nil, err
			}
			var out []any
			err := s.c.Kill(ctx, proto.KillArgs{Runs: in.Runs, Signal: in.Signal}, func(r proto.RunRecord) error { out = append(out, r); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "commit", Description: "Commit the agent's uncommitted state and memory as a version."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in commitIn) (*mcp.CallToolResult, any, error) {
			rec, err := s.c.Commit(ctx, proto.CommitArgs{Agent: ag, Message: in.Message, Tag: in.Tag})
			return records(err, rec)
		})
	addTool(s.mcp, &mcp.Tool{Name: "log", Description: "List the commits that changed the agent, newest first.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in logIn) (*mcp.CallToolResult, any, error) {
			if in.N <= 0 {
				in.N = 20
			}
			var out []any
			err := s.c.CommitLog(ctx, proto.CommitLogArgs{Agent: ag, Rev: in.Rev, N: in.N}, func(r proto.CommitRecord) error { out = append(out, r); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "diff", Description: "List what changed in the agent's tree between two versions (or a version and now).", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in diffIn) (*mcp.CallToolResult, any, error) {
			var out []any
			err := s.c.CommitDiff(ctx, proto.CommitDiffArgs{Agent: ag, From: in.From, To: in.To, Patch: in.Patch}, func(r proto.DiffRecord) error { out = append(out, r); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "restore", Description: "Make the agent's state and memory equal to a version's, and commit that.", Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}},
		func(ctx context.Context, _ *mcp.CallToolRequest, in restoreIn) (*mcp.CallToolResult, any, error) {
			rec, err := s.c.CommitRestore(ctx, proto.CommitRestoreArgs{Agent: ag, Rev: in.Rev})
			return records(err, rec)
		})
	addTool(s.mcp, &mcp.Tool{Name: "audit_log", Description: "The audit log entries about the agent, as stored (hash-chained).", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, in auditLogIn) (*mcp.CallToolResult, any, error) {
			if in.N <= 0 {
				in.N = 50
			}
			var out []any
			err := s.c.AuditLog(ctx, proto.AuditLogArgs{Agent: ag, Op: in.Op, SinceSeq: in.SinceSeq, N: in.N}, func(l json.RawMessage) error { out = append(out, l); return nil })
			return records(err, out...)
		})
	addTool(s.mcp, &mcp.Tool{Name: "audit_verify", Description: "Have oxiosd recompute the audit log's hash chain and say whether it is intact.", Annotations: ro},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ noIn) (*mcp.CallToolResult, any, error) {
			rec, err := s.c.AuditVerify(ctx)
			if err == nil && !rec.OK {
				res, _, _ := records(nil, rec)
				res.IsError = true
				return res, nil, nil
			}
			return records(err, rec)
		})
}

// ownRuns refuses run ids that are not runs of the server's agent: the
// bridge of one agent must not signal or wait for another's runs, even
// when whoever started it could.
func (s *Server) ownRuns(ctx context.Context, runs []string) error {
	if len(runs) == 0 {
		return proto.Errorf(proto.EINVAL, "give the run ids (see ps)")
	}
	mine := map[string]bool{}
	err := s.c.Ps(ctx, proto.PsArgs{Agent: s.cfg.Agent, All: true}, func(r proto.RunRecord) error {
		mine[r.ID] = r.Agent == s.cfg.Agent
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range runs {
		if !mine[id] {
			return proto.Errorf(proto.ESRCH, "no run %s of agent %s (see ps)", id, s.cfg.Agent)
		}
	}
	return nil
}

func (s *Server) wait(ctx context.Context, in runsIn) (*mcp.CallToolResult, any, error) {
	if err := s.ownRuns(ctx, in.Runs); err != nil {
		return nil, nil, err
	}
	d := 60 * time.Second
	if in.Timeout != "" {
		t, err := time.ParseDuration(in.Timeout)
		if err != nil || t <= 0 {
			return nil, nil, proto.Errorf(proto.EINVAL, "timeout %q: want a duration such as 30s", in.Timeout)
		}
		d = min(t, waitCap)
	}
	// A connection of its own: giving up a wait ends the connection.
	wc, err := s.cfg.Dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer wc.Close()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var out []any
	exited := map[string]bool{}
	err = wc.Wait(wctx, in.Runs, func(r proto.ExitRecord) error {
		out = append(out, r)
		exited[r.Run] = true
		return nil
	})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		var left []string
		for _, id := range in.Runs {
			if !exited[id] {
				left = append(left, id)
			}
		}
		res, _, _ := records(nil, out...)
		res.Content = append(res.Content, &mcp.TextContent{Text: fmt.Sprintf("still running after %s: %v", d, left)})
		return res, nil, nil
	}
	return records(err, out...)
}

// records is a tool's result: the records as JSON lines, the format every
// ox-* command prints, or the syscall's error (a tool error naming the
// errno code, which the SDK turns into isError).
func records(err error, recs ...any) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return nil, nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return nil, nil, err
		}
	}
	text := b.String()
	if text == "" {
		text = "(none)"
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func ptr[T any](v T) *T { return &v }
