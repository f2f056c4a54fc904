package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Budgets: what an agent, and each of its runs, may spend (tokens, cost,
// wall time, execs). The limits come from the agent's policy unless the
// admin set others with ox-budget; what was used is kept in the agent's
// sys/budget.json, changed by the same group commit as the audit entry of
// the charge, so a crash loses neither or both.

// budgetChange is the change that stores an agent's budget file value.
func budgetChange(agent string, value []byte) *state.Change {
	return &state.Change{Agent: agent, Space: state.SpaceSys, Key: sysBudget, Value: value}
}

// queueBudget is the ledger's budget.Queue: it submits the change of
// agent's budget file with e, under the ledger's lock so that changes
// commit in order, with a done channel to wait on after the lock is let
// go.
func (k *Kernel) queueBudget(ctx context.Context, agent string, value []byte, e *audit.Entry, data any) (func() error, error) {
	t := &tx{change: budgetChange(agent, value), entry: e, data: data, done: make(chan struct{})}
	if err := k.submit(ctx, t, false); err != nil {
		return nil, err
	}
	return func() error { <-t.done; return t.err }, nil
}

// budgetRun is r as its budget sees it: nil when r is.
func budgetRun(r *supervisor.Run) budget.Run {
	if r == nil {
		return nil
	}
	return r
}

// callerRun is c's run when it is a run of agent.
func (k *Kernel) callerRun(c *Cred, agent string) *supervisor.Run {
	if c.Run == "" || c.Agent != agent {
		return nil
	}
	r, _ := k.sup.Get(c.Run)
	return r
}

// checkBudget returns an EDQUOT error when spending more would take agent
// (or the caller's run) past a limit.
func (k *Kernel) checkBudget(c *Cred, agent string, p *policy.Policy, more proto.Budget) *proto.Error {
	used, qerr := k.budgets.Check(agent, p, budgetRun(k.callerRun(c, agent)), more)
	if qerr != nil {
		return qerr
	}
	return k.asks.AskBudget(c.Actor(), agent, p, used)
}

// BudgetShow returns agent's budget.
func (k *Kernel) BudgetShow(ctx context.Context, c *Cred, agent string, raw []byte) (proto.BudgetRecord, error) {
	return sysBudgetShow.Call(k, ctx, c, proto.AgentArgs{Agent: agent}, raw)
}

func (k *Kernel) budgetShow(_ context.Context, c *Cred, a proto.AgentArgs, _ []byte) (proto.BudgetRecord, error) {
	agent := a.Agent
	p, err := k.policyOf(agent)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	return k.budgets.Record(agent, p, budgetRun(k.callerRun(c, agent))), nil
}

// BudgetSet replaces agent's limits (admin only).
func (k *Kernel) BudgetSet(ctx context.Context, c *Cred, a proto.BudgetSetArgs, raw []byte) (proto.BudgetRecord, error) {
	return sysBudgetSet.Call(k, ctx, c, a, raw)
}

func (k *Kernel) budgetSet(ctx context.Context, c *Cred, a proto.BudgetSetArgs, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	set, qerr := budget.SetLimits(a.Limit, a.RunLimit)
	if qerr != nil {
		return proto.BudgetRecord{}, qerr
	}
	return k.budgetChangeOp(ctx, c, proto.OpBudgetSet, a.Agent, raw, p, set)
}

// BudgetReset zeroes what agent has used (admin only).
func (k *Kernel) BudgetReset(ctx context.Context, c *Cred, agent string, raw []byte) (proto.BudgetRecord, error) {
	return sysBudgetReset.Call(k, ctx, c, proto.AgentArgs{Agent: agent}, raw)
}

func (k *Kernel) budgetReset(ctx context.Context, c *Cred, a proto.AgentArgs, raw []byte) (proto.BudgetRecord, error) {
	agent := a.Agent
	p, err := k.policyOf(agent)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	return k.budgetChangeOp(ctx, c, proto.OpBudgetReset, agent, raw, p, budget.Reset)
}

func (k *Kernel) budgetChangeOp(ctx context.Context, c *Cred, op, agent string, raw []byte, p *policy.Policy, fn func(*budget.File)) (proto.BudgetRecord, error) {
	if err := k.notHere(c, op, agent, raw); err != nil {
		return proto.BudgetRecord{}, err
	}
	e := &audit.Entry{Actor: c.Actor(), Op: op, Target: agent + ":" + sysBudget, Args: audit.ArgsDigest(raw)}
	if err := k.budgets.Audited(ctx, agent, fn, e, nil); err != nil {
		return proto.BudgetRecord{}, err
	}
	return k.budgets.Record(agent, p, nil), nil
}

// BudgetCheck answers whether the caller may spend about a.Tokens more:
// EDQUOT, audited, if that would pass the agent's or the run's limit, and
// the run is ended. A check that passes changes nothing and is not
// audited (like a read); the charge that follows is.
func (k *Kernel) BudgetCheck(ctx context.Context, c *Cred, a proto.BudgetCheckArgs, raw []byte) (proto.BudgetRecord, error) {
	return sysBudgetCheck.Call(k, ctx, c, a, raw)
}

func (k *Kernel) budgetCheck(ctx context.Context, c *Cred, a proto.BudgetCheckArgs, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	if a.Tokens < 0 {
		return proto.BudgetRecord{}, proto.Errorf(proto.EINVAL, "tokens %d: want 0 or more", a.Tokens)
	}
	if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Tokens: a.Tokens}); qerr != nil {
		k.auditDenied(c, proto.OpBudgetCheck, a.Agent+":"+c.Run, raw, qerr.Code)
		k.callerRun(c, a.Agent).OverBudget(qerr.Message)
		return proto.BudgetRecord{}, qerr
	}
	return k.budgets.Record(a.Agent, p, budgetRun(k.callerRun(c, a.Agent))), nil
}

// BudgetCharge charges the usage a model call reported to the agent and
// the caller's run, priced with the configured rates. It is charged even
// when it passes a limit (it was spent); then the reply is EDQUOT and the
// run is ended.
func (k *Kernel) BudgetCharge(ctx context.Context, c *Cred, a proto.BudgetChargeArgs, raw []byte) (proto.BudgetRecord, error) {
	return sysBudgetCharge.Call(k, ctx, c, a, raw)
}

func (k *Kernel) budgetCharge(ctx context.Context, c *Cred, a proto.BudgetChargeArgs, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.policyOf(a.Agent)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	llm := k.liveCfg().LLM
	d, perr := budget.ModelCall(a, llm.PromptPrice, llm.CompletionPrice)
	if perr != nil {
		return proto.BudgetRecord{}, perr
	}
	r := k.callerRun(c, a.Agent)
	qerr := k.budgets.OverAfter(a.Agent, p, budgetRun(r), d)
	e := &audit.Entry{Actor: c.Actor(), Op: proto.OpBudgetCharge, Target: a.Agent + ":" + sysBudget, Args: audit.ArgsDigest(raw), Result: "ok"}
	if qerr != nil {
		e.Result = qerr.Code
	}
	if err := k.budgets.ChargeAudited(ctx, a.Agent, d, budgetRun(r), e, nil); err != nil {
		return proto.BudgetRecord{}, err
	}
	if qerr != nil {
		r.OverBudget(qerr.Message)
		return proto.BudgetRecord{}, qerr
	}
	return k.budgets.Record(a.Agent, p, budgetRun(r)), nil
}
