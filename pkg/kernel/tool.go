package kernel

import (
	"context"
	"errors"
	"os"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/wasm"
)

// toolRunner is the kernel's WASM runner, made on first use.
func (k *Kernel) toolRunner() *wasm.Runner {
	return k.tools.Runner(k.cfg.ToolsDir(), k.cfg.ToolsCacheDir())
}

// closeTools ends the runner's runtimes and compiled modules.
func (k *Kernel) closeTools() { k.tools.Close(context.Background()) }

// ToolRun runs a WASM tool for a.Agent under its policy: the tool must be
// on tools.allow; it sees the run's (or the agent's) workspace at /work
// and nothing else of the host, no network; the policy's tools.memory and
// tools.timeout bound it, exec.output_cap its output; the exec budget
// counts it. Each call is audited with its exit status and output digest,
// each refusal with the rule that refused it.
func (k *Kernel) ToolRun(ctx context.Context, c *Cred, a proto.ToolRunArgs, raw []byte) (proto.ToolRecord, error) {
	return sysToolRun.Call(k, ctx, c, a, raw)
}

func (k *Kernel) toolRun(ctx context.Context, c *Cred, a proto.ToolRunArgs, raw []byte) (proto.ToolRecord, error) {
	deny := func(err *proto.Error, target string) (proto.ToolRecord, error) {
		k.auditDenied(c, proto.OpToolRun, target, raw, err.Code)
		return proto.ToolRecord{}, err
	}
	if !wasm.ValidName(a.Tool) {
		return proto.ToolRecord{}, proto.Errorf(proto.EINVAL, "tool %q: a name is letters, digits, - and _", a.Tool)
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.ToolRecord{}, err
	}
	terr := answer(p, asking{ask: askTool, key: a.Tool})
	if ask := policy.AsAsked(terr); ask != nil {
		if perr := k.ask(ctx, c, a.Agent, proto.OpToolRun, a.Tool, p, ask); perr != nil {
			return deny(perr, runspec.ToolTarget(a.Agent, a.Tool, " ["+ask.Rule+"]"))
		}
		terr = nil
	}
	if terr == nil {
		terr = k.hook(ctx, p, c, proto.OpToolRun, a.Agent, asking{ask: askTool, key: a.Tool}, false)
	}
	if terr != nil {
		if d := policy.AsDenied(terr); d != nil {
			return deny(d.Refused("tool "+a.Tool), runspec.ToolTarget(a.Agent, a.Tool, " ["+d.Rule+"]"))
		}
		return proto.ToolRecord{}, proto.Errorf(proto.EINVAL, "%v", terr)
	}
	timeout, verr := runspec.ToolTimeout(p, a.Timeout)
	if verr != nil {
		return proto.ToolRecord{}, verr
	}
	if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Execs: 1}); qerr != nil {
		return deny(qerr, runspec.ToolTarget(a.Agent, a.Tool, " [budget]"))
	}
	run := k.callerRun(c, a.Agent)
	call := runspec.ToolCall{Agent: a.Agent, Tool: a.Tool, Args: a.Args, Input: a.Input, Timeout: timeout, Caller: c.Run, Run: run}
	rec, outcome, refusals, err := runspec.RunTool(ctx, k.toolRunner(), k.cfg.Data, p, call, k.log)
	var refused *runspec.Refusal
	if errors.As(err, &refused) {
		return deny(refused.Err, runspec.ToolTarget(a.Agent, a.Tool, refused.Rule))
	} else if err != nil {
		return proto.ToolRecord{}, err
	}
	// What the sandbox refused is on the log as refusals, beside the
	// call's own entry.
	for _, r := range refusals {
		k.auditDenied(c, proto.OpToolRun, runspec.ToolTarget(a.Agent, a.Tool, r.Rule), raw, r.Err.Code)
	}
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpToolRun, Target: runspec.ToolTarget(a.Agent, a.Tool, outcome+" output "+rec.Digest[:16]), Args: audit.ArgsDigest(raw), Result: "ok"}, data: &rec}
	if err := k.commitExec(ctx, a.Agent, run, t); err != nil {
		return proto.ToolRecord{}, err
	}
	return rec, nil
}

// ToolList calls fn with each tool in the tools folder, and whether
// agent's policy lets it run the tool.
func (k *Kernel) ToolList(ctx context.Context, c *Cred, a proto.ToolListArgs, raw []byte, fn func(*proto.ToolInfoRecord) error) error {
	return sysToolList.Stream(k, ctx, c, a, raw, fn)
}

func (k *Kernel) toolList(ctx context.Context, c *Cred, a proto.ToolListArgs, raw []byte, fn func(*proto.ToolInfoRecord) error) error {
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return err
	}
	ms, err := k.toolRunner().List()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return proto.Errorf(proto.EIO, "tools: %v", err)
	}
	return proto.EmitAll(runspec.ToolInfos(ms, p), fn)
}
