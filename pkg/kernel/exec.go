package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/supervisor"
	"github.com/oxios/oxios/pkg/work"
)

// Exec runs a command for a.Agent under its policy: the program must be
// on the policy's exec.allow list, shell metacharacters need exec.shell,
// the run's (or the agent's) workspace is its folder, the policy's
// timeout, output cap and limits bound it, and the exec budget counts it.
// Each exec is audited with its command, exit status and output digest;
// each refusal with the rule that refused it.
func (k *Kernel) Exec(ctx context.Context, c *Cred, a proto.ExecArgs, raw []byte) (proto.ExecRecord, error) {
	return sysExec.Call(k, ctx, c, a, raw)
}

func (k *Kernel) exec(ctx context.Context, c *Cred, a proto.ExecArgs, raw []byte) (proto.ExecRecord, error) {
	deny := func(err *proto.Error, target string) (proto.ExecRecord, error) {
		k.auditDenied(c, proto.OpExec, target, raw, err.Code)
		return proto.ExecRecord{}, err
	}
	dir, werr := k.workFolder(a.Work)
	if werr != nil {
		return proto.ExecRecord{}, werr
	}
	if dir != "" {
		if c.Run != "" {
			return proto.ExecRecord{}, proto.Errorf(proto.EINVAL, "run %s: an exec of a run works in the run's folder; --work is for an exec of its own", c.Run)
		}
		// The folder is asked of [work] allow, as a spawn's is; the
		// dispatcher asked the exec's own question.
		q := asking{ask: askWork, key: dir}
		if err := k.enforce(c, a.Agent, proto.OpExec, target(a.Agent, dir), raw, func(p *policy.Policy) error {
			return k.hooked(k.root, p, c, proto.OpExec, a.Agent, q)
		}); err != nil {
			return proto.ExecRecord{}, err
		}
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
	if cerr == nil {
		cerr = k.hook(ctx, p, c, proto.OpExec, a.Agent, asking{ask: askExec, argv: cmd.Argv}, false)
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
	run := k.callerRun(c, a.Agent)
	x := runspec.Execution{Agent: a.Agent, Argv: cmd.Argv, Stdin: a.Stdin, Timeout: timeout, Run: run}
	var kept *work.Meta
	var herr error
	if dir != "" {
		// Its changes wait as its work, under an id of its own.
		x.Work = dir
		id := runspec.NewExecID(func(id string) bool { _, err := k.works.Load(id); return err == nil })
		if err := k.beginWork(id, a.Agent, dir); err != nil {
			return proto.ExecRecord{}, err
		}
		x.Harvest = func(upper string) {
			if upper == "" {
				herr = errors.New("the exec's sandbox never sent the folder of its upper layer")
				return
			}
			kept, herr = k.works.Harvest(id, upper, time.Now())
		}
		defer func() {
			if kept == nil {
				k.works.Remove(id)
			}
		}()
	}
	res, err := runspec.RunExec(ctx, k.box, k.sup, k.cfg.Data, p, x)
	var refused *runspec.Refusal
	if errors.As(err, &refused) {
		return deny(refused.Err, runspec.ExecTarget(a.Agent, cmd.Argv, "", refused.Rule))
	} else if err != nil {
		return proto.ExecRecord{}, err
	}
	rec, outcome := runspec.ExecRecord(a.Agent, c.Run, cmd.Argv, res, timeout)
	if kept != nil {
		w := workRecord(kept)
		rec.Work, rec.ID, rec.Changes = dir, kept.Run, w.Changes
		outcome += " work " + kept.Run + " " + kept.Digest
		if w.Changes > 0 {
			rec.Text += fmt.Sprintf("; %d changes to %s wait as work %s", w.Changes, dir, kept.Run)
		} else {
			rec.Text += "; no change to " + dir
		}
	}
	t := &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpExec, Target: runspec.ExecTarget(a.Agent, cmd.Argv, "", outcome+" output "+rec.Digest[:16]), Args: audit.ArgsDigest(raw), Result: "ok"}, data: &rec}
	if err := k.commitExec(ctx, a.Agent, run, t); err != nil {
		return proto.ExecRecord{}, err
	}
	if dir != "" && kept == nil {
		return rec, proto.Errorf(proto.EIO, "the exec ended (status %d) but what it changed in %s was not kept: %v", rec.Status, dir, herr)
	}
	return rec, nil
}

// commitExec charges one exec to agent (and to run, if the caller is
// one) and makes t, the exec's or tool call's audit entry, durable with
// the charge.
func (k *Kernel) commitExec(ctx context.Context, agent string, run *supervisor.Run, t *tx) error {
	return k.budgets.ChargeAudited(ctx, agent, proto.Budget{Execs: 1}, budgetRun(run), t.entry, t.data)
}
