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

var tools = []tool{
	{"state_read", "Read the value of one key of your state.",
		`{"type":"object","properties":{"key":{"type":"string","description":"the key, e.g. notes/disk"}},"required":["key"]}`},
	{"state_write", "Save a value under a key of your state (replacing what was there).",
		`{"type":"object","properties":{"key":{"type":"string"},"value":{"type":"string","description":"UTF-8 text"}},"required":["key","value"]}`},
	{"state_list", "List the keys of your state, with sizes, optionally under a prefix.",
		`{"type":"object","properties":{"prefix":{"type":"string","description":"e.g. notes/ (empty: all)"}}}`},
	{"remember", "Keep a memory for later runs.",
		`{"type":"object","properties":{"text":{"type":"string"},"kind":{"type":"string","enum":["working","episodic","semantic"]},"tags":{"type":"array","items":{"type":"string"}}},"required":["text"]}`},
	{"recall", "Search your memories; best matches first.",
		`{"type":"object","properties":{"query":{"type":"string"},"k":{"type":"integer","minimum":1,"maximum":50}},"required":["query"]}`},
	{"exec", "Run an allowed program in your workspace and get its exit status and output. Give argv (a program and its arguments) or command (one line).",
		`{"type":"object","properties":{"argv":{"type":"array","items":{"type":"string"}},"command":{"type":"string"},"stdin":{"type":"string"}}}`},
	{"fetch", "Fetch a URL (http or https, on a host your policy allows) and get its status and body.",
		`{"type":"object","properties":{"url":{"type":"string"},"method":{"type":"string","enum":["GET","HEAD"]}},"required":["url"]}`},
	{"finish", "End the task, with a short summary of what you did and found.",
		`{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}`},
}

// Tools returns the tools in the endpoint's format.
func Tools() []openai.Tool {
	out := make([]openai.Tool, len(tools))
	for i, t := range tools {
		out[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.name, Description: t.desc, Parameters: json.RawMessage(t.params)}}
	}
	return out
}

// maxResult bounds what one tool gives back to the model.
const maxResult = 16 << 10

// call runs one tool call. It returns the text for the model; summary is
// set by finish; err is a failed call (the model sees it).
func (r *Runner) call(ctx context.Context, tc openai.ToolCall) (out, summary string, err error) {
	var a struct {
		Key     string   `json:"key"`
		Value   *string  `json:"value"`
		Prefix  string   `json:"prefix"`
		Text    string   `json:"text"`
		Kind    string   `json:"kind"`
		Tags    []string `json:"tags"`
		Query   string   `json:"query"`
		K       int      `json:"k"`
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
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return "", "", toolErrorf("%s: arguments are not the JSON object its schema asks for: %v", tc.Function.Name, err)
	}
	switch tc.Function.Name {
	case "state_read":
		if a.Key == "" {
			return "", "", toolErrorf("state_read: give a key")
		}
		v, err := r.k.StateLoad(ctx, a.Key)
		if err != nil {
			return "", "", err
		}
		if !utf8.Valid(v) {
			return fmt.Sprintf("(%d bytes of binary data)", len(v)), "", nil
		}
		return clip(string(v)), "", nil
	case "state_write":
		if a.Key == "" || a.Value == nil {
			return "", "", toolErrorf("state_write: give a key and a value")
		}
		if err := r.k.StateSave(ctx, a.Key, []byte(*a.Value)); err != nil {
			return "", "", err
		}
		return fmt.Sprintf("saved %s (%d bytes)", a.Key, len(*a.Value)), "", nil
	case "state_list":
		recs, err := r.k.StateList(ctx, a.Prefix)
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
		if strings.TrimSpace(a.Text) == "" {
			return "", "", toolErrorf("remember: give the text to remember")
		}
		m, err := r.k.Remember(ctx, proto.MemoryInput{Kind: a.Kind, Text: a.Text, Tags: a.Tags, Source: "run:" + r.cfg.Run})
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("remembered as %s (%s)", m.ID, m.Kind), "", nil
	case "recall":
		if strings.TrimSpace(a.Query) == "" {
			return "", "", toolErrorf("recall: give a query")
		}
		k := a.K
		if k <= 0 || k > 50 {
			k = 5
		}
		mems, err := r.k.Recall(ctx, a.Query, k)
		if err != nil {
			return "", "", err
		}
		var b strings.Builder
		for _, m := range mems {
			fmt.Fprintf(&b, "- %s [%s, %s, score %.3f] %s\n", m.ID, m.Kind, m.Created.Format("2006-01-02"), m.Score, oneLine(m.Text, 1000))
		}
		if b.Len() == 0 {
			return "(nothing recalled)", "", nil
		}
		return clip(b.String()), "", nil
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
