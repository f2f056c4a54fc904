package kernel

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/wasm"
)

// toolbox is the kernel's WASM runner, made on first use: a daemon whose
// agents run no tools compiles nothing.
type toolbox struct {
	once sync.Once
	r    *wasm.Runner
}

func (k *Kernel) toolRunner() *wasm.Runner {
	k.tools.once.Do(func() { k.tools.r = wasm.New(k.cfg.ToolsDir()) })
	return k.tools.r
}

// closeTools ends the runner's runtimes and compiled modules.
func (k *Kernel) closeTools() {
	k.tools.once.Do(func() {}) // no runner after this
	if k.tools.r != nil {
		k.tools.r.Close(context.Background())
	}
}

// toolTarget is the target of a tool.run's audit entry.
func toolTarget(agent, tool, outcome string) string {
	return agent + ":tool " + clipTarget(tool, 64) + outcome
}

// ToolRun runs a WASM tool for a.Agent under its policy: the tool must be
// on tools.allow; it sees the run's (or the agent's) workspace at /work
// and nothing else of the host, no network; the policy's tools.memory and
// tools.timeout bound it, exec.output_cap its output; the exec budget
// counts it. Each call is audited with its exit status and output digest,
// each refusal with the rule that refused it.
func (k *Kernel) ToolRun(ctx context.Context, c *Cred, a proto.ToolRunArgs, raw []byte) (proto.ToolRecord, error) {
	deny := func(err *proto.Error, target string) (proto.ToolRecord, error) {
		k.auditDenied(c, proto.OpToolRun, target, raw, err.Code)
		return proto.ToolRecord{}, err
	}
	if err := k.gate(call{op: proto.OpToolRun, c: c, agent: a.Agent, raw: raw, target: toolTarget(a.Agent, a.Tool, "")}); err != nil {
		return proto.ToolRecord{}, err
	}
	if !wasm.ValidName(a.Tool) {
		return proto.ToolRecord{}, proto.Errorf(proto.EINVAL, "tool %q: a name is letters, digits, - and _", a.Tool)
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.ToolRecord{}, err
	}
	terr := p.CheckTool(a.Tool)
	if ask := policy.AsAsked(terr); ask != nil {
		if perr := k.ask(ctx, c, a.Agent, proto.OpToolRun, a.Tool, p, ask); perr != nil {
			return deny(perr, toolTarget(a.Agent, a.Tool, " ["+ask.Rule+"]"))
		}
		terr = nil
	}
	if terr != nil {
		var d *policy.Denied
		if errors.As(terr, &d) {
			return deny(proto.Errorf(proto.EPERM, "tool %s refused: %s (policy rule %s)", a.Tool, d.Reason, d.Rule), toolTarget(a.Agent, a.Tool, " ["+d.Rule+"]"))
		}
		return proto.ToolRecord{}, proto.Errorf(proto.EINVAL, "%v", terr)
	}
	timeout := p.Tools.Timeout.D()
	if timeout <= 0 {
		timeout = wasm.DefaultTimeout
	}
	if a.Timeout != "" {
		t, err := time.ParseDuration(a.Timeout)
		if err != nil || t <= 0 {
			return proto.ToolRecord{}, proto.Errorf(proto.EINVAL, "timeout %q: want a duration such as 10s", a.Timeout)
		}
		timeout = min(timeout, t)
	}
	if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Execs: 1}); qerr != nil {
		return deny(qerr, toolTarget(a.Agent, a.Tool, " [budget]"))
	}
	run := k.callerRun(c, a.Agent)
	dir := filepath.Join(k.cfg.Data, "work", a.Agent, "exec")
	if run != nil {
		dir = run.Spec().Dir
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return proto.ToolRecord{}, ioError(err)
	}
	res, err := k.toolRunner().Run(ctx, wasm.Spec{
		Tool: a.Tool, Args: a.Args, Stdin: []byte(a.Input),
		Mounts: []wasm.Mount{{Host: dir, Guest: wasm.GuestWork}},
		Env:    []string{"HOME=" + wasm.GuestWork, "PWD=" + wasm.GuestWork, "LANG=C.UTF-8", "OXIOS_AGENT=" + a.Agent},
		Memory: int64(p.Tools.Memory), Timeout: timeout, Cap: int(p.Exec.OutputCap),
	})
	if errors.Is(err, wasm.ErrNoTool) {
		return deny(proto.Errorf(proto.ENOENT, "no tool %s in %s", a.Tool, k.toolRunner().Dir()), toolTarget(a.Agent, a.Tool, ""))
	}
	if err != nil {
		return deny(proto.Errorf(proto.ENOEXEC, "%v", err), toolTarget(a.Agent, a.Tool, ""))
	}
	if res.Compile > 0 {
		k.log.Info("wasm tool compiled", "tool", a.Tool, "seconds", res.Compile.Seconds())
	}
	h := blake3.New(32, nil)
	h.Write(res.Stdout)
	h.Write(res.Stderr)
	digest := hex.EncodeToString(h.Sum(nil))
	rec := proto.ToolRecord{
		Type: proto.RecordTool, Agent: a.Agent, Run: c.Run, Tool: a.Tool, Status: res.Status, TimedOut: res.TimedOut, Trap: res.Trap,
		Stdout: strings.ToValidUTF8(string(res.Stdout), "\uFFFD"), Stderr: strings.ToValidUTF8(string(res.Stderr), "\uFFFD"),
		Truncated: res.Truncated, Duration: res.Duration.Seconds(), Compile: res.Compile.Seconds(), Digest: digest,
	}
	outcome := fmt.Sprintf(" => status %d", res.Status)
	switch {
	case res.TimedOut:
		outcome = fmt.Sprintf(" => timed out after %s", timeout)
	case res.Trap != "":
		outcome = " => trapped"
	}
	rec.Text = a.Tool + outcome
	// What the sandbox refused is on the log as refusals, beside the
	// call's own entry: each path the tool reached for outside its
	// workspace, and a call stopped at its time limit.
	for _, p := range res.Refused {
		k.auditDenied(c, proto.OpToolRun, toolTarget(a.Agent, a.Tool, " [sandbox] "+p), raw, proto.EPERM)
	}
	if res.TimedOut {
		k.auditDenied(c, proto.OpToolRun, toolTarget(a.Agent, a.Tool, outcome+" [tools.timeout]"), raw, proto.ETIMEDOUT)
	}
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpToolRun, Target: toolTarget(a.Agent, a.Tool, outcome+" output "+digest[:16]), Args: audit.ArgsDigest(raw), Result: "ok"}, data: &rec}
	if err := k.commitExec(ctx, a.Agent, run, t); err != nil {
		return proto.ToolRecord{}, err
	}
	return rec, nil
}

// ToolList calls fn with each tool in the tools folder, and whether
// agent's policy lets it run the tool.
func (k *Kernel) ToolList(ctx context.Context, c *Cred, a proto.ToolListArgs, raw []byte, fn func(*proto.ToolInfoRecord) error) error {
	if err := k.gate(call{op: proto.OpToolList, c: c, agent: a.Agent, raw: raw}); err != nil {
		return err
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return err
	}
	ms, err := k.toolRunner().List()
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return proto.Errorf(proto.EIO, "tools: %v", err)
	}
	for _, m := range ms {
		rec := proto.ToolInfoRecord{Type: proto.RecordToolInfo, Name: m.Name, Description: m.Description, InputSchema: m.InputSchema, Allowed: p.CheckTool(m.Name) == nil}
		if err := fn(&rec); err != nil {
			return err
		}
	}
	return nil
}
