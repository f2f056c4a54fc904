package approval

import (
	"context"
	"log/slog"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Approvals. A policy's ask rule makes the syscall it matches wait for an
// operator: Desk.Ask registers a request (audited as approve.ask, published
// as approval.requested, shown in the asking run's stream), and the call
// goes on once someone approves it (ox-approve yes), fails with EPERM
// once someone denies it, and after the policy's ask.timeout takes its
// ask.default. Each decision is audited with who made it and why.

// Desk is where a call that an ask rule held back waits for an operator:
// the registry of requests, their copies on disk (Keeper), and the agents
// whose budget threshold was approved. Each ask, and each decision no
// operator made (a timeout, a call gone, a request a crash left pending),
// goes to the audit log through an audit.Recorder; an operator's decision is
// audited by the syscall that makes it.
type Desk struct {
	*Registry
	keep   *Keeper
	left   []Request // left pending by a crash, resolved by ResolveLeft
	record audit.Recorder
	emit   func(run string, rec any)
	log    *slog.Logger
	// budgetAsked: agents whose budget threshold an operator approved.
	budgetAsked budget.Asked
}

// OpenDesk makes a desk whose request ids start after first, keeping its
// pending requests in dir (Keep: the requests a crash left there are
// decided now, and audited by ResolveLeft). emit shows a record in the
// stream of a run (when the run is there).
func OpenDesk(first uint64, dir string, record audit.Recorder, emit func(run string, rec any), log *slog.Logger) (*Desk, error) {
	g := New(first)
	kp, left, err := Keep(g, dir, log)
	if err != nil {
		return nil, err
	}
	return &Desk{Registry: g, keep: kp, left: left, record: record, emit: emit, log: log}, nil
}

// Ask waits for an operator's decision on what ask rule a of p held back:
// op of agent by who, a call that would do what. The request is audited
// (approve.ask, published as approval.requested) and, when who is a run
// of agent, names the run and is shown in its stream, then the decision;
// nil means approved, else the refusal (EPERM) saying who decided and
// why.
func (d *Desk) Ask(ctx context.Context, who audit.Actor, agent, op, what string, p *policy.Policy, a *policy.Asked) *proto.Error {
	run := ""
	if who.Agent == agent {
		run = who.Run
	}
	req := d.Registry.Ask(FromAsk(agent, run, op, what, p, a))
	rec := Record(req)
	d.record(ctx, &audit.Entry{Actor: who, Op: proto.OpApproveAsk,
		Target: req.AskTarget(), Result: "ok"}, "", agent, req.ID, &rec)
	if run != "" {
		d.emit(run, &rec)
	}
	got, err := d.Wait(ctx, req.ID)
	if err != nil {
		return proto.AsError(err)
	}
	if got.Undecided() {
		// No operator decided: the kernel records the outcome.
		rec := Record(got)
		d.record(context.Background(), &audit.Entry{Actor: who, Op: proto.OpApproveDecide,
			Target: got.Target(), Result: "ok"}, "", agent, got.ID, &rec)
	}
	if run != "" {
		rec := Record(got)
		d.emit(run, &rec)
	}
	if got.Allowed() {
		return nil
	}
	return got.Refusal()
}

// AskBudget asks once per daemon life when agent's spending, used,
// passed a threshold of its policy p's ask rules.
func (d *Desk) AskBudget(who audit.Actor, agent string, p *policy.Policy, used proto.Budget) *proto.Error {
	a := policy.AsAsked(p.CheckBudgetAsk(used.Tokens, used.Cost))
	if a == nil {
		return nil
	}
	if d.budgetAsked.Done(agent) {
		return nil
	}
	if err := d.Ask(context.Background(), who, agent, proto.OpBudgetCheck, "spend past "+a.Rule, p, a); err != nil {
		return err
	}
	d.budgetAsked.Approve(agent)
	return nil
}

// ResolveLeft audits, as by who, the decisions OpenDesk made of the
// requests a crash left pending, then removes their files (a crash before
// that resolves them again).
func (d *Desk) ResolveLeft(who audit.Actor) {
	for _, r := range d.left {
		rec := Record(r)
		err := d.record(context.Background(), &audit.Entry{Actor: who, Op: proto.OpApproveDecide,
			Target: r.Target(), Result: "ok"}, proto.EventApprovalDecided, r.Agent, r.ID, &rec)
		if err != nil {
			d.log.Warn("approvals: auditing a request left pending", "id", r.ID, "err", err)
			continue
		}
		d.log.Info("approval left pending by the last stop resolved into the policy's default", "id", r.ID, "agent", r.Agent, "state", r.State)
		d.keep.Write(r)
	}
	d.left = nil
}

// DecisionTarget is the audit target of decision a of a request of agent
// ("*" before the request is found): "AGENT:ID approve", or deny.
func DecisionTarget(agent string, a proto.ApproveDecideArgs) string {
	verb := "deny"
	if a.Approve {
		verb = "approve"
	}
	return agent + ":" + a.ID + " " + verb
}

// Settle decides request a.ID as a says, by the operator by (who on the
// audit log, the decision's args digest), and audits the decision
// (approve.decide, published as approval.decided with the record). A
// request decided already is refused, EEXIST, for the caller to audit.
func (d *Desk) Settle(ctx context.Context, a proto.ApproveDecideArgs, by string, who audit.Actor, digest string) (rec proto.ApprovalRecord, refused *proto.Error, err error) {
	got, err := d.Decide(a.ID, a.Approve, by, a.Reason)
	if err != nil {
		return rec, proto.Errorf(proto.EEXIST, "%v", err), nil
	}
	rec = Record(got)
	ev := rec // the event's own copy
	e := &audit.Entry{Actor: who, Op: proto.OpApproveDecide, Target: got.DecideTarget(), Args: digest, Result: "ok"}
	if err := d.record(ctx, e, "", got.Agent, got.ID, &ev); err != nil {
		return proto.ApprovalRecord{}, nil, err
	}
	return rec, nil, nil
}
