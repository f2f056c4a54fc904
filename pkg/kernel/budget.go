package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
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

// budgetFile is sys/budget.json.
type budgetFile struct {
	Limit    *proto.Budget `json:"limit,omitempty"`
	RunLimit *proto.Budget `json:"run_limit,omitempty"`
	Used     proto.Budget  `json:"used"`
	Since    time.Time     `json:"since"`
}

// budgetLocked returns agent's budget file, read from the store on first
// use. k.budmu is held.
func (k *Kernel) budgetLocked(agent string) *budgetFile {
	if b, ok := k.budgets[agent]; ok {
		return b
	}
	b := &budgetFile{}
	if v, _, err := k.state.Load(state.Ref(state.SpaceSys, agent), sysBudget); err == nil {
		if err := json.Unmarshal(v, b); err != nil {
			k.log.Warn("budget file unreadable: starting from zero", "agent", agent, "err", err)
			*b = budgetFile{}
		}
	}
	k.budgets[agent] = b
	return b
}

// chargeLocked adds d to agent's use and returns the change that makes it
// durable. k.budmu is held, and the caller submits the change before it
// lets go of it, so that changes commit in the order they were made.
func (k *Kernel) chargeLocked(agent string, d proto.Budget) *state.Change {
	b := k.budgetLocked(agent)
	if b.Since.IsZero() {
		b.Since = time.Now().UTC()
	}
	b.Used.Tokens += d.Tokens
	b.Used.Cost += d.Cost
	b.Used.Wall += d.Wall
	b.Used.Execs += d.Execs
	return k.budgetChange(agent, b)
}

func (k *Kernel) budgetChange(agent string, b *budgetFile) *state.Change {
	v, _ := json.Marshal(b)
	return &state.Change{Agent: agent, Space: state.SpaceSys, Key: sysBudget, Value: append(v, '\n')}
}

func policyBudget(p *policy.Policy) (lim, run proto.Budget) {
	b := p.Budget
	return proto.Budget{Tokens: b.Tokens, Cost: b.Cost, Wall: b.Wall.D().Seconds(), Execs: b.Execs},
		proto.Budget{Tokens: b.RunTokens, Cost: b.RunCost, Wall: b.RunWall.D().Seconds(), Execs: b.RunExecs}
}

// budgetLimits returns agent's limits and use.
func (k *Kernel) budgetLimits(agent string, p *policy.Policy) (lim, run, used proto.Budget) {
	lim, run = policyBudget(p)
	k.budmu.Lock()
	defer k.budmu.Unlock()
	b := k.budgetLocked(agent)
	if b.Limit != nil {
		lim = *b.Limit
	}
	if b.RunLimit != nil {
		run = *b.RunLimit
	}
	return lim, run, b.Used
}

// over says which limit used plus more passes ("" if none). With spent,
// a limit reached counts as passed (nothing more may be spent), else only
// one exceeded.
func over(used, more, lim proto.Budget, spent bool) string {
	var why []string
	check := func(name string, u, m, l float64, unit string) {
		if l <= 0 {
			return
		}
		if u+m > l || (spent && u >= l) {
			why = append(why, fmt.Sprintf("%s: %s used%s of %s", name, num(u, unit), plus(m, unit), num(l, unit)))
		}
	}
	check("tokens", float64(used.Tokens), float64(more.Tokens), float64(lim.Tokens), "")
	check("cost", used.Cost, more.Cost, lim.Cost, "")
	check("wall time", used.Wall, more.Wall, lim.Wall, "s")
	check("execs", float64(used.Execs), float64(more.Execs), float64(lim.Execs), "")
	return strings.Join(why, "; ")
}

func num(v float64, unit string) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%s", int64(v), unit)
	}
	return fmt.Sprintf("%.4g%s", v, unit)
}

func plus(m float64, unit string) string {
	if m == 0 {
		return ""
	}
	return " + " + num(m, unit) + " asked"
}

// budgetRecord builds the "budget" record of agent, and of run r when
// given.
func (k *Kernel) budgetRecord(agent string, p *policy.Policy, r *supervisor.Run) proto.BudgetRecord {
	lim, run, used := k.budgetLimits(agent, p)
	rec := proto.BudgetRecord{Type: proto.RecordBudget, Agent: agent, Limit: lim, RunLimit: run, Used: used}
	k.budmu.Lock()
	rec.Since = k.budgetLocked(agent).Since
	k.budmu.Unlock()
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
	lim, runLim, used := k.budgetLimits(agent, p)
	if why := over(used, more, lim, false); why != "" {
		return proto.Errorf(proto.EDQUOT, "agent %q is over its budget: %s (ox-budget show -a %s)", agent, why, agent)
	}
	if r := k.callerRun(c, agent); r != nil {
		if why := over(runUsed(r), more, runLim, false); why != "" {
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
	return k.budgetChangeOp(ctx, c, proto.OpBudgetSet, a.Agent, raw, p, func(b *budgetFile) {
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
	return k.budgetChangeOp(ctx, c, proto.OpBudgetReset, agent, raw, p, func(b *budgetFile) {
		b.Used = proto.Budget{}
		b.Since = time.Now().UTC()
	})
}

func (k *Kernel) budgetChangeOp(ctx context.Context, c *Cred, op, agent string, raw []byte, p *policy.Policy, fn func(*budgetFile)) (proto.BudgetRecord, error) {
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: op, Target: agent + ":" + sysBudget, Args: audit.ArgsDigest(raw)}}
	k.budmu.Lock()
	b := k.budgetLocked(agent)
	fn(b)
	if b.Since.IsZero() {
		b.Since = time.Now().UTC()
	}
	t.change = k.budgetChange(agent, b)
	t.done = make(chan struct{})
	err := k.submit(ctx, t, false)
	k.budmu.Unlock()
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
	lim, runLim, used := k.budgetLimits(a.Agent, p)
	var qerr *proto.Error
	// A charge was spent, not asked for: the message says what is used
	// with it.
	spent := func(u proto.Budget) proto.Budget {
		u.Tokens += d.Tokens
		u.Cost += d.Cost
		return u
	}
	if why := over(spent(used), proto.Budget{}, lim, false); why != "" {
		qerr = proto.Errorf(proto.EDQUOT, "agent %q is over its budget: %s (ox-budget show -a %s)", a.Agent, why, a.Agent)
	} else if r != nil {
		if why := over(spent(runUsed(r)), proto.Budget{}, runLim, false); why != "" {
			qerr = proto.Errorf(proto.EDQUOT, "run %s is over its budget: %s", r.ID(), why)
		}
	}
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpBudgetCharge, Target: a.Agent + ":" + sysBudget, Args: audit.ArgsDigest(raw), Result: "ok"}}
	if qerr != nil {
		t.entry.Result = qerr.Code
	}
	k.budmu.Lock()
	t.change = k.chargeLocked(a.Agent, d)
	if r != nil {
		r.Charge(d.Tokens, d.Cost, 0)
	}
	t.done = make(chan struct{})
	err = k.submit(ctx, t, false)
	k.budmu.Unlock()
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
