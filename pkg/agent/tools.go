package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/mcpbridge"
	"github.com/oxios/oxios/pkg/proto"
)

// The tools the model may call: each is one syscall of the run's agent.

type tool struct {
	name, desc string
	params     string // JSON schema of the arguments
}

// tools are the runner's own tools; those the MCP bridge has too come
// first, from their one definition (mcpbridge.Shared).
var tools = []tool{
	{"exec", "Run an allowed program in your workspace and get its exit status and output. Give argv (a program and its arguments) or command (one line).",
		`{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"}},"command":{"type":"string"},"stdin":{"type":"string"}}}`},
	{"fetch", "Fetch a URL (http or https, on a host your policy allows) and get its status and body.",
		`{"type":"object","properties":{"url":{"type":"string"},"method":{"type":"string","enum":["GET","HEAD"]}},"required":["url"]}`},
	{"finish", "End the task, with a short summary of what you did and found.",
		`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`},
}

// Tools returns the tools in the endpoint's format.
func Tools() []openai.Tool {
	out := make([]openai.Tool, 0, len(mcpbridge.Shared())+len(tools))
	for _, sp := range mcpbridge.Shared() {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: sp.Name, Description: sp.Description, Parameters: sp.Params()}})
	}
	for _, t := range tools {
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.name, Description: t.desc, Parameters: json.RawMessage(t.params)}})
	}
	return out
}

// argsRecaller is a Kernel that recalls by kind and tags too (Client).
type argsRecaller interface {
	RecallArgs(ctx context.Context, a proto.MemRecallArgs) ([]proto.MemoryRecord, error)
}

// callShared runs a tool the MCP bridge has too, its arguments decoded
// into the input of its one definition (mcpbridge.Shared).
func (r *Runner) callShared(ctx context.Context, name, args string, decode func(any) error) (string, string, error) {
	switch name {
	case "state_read":
		var in mcpbridge.KeyIn
		if err := decode(&in); err != nil {
			return "", "", err
		}
		if in.Key == "" {
			return "", "", toolErrorf("state_read: give a key")
		}
		v, err := r.k.StateLoad(ctx, in.Key)
		if err != nil {
			return "", "", err
		}
		if !utf8.Valid(v) {
			return fmt.Sprintf("(%d bytes of binary data)", len(v)), "", nil
		}
		return clip(string(v)), "", nil
	case "state_write":
		var in mcpbridge.WriteIn
		var given struct {
			Value *string `json:"value"`
		}
		if err := decode(&in); err != nil {
			return "", "", err
		}
		if json.Unmarshal([]byte(args), &given); in.Key == "" || given.Value == nil {
			return "", "", toolErrorf("state_write: give a key and a value")
		}
		v, perr := proto.DecodeValue(in.Value, in.Encoding)
		if perr != nil {
			return "", "", perr
		}
		if err := r.k.StateSave(ctx, in.Key, v); err != nil {
			return "", "", err
		}
		return fmt.Sprintf("saved %s (%d bytes)", in.Key, len(v)), "", nil
	case "state_list":
		var in mcpbridge.ListIn
		if err := decode(&in); err != nil {
			return "", "", err
		}
		recs, err := r.k.StateList(ctx, in.Prefix)
		if err != nil {
			return "", "", err
		}
		var b strings.Builder
		for _, s := range recs {
			fmt.Fprintf(&b, "%s\t%d bytes\n", s.Key, s.Size)
		}
		if b.Len() == 0 {
			return "(no keys)", "", nil
		}
		return clip(b.String()), "", nil
	case "remember":
		var in mcpbridge.RememberIn
		if err := decode(&in); err != nil {
			return "", "", err
		}
		if strings.TrimSpace(in.Text) == "" {
			return "", "", toolErrorf("remember: give the text to remember")
		}
		m, err := r.k.Remember(ctx, proto.MemoryInput{Kind: in.Kind, Text: in.Text, Tags: in.Tags, TTL: in.TTL, Importance: in.Importance, Source: "run:" + r.cfg.Run})
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("remembered as %s (%s)", m.ID, m.Kind), "", nil
	case "recall":
		return r.recallTool(ctx, decode)
	}
	return "", "", toolErrorf("%s: this runner does not offer it", name)
}

