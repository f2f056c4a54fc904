package kernel

import (
	"context"
	"fmt"
	"time"

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

// budgetFile is an agent's sys/budget.json (fork.go resets a copy's).
type budgetFile = budget.File

// budgetChange is the change that stores an agent's budget file value.
func budgetChange(agent string, value []byte) *state.Change {
	return &state.Change{Agent: agent, Space: state.SpaceSys, Key: sysBudget, Value: value}
}

// submitBudget is a ledger's commit: it submits t with the change of
// agent's budget file, under the ledger's lock so that changes commit in
// order, and gives t a done channel to wait on after the lock is let go.
func (k *Kernel) submitBudget(ctx context.Context, agent string, t *tx) func(value []byte) error {
	return func(value []byte) error {
		t.change = budgetChange(agent, value)
		t.done = make(chan struct{})
		return k.submit(ctx, t, false)
	}
}

// budgetRecord builds the "budget" record of agent, and of run r when
// given.
func (k *Kernel) budgetRecord(agent string, p *policy.Policy, r *supervisor.Run) proto.BudgetRecord {
	lim, run, used := k.budgets.Limits(agent, p)
	rec := proto.BudgetRecord{Type: proto.RecordBudget, Agent: agent, Limit: lim, RunLimit: run, Used: used}
	rec.Since = k.budgets.Since(agent)
	rec.Text = fmt.Sprintf("%s: %d tokens, cost %.4g, %s wall, %d execs used", agent, used.Tokens, used.Cost, time.Duration(used.Wall*float64(time.Second)).Round(time.Second), used.Execs)
	if r != nil {
		u := runUsed(r)
		rec.Run, rec.RunUsed = r.ID(), &u
	}
	return rec
}

func runUsed(r *supervisor.Run) proto.Budget {
	tokens, cost, execs, wall := r.Usage()
	return proto.Budget{Tokens: tokens, Cost: cost, Wall: wall.Seconds(), Execs: execs}
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
	lim, runLim, used := k.budgets.Limits(agent, p)
	if why := budget.Over(used, more, lim, false); why != "" {
		return proto.Errorf(proto.EDQUOT, "agent %q is over its budget: %s (ox-budget show -a %s)", agent, why, agent)
	}
	if r := k.callerRun(c, agent); r != nil {
		if why := budget.Over(runUsed(r), more, runLim, false); why != "" {
			return proto.Errorf(proto.EDQUOT, "run %s is over its budget: %s", r.ID(), why)
		}
	}
	return k.askBudget(c, agent, p, used)
}

// endOverBudget ends a run that was refused for its budget, if it does
// not end itself within the grace period (the runner ends with a record
// saying why; a process that ignores the refusal is stopped).
func (k *Kernel) endOverBudget(r *supervisor.Run, why string) {
	if r == nil {
		return
	}
	go func() {
		t := time.NewTimer(supervisor.Grace)
		defer t.Stop()
		select {
		case <-r.Done():
		case <-t.C:
			r.End("over budget: " + why)
		}
	}()
}

func (k *Kernel) budgetAgent(c *Cred, op, agent string, raw []byte, admin bool) (*policy.Policy, error) {
	if err := k.gate(call{op: op, c: c, agent: agent, raw: raw}); err != nil {
		return nil, err
	}
	if admin && !c.Admin {
		err := proto.Errorf(proto.EPERM, "only the admin changes budgets")
		k.auditDenied(c, op, agent, raw, err.Code)
		return nil, err
	}
	return k.policyOf(agent)
}

// BudgetShow returns agent's budget.
func (k *Kernel) BudgetShow(ctx context.Context, c *Cred, agent string, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.budgetAgent(c, proto.OpBudgetShow, agent, raw, false)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	return k.budgetRecord(agent, p, k.callerRun(c, agent)), nil
}

// BudgetSet replaces agent's limits (admin only).
func (k *Kernel) BudgetSet(ctx context.Context, c *Cred, a proto.BudgetSetArgs, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.budgetAgent(c, proto.OpBudgetSet, a.Agent, raw, true)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	for _, b := range []*proto.Budget{a.Limit, a.RunLimit} {
		if b != nil && (b.Tokens < 0 || b.Cost < 0 || b.Wall < 0 || b.Execs < 0) {
			return proto.BudgetRecord{}, proto.Errorf(proto.EINVAL, "budget limits may not be negative")
		}
	}
	return k.budgetChangeOp(ctx, c, proto.OpBudgetSet, a.Agent, raw, p, func(b *budget.File) {
		if a.Limit != nil {
			l := *a.Limit
			b.Limit = &l
		}
		if a.RunLimit != nil {
			l := *a.RunLimit
			b.RunLimit = &l
		}
	})
}

// BudgetReset zeroes what agent has used (admin only).
func (k *Kernel) BudgetReset(ctx context.Context, c *Cred, agent string, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.budgetAgent(c, proto.OpBudgetReset, agent, raw, true)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	return k.budgetChangeOp(ctx, c, proto.OpBudgetReset, agent, raw, p, func(b *budget.File) {
		b.Used = proto.Budget{}
		b.Since = time.Now().UTC()
	})
}

func (k *Kernel) budgetChangeOp(ctx context.Context, c *Cred, op, agent string, raw []byte, p *policy.Policy, fn func(*budget.File)) (proto.BudgetRecord, error) {
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: op, Target: agent + ":" + sysBudget, Args: audit.ArgsDigest(raw)}}
	err := k.budgets.Update(agent, fn, k.submitBudget(ctx, agent, t))
	if err == nil {
		<-t.done
		err = t.err
	}
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	return k.budgetRecord(agent, p, nil), nil
}

