package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/oxios/oxios/pkg/approval"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/version"
)

// Approvals. A policy's ask rule makes the syscall it matches wait for an
// operator: ask registers a request (audited as approve.ask, published
// as approval.requested, shown in the asking run's stream), and the call
// goes on once someone approves it (ox-approve yes), fails with EPERM
// once someone denies it, and after the policy's ask.timeout takes its
// ask.default. Each decision is audited with who made it and why.

// Events of approvals.
const (
	EventApprovalRequested = "approval.requested"
	EventApprovalDecided   = "approval.decided"
)

// ask waits for an operator's decision on what an ask rule of p held
// back; nil means approved. what says what the call would do.
func (k *Kernel) ask(ctx context.Context, c *Cred, agent, op, what string, p *policy.Policy, a *policy.Asked) *proto.Error {
	run := c.Run
	if c.Agent != agent {
		run = ""
	}
	req := k.talk.approvals.Ask(approval.FromAsk(agent, run, op, what, p, a))
	rec := approval.Record(req)
	k.submit(ctx, &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpApproveAsk,
		Target: req.AskTarget(), Result: "ok"},
		agent: agent, key: req.ID, data: &rec}, true)
	if r := k.callerRun(c, agent); r != nil {
		r.Emit(&rec)
	}
	got, err := k.talk.approvals.Wait(ctx, req.ID)
	if err != nil {
		return proto.AsError(err)
	}
	if got.Undecided() {
		// No operator decided: the kernel records the outcome.
		rec := approval.Record(got)
		k.submit(context.Background(), &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpApproveDecide,
			Target: got.Target(), Result: "ok"},
			agent: agent, key: got.ID, data: &rec}, true)
	}
	if r := k.callerRun(c, agent); r != nil {
		rec := approval.Record(got)
		r.Emit(&rec)
	}
	if got.Allowed() {
		return nil
	}
	return got.Refusal()
}

// openApprovals reads the requests a crash left pending and makes the
// registry keep pending requests on disk (approval.Keeper).
func (k *Kernel) openApprovals() error {
	kp, left, err := approval.Keep(k.talk.approvals, filepath.Join(k.cfg.Data, "approvals"), k.log)
	if err != nil {
		return err
	}
	k.talk.keep, k.talk.left = kp, left
	return nil
}

// resolveLeftApprovals audits the decisions openApprovals made, then
// removes their files (a crash before that resolves them again).
func (k *Kernel) resolveLeftApprovals() {
	self := &Cred{UID: k.uid, PID: int32(os.Getpid())}
	for _, r := range k.talk.left {
		rec := approval.Record(r)
		err := k.submit(context.Background(), &tx{entry: &audit.Entry{Actor: self.Actor(), Op: proto.OpApproveDecide,
			Target: r.Target(), Result: "ok"},
			event: EventApprovalDecided, agent: r.Agent, key: r.ID, data: &rec}, true)
		if err != nil {
			k.log.Warn("approvals: auditing a request left pending", "id", r.ID, "err", err)
			continue
		}
		k.log.Info("approval left pending by the last stop resolved into the policy's default", "id", r.ID, "agent", r.Agent, "state", r.State)
		k.talk.keep.Write(r)
	}
	k.talk.left = nil
}

// StopAsking cancels the pending approval requests when the daemon stops,
// before the server waits for the calls in flight (which include the
// calls that wait for a decision).
func (k *Kernel) StopAsking() {
	k.talk.approvals.CancelAll("oxiosd is stopping")
}

// askBudget asks once per daemon life when agent's spending passed a
// threshold of its policy's ask rules.
func (k *Kernel) askBudget(c *Cred, agent string, p *policy.Policy, used proto.Budget) *proto.Error {
	a := policy.AsAsked(p.CheckBudgetAsk(used.Tokens, used.Cost))
	if a == nil {
		return nil
	}
	if k.talk.budgetAsked.Done(agent) {
		return nil
	}
	if err := k.ask(context.Background(), c, agent, proto.OpBudgetCheck, "spend past "+a.Rule, p, a); err != nil {
		return err
	}
	k.talk.budgetAsked.Approve(agent)
	return nil
}

