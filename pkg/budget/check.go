package budget

import (
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Checks and records: whether spending more would take an agent or one
// of its runs past a limit, what a charge costs, and the record of an
// agent's budget. The kernel's budget syscalls gate each call, audit it
// and commit the ledger's changes.

// Run is a run as its budget sees it (a supervisor's run).
type Run interface {
	ID() string
	Usage() (tokens int64, cost float64, execs int64, wall time.Duration)
	Charge(tokens int64, cost float64, execs int64)
}

// RunUsed is what r used.
func RunUsed(r Run) proto.Budget {
	tokens, cost, execs, wall := r.Usage()
	return proto.Budget{Tokens: tokens, Cost: cost, Wall: wall.Seconds(), Execs: execs}
}

// Record is the "budget" record of agent (policy p), and of run r when
// not nil.
func (l *Ledger) Record(agent string, p *policy.Policy, r Run) proto.BudgetRecord {
	lim, run, used := l.Limits(agent, p)
	rec := proto.BudgetRecord{Type: proto.RecordBudget, Agent: agent, Limit: lim, RunLimit: run, Used: used}
	rec.Since = l.Since(agent)
	rec.Text = fmt.Sprintf("%s: %d tokens, cost %.4g, %s wall, %d execs used", agent, used.Tokens, used.Cost, time.Duration(used.Wall*float64(time.Second)).Round(time.Second), used.Execs)
	if r != nil {
		u := RunUsed(r)
		rec.Run, rec.RunUsed = r.ID(), &u
	}
	return rec
}

// AgentOver is the refusal of what would take agent past a limit (why,
// from Over).
func AgentOver(agent, why string) *proto.Error {
	return proto.Errorf(proto.EDQUOT, "agent %q is over its budget: %s (ox-budget show -a %s)", agent, why, agent)
}

// RunOver is the refusal of what would take the run id past a limit.
func RunOver(id, why string) *proto.Error {
	return proto.Errorf(proto.EDQUOT, "run %s is over its budget: %s", id, why)
}

// Check returns an EDQUOT error when spending more would take agent
// (policy p) or its run r (when not nil) past a limit, and what agent
// used.
func (l *Ledger) Check(agent string, p *policy.Policy, r Run, more proto.Budget) (proto.Budget, *proto.Error) {
	lim, runLim, used := l.Limits(agent, p)
	if why := Over(used, more, lim, false); why != "" {
		return used, AgentOver(agent, why)
	}
	if r != nil {
		if why := Over(RunUsed(r), more, runLim, false); why != "" {
			return used, RunOver(r.ID(), why)
		}
	}
	return used, nil
}

// OverAfter returns an EDQUOT error when charging d takes agent (policy
// p) or its run r (when not nil) past a limit. A charge was spent, not
// asked for: the message says what is used with it.
func (l *Ledger) OverAfter(agent string, p *policy.Policy, r Run, d proto.Budget) *proto.Error {
	lim, runLim, used := l.Limits(agent, p)
	spent := func(u proto.Budget) proto.Budget {
		u.Tokens += d.Tokens
		u.Cost = proto.AddCost(u.Cost, d.Cost)
		return u
	}
	if why := Over(spent(used), proto.Budget{}, lim, false); why != "" {
		return AgentOver(agent, why)
	} else if r != nil {
		if why := Over(spent(RunUsed(r)), proto.Budget{}, runLim, false); why != "" {
			return RunOver(r.ID(), why)
		}
	}
	return nil
}

// SpawnCheck is the budget's check of a new run of agent (policy p):
// EDQUOT once the agent has spent one of its limits (a limit reached
// counts), else the limits each of its runs has.
func (l *Ledger) SpawnCheck(agent string, p *policy.Policy) (runLim proto.Budget, err *proto.Error) {
	lim, runLim, used := l.Limits(agent, p)
	if why := Over(used, proto.Budget{}, lim, true); why != "" {
		return proto.Budget{}, AgentOver(agent, why)
	}
	return runLim, nil
}

// ModelCall is what the model call a reports costs (Price, at prices per
// million prompt and completion tokens); EINVAL for a negative count.
func ModelCall(a proto.BudgetChargeArgs, promptPrice, completionPrice float64) (proto.Budget, *proto.Error) {
	if a.PromptTokens < 0 || a.CompletionTokens < 0 {
		return proto.Budget{}, proto.Errorf(proto.EINVAL, "token counts may not be negative")
	}
	return Price(a.PromptTokens, a.CompletionTokens, promptPrice, completionPrice), nil
}

// Price is what a model call's tokens cost, at prices per million
// prompt and completion tokens.
func Price(promptTokens, completionTokens int64, promptPrice, completionPrice float64) proto.Budget {
	return proto.Budget{
		Tokens: promptTokens + completionTokens,
		Cost:   (float64(promptTokens)*promptPrice + float64(completionTokens)*completionPrice) / 1e6,
	}
}

// SetLimits is the change of ox-budget set: the limits given replace
// the file's (nil: kept). EINVAL if one is negative.
func SetLimits(limit, runLimit *proto.Budget) (func(*File), *proto.Error) {
	for _, b := range []*proto.Budget{limit, runLimit} {
		if b != nil && (b.Tokens < 0 || b.Cost < 0 || b.Wall < 0 || b.Execs < 0) {
			return nil, proto.Errorf(proto.EINVAL, "budget limits may not be negative")
		}
	}
	return func(b *File) {
		if limit != nil {
			l := *limit
			b.Limit = &l
		}
		if runLimit != nil {
			l := *runLimit
			b.RunLimit = &l
		}
	}, nil
}

// Reset is the change of ox-budget reset: nothing used since now.
func Reset(b *File) {
	b.Used = proto.Budget{}
	b.Since = time.Now().UTC()
}