// BudgetCheck answers whether the caller may spend about a.Tokens more:
// EDQUOT, audited, if that would pass the agent's or the run's limit, and
// the run is ended. A check that passes changes nothing and is not
// audited (like a read); the charge that follows is.
func (k *Kernel) BudgetCheck(ctx context.Context, c *Cred, a proto.BudgetCheckArgs, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.budgetAgent(c, proto.OpBudgetCheck, a.Agent, raw, false)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	if a.Tokens < 0 {
		return proto.BudgetRecord{}, proto.Errorf(proto.EINVAL, "tokens %d: want 0 or more", a.Tokens)
	}
	if qerr := k.checkBudget(c, a.Agent, p, proto.Budget{Tokens: a.Tokens}); qerr != nil {
		k.auditDenied(c, proto.OpBudgetCheck, a.Agent+":"+c.Run, raw, qerr.Code)
		k.endOverBudget(k.callerRun(c, a.Agent), qerr.Message)
		return proto.BudgetRecord{}, qerr
	}
	return k.budgetRecord(a.Agent, p, k.callerRun(c, a.Agent)), nil
}

// BudgetCharge charges the usage a model call reported to the agent and
// the caller's run, priced with the configured rates. It is charged even
// when it passes a limit (it was spent); then the reply is EDQUOT and the
// run is ended.
func (k *Kernel) BudgetCharge(ctx context.Context, c *Cred, a proto.BudgetChargeArgs, raw []byte) (proto.BudgetRecord, error) {
	p, err := k.budgetAgent(c, proto.OpBudgetCharge, a.Agent, raw, false)
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	if a.PromptTokens < 0 || a.CompletionTokens < 0 {
		return proto.BudgetRecord{}, proto.Errorf(proto.EINVAL, "token counts may not be negative")
	}
	d := proto.Budget{
		Tokens: a.PromptTokens + a.CompletionTokens,
		Cost:   (float64(a.PromptTokens)*k.liveCfg().LLM.PromptPrice + float64(a.CompletionTokens)*k.liveCfg().LLM.CompletionPrice) / 1e6,
	}
	r := k.callerRun(c, a.Agent)
	lim, runLim, used := k.budgets.Limits(a.Agent, p)
	var qerr *proto.Error
	// A charge was spent, not asked for: the message says what is used
	// with it.
	spent := func(u proto.Budget) proto.Budget {
		u.Tokens += d.Tokens
		u.Cost = proto.AddCost(u.Cost, d.Cost)
		return u
	}
	if why := budget.Over(spent(used), proto.Budget{}, lim, false); why != "" {
		qerr = proto.Errorf(proto.EDQUOT, "agent %q is over its budget: %s (ox-budget show -a %s)", a.Agent, why, a.Agent)
	} else if r != nil {
		if why := budget.Over(spent(runUsed(r)), proto.Budget{}, runLim, false); why != "" {
			qerr = proto.Errorf(proto.EDQUOT, "run %s is over its budget: %s", r.ID(), why)
		}
	}
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpBudgetCharge, Target: a.Agent + ":" + sysBudget, Args: audit.ArgsDigest(raw), Result: "ok"}}
	if qerr != nil {
		t.entry.Result = qerr.Code
	}
	err = k.budgets.Charge(a.Agent, d, func(value []byte) error {
		if r != nil {
			r.Charge(d.Tokens, d.Cost, 0)
		}
		return k.submitBudget(ctx, a.Agent, t)(value)
	})
	if err == nil {
		<-t.done
		err = t.err
	}
	if err != nil {
		return proto.BudgetRecord{}, err
	}
	if qerr != nil {
		k.endOverBudget(r, qerr.Message)
		return proto.BudgetRecord{}, qerr
	}
	return k.budgetRecord(a.Agent, p, r), nil
}