// recallTool runs the recall tool.
func (r *Runner) recallTool(ctx context.Context, decode func(any) error) (string, string, error) {
	var in mcpbridge.RecallIn
	if err := decode(&in); err != nil {
		return "", "", err
	}
	if strings.TrimSpace(in.Query) == "" {
		return "", "", toolErrorf("recall: give a query")
	}
	k := in.K
	if k <= 0 || k > 50 {
		k = 5
	}
	var mems []proto.MemoryRecord
	var err error
	if ar, ok := r.k.(argsRecaller); ok {
		mems, err = ar.RecallArgs(ctx, proto.MemRecallArgs{Query: in.Query, K: k, Kind: in.Kind, Tags: in.Tags})
	} else if in.Kind != "" || len(in.Tags) > 0 {
		return "", "", toolErrorf("recall: kind and tags are not offered here")
	} else {
		mems, err = r.k.Recall(ctx, in.Query, k)
	}
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, m := range mems {
		fmt.Fprintf(&b, "- %s [%s, %s, score %.3f] %s\n", m.ID, m.Kind, m.Created.Format("2006-01-02"), m.Score, OneLine(m.Text, 1000))
	}
	if b.Len() == 0 {
		return "(nothing recalled)", "", nil
	}
	return clip(b.String()), "", nil
}

// maxResult bounds what one tool gives back to the model.
const maxResult = 16 << 10

// call runs one tool call. It returns the text for the model; summary is
// set by finish; err is a failed call (the model sees it).
func (r *Runner) call(ctx context.Context, tc openai.ToolCall) (out, summary string, err error) {
	var a struct {
		Argv    []string `json:"argv"`
		Command string   `json:"command"`
		Stdin   string   `json:"stdin"`
		Summary string   `json:"summary"`
		URL     string   `json:"url"`
		Method  string   `json:"method"`
	}
	if strings.HasPrefix(tc.Function.Name, mcpbridge.FuncPrefix) {
		out, err := r.callMCP(ctx, tc.Function.Name, tc.Function.Arguments)
		return out, "", err
	}
	if tc.Function.Name == skillTool {
		out, err := r.loadSkill(ctx, tc.Function.Arguments)
		return out, "", err
	}
	if out, ok, err := r.callMsg(ctx, tc); ok {
		return out, "", err
	}
	if name, ok := strings.CutPrefix(tc.Function.Name, wasmPrefix); ok {
		out, err := r.callWasm(ctx, name, tc.Function.Arguments)
		return out, "", err
	}
	args := strings.TrimSpace(tc.Function.Arguments)
	if args == "" {
		args = "{}"
	}
	decode := func(v any) error {
		dec := json.NewDecoder(strings.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return toolErrorf("%s: arguments are not the JSON object its schema asks for: %v", tc.Function.Name, err)
		}
		return nil
	}
	for _, sp := range mcpbridge.Shared() {
		if sp.Name == tc.Function.Name {
			return r.callShared(ctx, sp.Name, args, decode)
		}
	}
	if err := decode(&a); err != nil {
		return "", "", err
	}
	switch tc.Function.Name {
	case "exec":
		if (len(a.Argv) == 0) == (a.Command == "") {
			return "", "", toolErrorf("exec: give argv or command, one of them")
		}
		rec, err := r.k.Exec(ctx, proto.ExecArgs{Argv: a.Argv, Command: a.Command, Stdin: a.Stdin})
		if err != nil {
			return "", "", err
		}
		return resultText(rec.Status, rec.TimedOut, "", rec.Stdout, rec.Stderr, rec.Truncated), "", nil
	case "fetch":
		return r.fetch(ctx, a.URL, a.Method)
	case "finish":
		s := strings.TrimSpace(a.Summary)
		if s == "" {
			return "", "", toolErrorf("finish: give a summary")
		}
		return "finished", s, nil
	}
	return "", "", toolErrorf("no tool %q; the tools are state_read, state_write, state_list, remember, recall, exec, fetch, finish", tc.Function.Name)
}

func clip(s string) string {
	if len(s) <= maxResult {
		return s
	}
	i := maxResult
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("\n(%d more bytes not shown)", len(s)-i)
}

// toolError is a call the model got wrong (an unknown tool, bad
// arguments): it goes back to the model.
type toolError struct{ msg string }

func (e toolError) Error() string { return e.msg }

func toolErrorf(format string, args ...any) error { return toolError{fmt.Sprintf(format, args...)} }

// resultText tells the model how an exec or a tool call went: its status,
// a timeout or note, its output, and whether it was cut.
func resultText(status int, timedOut bool, note, stdout, stderr string, truncated bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit status %d", status)
	if timedOut {
		b.WriteString(" (timed out)")
	}
	if note != "" {
		b.WriteString(" (" + note + ")")
	}
	if stdout != "" {
		b.WriteString("\nstdout:\n" + stdout)
	}
	if stderr != "" {
		b.WriteString("\nstderr:\n" + stderr)
	}
	if truncated {
		b.WriteString("\n(output truncated by the policy's output cap)")
	}
	return clip(b.String())
}
