package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Exec runs a command for a.Agent under its policy: the program must be
// on the policy's exec.allow list, shell metacharacters need exec.shell,
// the run's (or the agent's) workspace is its folder, the policy's
// timeout, output cap and limits bound it, and the exec budget counts it.
// Each exec is audited with its command, exit status and output digest;
// each refusal with the rule that refused it.
func (k *Kernel) Exec(ctx context.Context, c *Cred, a proto.ExecArgs, raw []byte) (proto.ExecRecord, error) {
	deny := func(err *proto.Error, target string) (proto.ExecRecord, error) {
		k.auditDenied(c, proto.OpExec, target, raw, err.Code)
		return proto.ExecRecord{}, err
	}
	if err := k.gate(call{op: proto.OpExec, c: c, agent: a.Agent, raw: raw, target: runspec.ExecTarget(a.Agent, a.Argv, a.Command, "")}); err != nil {
		return proto.ExecRecord{}, err
	}
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.ExecRecord{}, err
	}
	cmd, cerr := p.CheckExec(a.Argv, a.Command)
	if ask := policy.AsAsked(cerr); ask != nil {
		if perr := k.ask(ctx, c, a.Agent, proto.OpExec, policy.Quote(cmd.Argv), p, ask); perr != nil {
			return deny(perr, runspec.ExecTarget(a.Agent, cmd.Argv, "", " ["+ask.Rule+"]"))
		}
		cerr = nil
	}
	if cerr != nil {
		if d := policy.AsDenied(cerr); d != nil {
			return deny(d.Refused("exec"), runspec.ExecTarget(a.Agent, a.Argv, a.Command, " ["+d.Rule+"]"))
		}
		return proto.ExecRecord{}, proto.Errorf(proto.EINVAL, "%v", cerr)
	}
	timeout, terr := runspec.ExecTimeout(p, a.Timeout)
	if terr != nil {
		return proto.ExecRecord{}, terr
	}
	if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Execs: 1}); qerr != nil {
		return deny(qerr, runspec.ExecTarget(a.Agent, cmd.Argv, "", " [budget]"))
	}
	prog, err := runspec.LookPath(cmd.Argv[0])
	if err != nil {
		return deny(proto.AsError(err), runspec.ExecTarget(a.Agent, cmd.Argv, "", ""))
	}
	argv := append([]string{prog}, cmd.Argv[1:]...)
	run := k.callerRun(c, a.Agent)
	dir, err := runspec.Workspace(k.cfg.Data, a.Agent, run)
	if err != nil {
		return proto.ExecRecord{}, proto.AsError(err)
	}
	sb, serr := runspec.Sandbox(k.box, a.Agent, p, dir, false, false)
	if serr != nil {
		return deny(serr, runspec.ExecTarget(a.Agent, cmd.Argv, "", " [sandbox.isolation]"))
	}
	home, release, err := runspec.ExecUID(sb, run, k.sup, dir)
	defer release()
	if err != nil {
		return proto.ExecRecord{}, proto.AsError(err)
	}
	res, err := supervisor.Exec(ctx, supervisor.ExecSpec{
		Argv: argv, Dir: dir, Stdin: []byte(a.Stdin), Timeout: timeout, Cap: runspec.ExecCap(p), Limits: runspec.Limits(p), Cgroups: k.sup.Cgroups,
		Env: runspec.ExecEnv(a.Agent, home), Sandbox: sb,
	})
	if err != nil {
		return deny(proto.Errorf(proto.ENOENT, "exec %s: %v", cmd.Argv[0], err), runspec.ExecTarget(a.Agent, cmd.Argv, "", ""))
	}
	rec, outcome := runspec.ExecRecord(a.Agent, c.Run, cmd.Argv, res, timeout)
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpExec, Target: runspec.ExecTarget(a.Agent, cmd.Argv, "", outcome+" output "+rec.Digest[:16]), Args: audit.ArgsDigest(raw), Result: "ok"}, data: &rec}
	if err := k.commitExec(ctx, a.Agent, run, t); err != nil {
		return proto.ExecRecord{}, err
	}
	return rec, nil
}

// commitExec charges one exec to agent (and to run, if the caller is
// one) and makes t, the exec's or tool call's audit entry, durable with
// the charge.
func (k *Kernel) commitExec(ctx context.Context, agent string, run *supervisor.Run, t *tx) error {
	if err := k.budgets.ChargeRun(agent, proto.Budget{Execs: 1}, budgetRun(run), k.submitBudget(ctx, agent, t)); err != nil {
		return err
	}
	<-t.done
	return t.err
}