// asked waits for approval if err is a policy's *Asked; it returns err
// unchanged otherwise, nil once approved, and the refusal if not.
func (k *Kernel) asked(ctx context.Context, c *Cred, agent, op, what string, p *policy.Policy, err error) error {
	a := policy.AsAsked(err)
	if a == nil {
		return err
	}
	if perr := k.ask(ctx, c, agent, op, what, p, a); perr != nil {
		return perr
	}
	return nil
}

// ApproveList emits the pending approval requests (of a.Agent), or all
// kept ones with a.All; with a.Follow, then each new request and
// decision until ctx ends.
func (k *Kernel) ApproveList(ctx context.Context, c *Cred, a proto.ApproveListArgs, raw []byte, emit func(*proto.ApprovalRecord) error) error {
	if a.Agent != "" {
		if err := k.gate(call{op: proto.OpApproveList, c: c, agent: a.Agent, raw: raw}); err != nil {
			return err
		}
	}
	visible := func(agent string) bool {
		return (a.Agent == "" || agent == a.Agent) && c.Authorize(agent) == nil
	}
	return k.talk.approvals.Stream(ctx, k.bus, a, visible, emit)
}

// ApproveDecide approves or denies a pending request. Only the admin, or
// a user granted the agent, decides; a run never decides, not even for
// another agent.
func (k *Kernel) ApproveDecide(ctx context.Context, c *Cred, a proto.ApproveDecideArgs, raw []byte) (proto.ApprovalRecord, error) {
	verb := "deny"
	if a.Approve {
		verb = "approve"
	}
	tgt := "*:" + a.ID + " " + verb
	deny := func(err *proto.Error) (proto.ApprovalRecord, error) {
		k.auditDenied(c, proto.OpApproveDecide, strings.ToValidUTF8(tgt, "?"), raw, err.Code)
		return proto.ApprovalRecord{}, err
	}
	if c.Agent != "" {
		return deny(proto.Errorf(proto.EPERM, "run %s of agent %q may not decide approvals: an operator does", c.Run, c.Agent))
	}
	r, err := k.talk.approvals.Get(a.ID)
	if err != nil {
		return deny(proto.Errorf(proto.ENOENT, "no approval request %q (ox-approve ls lists them)", a.ID))
	}
	tgt = r.Agent + ":" + a.ID + " " + verb
	if err := k.gate(call{op: proto.OpApproveDecide, c: c, agent: r.Agent, raw: raw, target: tgt}); err != nil {
		return proto.ApprovalRecord{}, err
	}
	by := operator(c)
	got, err := k.talk.approvals.Decide(a.ID, a.Approve, by, a.Reason)
	if err != nil {
		return deny(proto.Errorf(proto.EEXIST, "%v", err))
	}
	rec := approval.Record(got)
	if err := k.submit(ctx, &tx{entry: &audit.Entry{Actor: c.Actor(), Op: proto.OpApproveDecide, Target: got.DecideTarget(), Args: audit.ArgsDigest(raw), Result: "ok"},
		agent: r.Agent, key: got.ID, data: &rec}, true); err != nil {
		return proto.ApprovalRecord{}, err
	}
	return rec, nil
}

// ApprovalIDs lists the ids of the pending requests c may see (the
// mount's /approvals).
func (k *Kernel) ApprovalIDs(c *Cred) []string {
	return k.talk.approvals.IDs(func(agent string) bool { return c.Authorize(agent) == nil })
}

// ApprovalRead returns request id, through the gate of approve.list on
// its agent (the mount's /approvals/ID).
func (k *Kernel) ApprovalRead(c *Cred, id string) (proto.ApprovalRecord, error) {
	r, err := k.talk.approvals.Get(id)
	if err != nil {
		return proto.ApprovalRecord{}, proto.Errorf(proto.ENOENT, "no approval request %q (ox-approve ls lists them)", id)
	}
	if err := k.gate(call{op: proto.OpApproveList, c: c, agent: r.Agent, target: r.Agent + ":" + id}); err != nil {
		return proto.ApprovalRecord{}, err
	}
	return approval.Record(r), nil
}

// operator names a caller that is no agent's run, as a message's sender
// and an approval's decider have it: "uid=1000 (alice)".
func operator(c *Cred) string {
	return fmt.Sprintf("uid=%d (%s)", c.UID, version.UserName(c.UID))
}
