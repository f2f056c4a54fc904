package agent

import (
	"context"
	"encoding/json"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/proto"
)

// wasmPrefix names the model's function for WASM tool NAME: wasm_NAME.
const wasmPrefix = "wasm_"

// wasmTools are the WASM tools the agent's policy lets it run, as
// functions: the manifest's description and input schema; a call's
// arguments are the tool's input. None when the kernel lists none (or
// cannot: the run goes on with the other tools).
func (r *Runner) wasmTools(ctx context.Context) []openai.Tool {
	infos, err := r.k.ToolList(ctx)
	if err != nil {
		return nil
	}
	var out []openai.Tool
	for _, t := range infos {
		if !t.Allowed || len(t.InputSchema) == 0 {
			continue
		}
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name:        wasmPrefix + t.Name,
			Description: "A sandboxed tool (it sees your workspace at /work, nothing else, no network). " + t.Description,
			Parameters:  t.InputSchema,
		}})
	}
	return out
}

// callWasm runs WASM tool name with the call's arguments as its input.
func (r *Runner) callWasm(ctx context.Context, name, args string) (string, error) {
	args = strings.TrimSpace(args)
	if args == "" {
		args = "{}"
	}
	if !json.Valid([]byte(args)) {
		return "", toolErrorf("%s%s: arguments are not JSON", wasmPrefix, name)
	}
	rec, err := r.k.ToolRun(ctx, proto.ToolRunArgs{Tool: name, Input: args})
	if err != nil {
		return "", err
	}
	var note string
	if rec.Trap != "" {
		note = "trapped: " + rec.Trap
	}
	return resultText(rec.Status, rec.TimedOut, note, rec.Stdout, rec.Stderr, rec.Truncated), nil
}
