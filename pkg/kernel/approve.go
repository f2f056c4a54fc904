package kernel

import (
	"context"
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/approval"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/version"
)

// Approvals: the desk where a call waits is package approval's (Desk);
// here are the syscalls that list and decide the requests.

// ask waits for an operator's decision on what an ask rule of p held
// back (approval.Desk.Ask); nil means approved. what says what the call
// would do.
func (k *Kernel) ask(ctx context.Context, c *Cred, agent, op, what string, p *policy.Policy, a *policy.Asked) *proto.Error {
	return k.asks.Ask(ctx, c.Actor(), agent, op, what, p, a)
}

// StopAsking cancels the pending approval requests when the daemon stops,
// before the server waits for the calls in flight (which include the
// calls that wait for a decision).
func (k *Kernel) StopAsking() {
	k.asks.CancelAll("oxiosd is stopping")
}

// ApproveList emits the pending approval requests (of a.Agent), or all
// kept ones with a.All; with a.Follow, then each new request and
// decision until ctx ends.
func (k *Kernel) ApproveList(ctx context.Context, c *Cred, a proto.ApproveListArgs, raw []byte, emit func(*proto.ApprovalRecord) error) error {
	return sysApproveList.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) approveList(ctx context.Context, c *Cred, a proto.ApproveListArgs, raw []byte, emit func(*proto.ApprovalRecord) error) error {
	return k.asks.Stream(ctx, k.bus, a, c.Lists(a.Agent), emit)
}

// ApproveDecide approves or denies a pending request. Only the admin, or
// a user granted the agent, decides; a run never decides, not even for
// another agent.
func (k *Kernel) ApproveDecide(ctx context.Context, c *Cred, a proto.ApproveDecideArgs, raw []byte) (proto.ApprovalRecord, error) {
	return sysApproveDecide.Call(k, ctx, c, a, raw)
}

func (k *Kernel) approveDecide(ctx context.Context, c *Cred, a proto.ApproveDecideArgs, raw []byte) (proto.ApprovalRecord, error) {
	tgt := approval.DecisionTarget("*", a)
	deny := func(err *proto.Error) (proto.ApprovalRecord, error) {
		k.auditDenied(c, proto.OpApproveDecide, strings.ToValidUTF8(tgt, "?"), raw, err.Code)
		return proto.ApprovalRecord{}, err
	}
	// A run learns nothing of the requests: the gate refuses it (an
	// operator decides) under its own agent before any is looked up.
	r, err := k.asks.Get(a.ID)
	agent := c.Agent
	if err == nil {
		agent, tgt = r.Agent, approval.DecisionTarget(r.Agent, a)
	}
	if agent != "" {
		if err := k.gate(call{op: proto.OpApproveDecide, c: c, agent: agent, raw: raw, target: tgt}); err != nil {
			return proto.ApprovalRecord{}, err
		}
	}
	if err != nil {
		return deny(proto.Errorf(proto.ENOENT, "no approval request %q (ox-approve ls lists them)", a.ID))
	}
	rec, refused, err := k.asks.Settle(ctx, a, operator(c), c.Actor(), audit.ArgsDigest(raw))
	if refused != nil {
		return deny(refused)
	}
	return rec, err
}

// ApprovalIDs lists the ids of the pending requests c may see (the
// mount's /approvals).
func (k *Kernel) ApprovalIDs(c *Cred) []string {
	return k.asks.IDs(c.Lists(""))
}

// ApprovalRead returns request id, through the gate of approve.list on
// its agent (the mount's /approvals/ID).
func (k *Kernel) ApprovalRead(c *Cred, id string) (proto.ApprovalRecord, error) {
	r, err := k.asks.Get(id)
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
