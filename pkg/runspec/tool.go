package runspec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
	"github.com/oxios/oxios/pkg/wasm"
)

// What a WASM tool call is started with, and the record of what it
// ended with.

// ToolTimeout is a tool call's timeout: the policy's tools.timeout
// (wasm.DefaultTimeout when unset), or the one asked ("": none; a
// duration such as 10s) when it is shorter.
func ToolTimeout(p *policy.Policy, asked string) (time.Duration, *proto.Error) {
	timeout := p.Tools.Timeout.D()
	if timeout <= 0 {
		timeout = wasm.DefaultTimeout
	}
	return shorter(timeout, asked)
}

// ToolSpec is a call of tool for agent under policy p: the workspace
// dir at wasm.GuestWork and nothing else of the host, p's tools.memory
// and exec.output_cap.
func ToolSpec(agent, tool string, args []string, input, dir string, p *policy.Policy, timeout time.Duration) wasm.Spec {
	return wasm.Spec{
		Tool: tool, Args: args, Stdin: []byte(input),
		Mounts: []wasm.Mount{{Host: dir, Guest: wasm.GuestWork}},
		Env:    []string{"HOME=" + wasm.GuestWork, "PWD=" + wasm.GuestWork, "LANG=C.UTF-8", "OXIOS_AGENT=" + agent},
		Memory: int64(p.Tools.Memory), Timeout: timeout, Cap: int(p.Exec.OutputCap),
	}
}

// ToolRecord is the record of a call of tool for agent (run: the
// caller's run, "" if none) that ended with res, and the outcome its
// audit entry names (" => status N", the timeout, or a trap).
func ToolRecord(agent, run, tool string, res wasm.Result, timeout time.Duration) (proto.ToolRecord, string) {
	rec := proto.ToolRecord{
		Type: proto.RecordTool, Agent: agent, Run: run, Tool: tool, Status: res.Status, TimedOut: res.TimedOut, Trap: res.Trap,
		Stdout: strings.ToValidUTF8(string(res.Stdout), "\uFFFD"), Stderr: strings.ToValidUTF8(string(res.Stderr), "\uFFFD"),
		Truncated: res.Truncated, Duration: res.Duration.Seconds(), Compile: res.Compile.Seconds(), Digest: outputDigest(res.Stdout, res.Stderr),
	}
	outcome := fmt.Sprintf(" => status %d", res.Status)
	switch {
	case res.TimedOut:
		outcome = fmt.Sprintf(" => timed out after %s", timeout)
	case res.Trap != "":
		outcome = " => trapped"
	}
	rec.Text = tool + outcome
	return rec, outcome
}

// ToolCall is a call of a WASM tool that its agent's policy allowed, as
// RunTool runs it.
type ToolCall struct {
	Agent, Tool string
	Args        []string
	Input       string
	Timeout     time.Duration
	// Caller is the caller's run ("" if none), which the record names;
	// Run is that run when it is a run of Agent: the tool sees its
	// workspace (Workspace).
	Caller string
	Run    *supervisor.Run
}

// RunTool runs x with runner under p, in its workspace under data
// (ToolSpec). A tool that did not run is a *Refusal (ToolError); one that
// ran gives its record and outcome (ToolRecord), and what its sandbox
// refused, to audit beside the call's own entry: each path the tool
// reached for outside its workspace (EPERM, rule " [sandbox] PATH"), and
// a call stopped at its time limit (ETIMEDOUT, the outcome and
// " [tools.timeout]").
func RunTool(ctx context.Context, runner *wasm.Runner, data string, p *policy.Policy, x ToolCall, log *slog.Logger) (rec proto.ToolRecord, outcome string, refused []Refusal, err error) {
	dir, done, err := Workspace(data, x.Agent, x.Run)
	if err != nil {
		return rec, "", nil, proto.AsError(err)
	}
	defer done()
	spec := ToolSpec(x.Agent, x.Tool, x.Args, x.Input, dir, p, x.Timeout)
	if x.Run != nil {
		// The run's workspace: what the tool writes is the run's (its
		// sandbox uid as root; rootless, oxiosd's own, which it already is).
		spec.Mounts[0].Owner = x.Run.UID()
	}
	res, err := runner.Run(ctx, spec)
	if err != nil {
		return rec, "", nil, &Refusal{Err: ToolError(err, x.Tool, runner.Dir())}
	}
	if res.Compile > 0 {
		log.Info("wasm tool compiled", "tool", x.Tool, "seconds", res.Compile.Seconds())
	}
	rec, outcome = ToolRecord(x.Agent, x.Caller, x.Tool, res, x.Timeout)
	for _, path := range res.Refused {
		refused = append(refused, Refusal{Err: proto.Errorf(proto.EPERM, "tool %s reached for %s outside its workspace", x.Tool, path), Rule: " [sandbox] " + path})
	}
	if res.TimedOut {
		refused = append(refused, Refusal{Err: proto.Errorf(proto.ETIMEDOUT, "tool %s%s", x.Tool, outcome), Rule: outcome + " [tools.timeout]"})
	}
	return rec, outcome, refused, nil
}

// ToolTarget is the target of a tool.run's audit entry.
func ToolTarget(agent, tool, outcome string) string {
	return agent + ":tool " + audit.Clip(tool, 64) + outcome
}

// ToolError is the error of a tool call that did not run: ENOENT when
// there is no such tool in dir, the tools folder, ENOEXEC otherwise.
func ToolError(err error, tool, dir string) *proto.Error {
	if errors.Is(err, wasm.ErrNoTool) {
		return proto.Errorf(proto.ENOENT, "no tool %s in %s", tool, dir)
	}
	return proto.Errorf(proto.ENOEXEC, "%v", err)
}

// ToolInfos are the records of the tools in ms, saying whether p lets
// its agent run each.
func ToolInfos(ms []wasm.Manifest, p *policy.Policy) []proto.ToolInfoRecord {
	recs := make([]proto.ToolInfoRecord, len(ms))
	for i, m := range ms {
		recs[i] = proto.ToolInfoRecord{Type: proto.RecordToolInfo, Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, Allowed: p.CheckTool(m.Name) == nil}
	}
	return recs
}
