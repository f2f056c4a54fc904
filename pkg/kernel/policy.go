package kernel

import (
	"context"
	"errors"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/policy/judge"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Policies. Each agent's policy is the file agents/NAME/sys/policy.toml of
// the versioned tree (the default policy when it has none). The kernel
// keeps each parsed, and the authorize step asks it: permit below is the
// one place where a policy refuses a syscall, for the socket and the
// mount alike. The admin is not bound by an agent's policy for state and
// memory (it is root's tree); exec, tools and the network are always
// checked, as they act as the agent. Only the admin changes a policy.

// policyOf returns agent's policy, parsed once (k.pol).
func (k *Kernel) policyOf(agent string) (*policy.Policy, error) { return k.pol.Get(agent) }

// loadPolicy reads and parses agent's policy file; text is nil for the
// default policy.
func (k *Kernel) loadPolicy(agent string) (*policy.Policy, []byte, error) {
	return policy.Load(agent, func() ([]byte, error) {
		b, _, err := k.state.Load(state.Ref(state.SpaceSys, agent), sysPolicy)
		return b, err
	})
}

// policyChanged drops agent's parsed policy after its file changed.
func (k *Kernel) policyChanged(agent string) {
	k.pol.Drop(agent)
}

// permit is the policy half of the authorize step. For a caller bound by
// agent's policy, check asks it; a refusal is EPERM naming the rule, on
// the audit log (target tgt and the rule) and, if the policy says so, it
// stops or ends the calling run.
func (k *Kernel) permit(c *Cred, agent, op, tgt string, raw []byte, check func(*policy.Policy) error) *proto.Error {
	if c.Admin {
		return nil
	}
	return k.enforce(c, agent, op, tgt, raw, check)
}

// enforce is permit for everyone, the admin too (exec, tools, net).
func (k *Kernel) enforce(c *Cred, agent, op, tgt string, raw []byte, check func(*policy.Policy) error) *proto.Error {
	p, err := k.policyOf(agent)
	if err != nil {
		return proto.AsError(err)
	}
	cerr := check(p)
	if cerr == nil {
		return nil
	}
	if ask := policy.AsAsked(cerr); ask != nil {
		what := tgt
		if _, rest, ok := strings.Cut(tgt, ":"); ok {
			what = rest
		}
		perr := k.ask(k.root, c, agent, op, what, p, ask)
		if perr != nil {
			k.auditDenied(c, op, tgt+" ["+ask.Rule+"]", raw, perr.Code)
		}
		return perr
	}
	var d *policy.Denied
	if !errors.As(cerr, &d) {
		return proto.Errorf(proto.EINVAL, "%v", cerr)
	}
	k.auditDenied(c, op, tgt+" ["+d.Rule+"]", raw, proto.EPERM)
	if r := k.callerRun(c, agent); r != nil {
		policy.Violation(p, d, agent, c.Run, r) // signals.on_violation
	}
	return proto.Errorf(proto.EPERM, "%s: %s (policy rule %s)", agent, d.Reason, d.Rule)
}

// policyRecord is agent's policy as a record.
func (k *Kernel) policyRecord(agent string) (proto.PolicyRecord, error) {
	_, text, err := k.loadPolicy(agent)
	if err != nil {
		return proto.PolicyRecord{}, err
	}
	return policy.Record(agent, text), nil
}

// PolicyShow returns agent's policy (the admin's, or the agent's own:
// an agent may read its policy, not change it).
func (k *Kernel) PolicyShow(ctx context.Context, c *Cred, agent string, raw []byte) (proto.PolicyRecord, error) {
	return sysPolicyShow.Call(k, ctx, c, proto.AgentArgs{Agent: agent}, raw)
}

func (k *Kernel) policyShow(_ context.Context, _ *Cred, a proto.AgentArgs, _ []byte) (proto.PolicyRecord, error) {
	return k.policyRecord(a.Agent)
}

// PolicySet replaces agent's policy: admin only, checked before it
// applies (a policy that does not parse is refused with its line and the
// old one stays), audited, durable and versioned with the agent's tree.
func (k *Kernel) PolicySet(ctx context.Context, c *Cred, a proto.PolicySetArgs, raw []byte) (proto.PolicyRecord, error) {
	return sysPolicySet.Call(k, ctx, c, a, raw)
}

func (k *Kernel) policySet(ctx context.Context, c *Cred, a proto.PolicySetArgs, raw []byte) (proto.PolicyRecord, error) {
	return k.setPolicy(ctx, c, a.Agent, []byte(a.Text), raw)
}

// PolicyWriteRefused audits an attempt to write agent's policy through
// the mount, where it is read-only (EROFS).
func (k *Kernel) PolicyWriteRefused(c *Cred, agent string) {
	k.auditDenied(c, proto.OpPolicySet, agent+":"+sysPolicy+" [mount]", nil, proto.EROFS)
}

// setPolicy checks and stores a policy text.
func (k *Kernel) setPolicy(ctx context.Context, c *Cred, agent string, text, raw []byte) (proto.PolicyRecord, error) {
	if err := k.notHere(c, proto.OpPolicySet, agent, raw); err != nil {
		return proto.PolicyRecord{}, err
	}
	if policy.NamesHome(text) {
		perr := proto.Errorf(proto.EINVAL, "%s: the policy was not changed: its first line names a home node, which only a spawn placed from that node sets", agent)
		k.auditDenied(c, proto.OpPolicySet, agent+":"+sysPolicy, raw, perr.Code)
		return proto.PolicyRecord{}, perr
	}
	if _, err := policy.Parse(text); err != nil {
		perr := proto.Errorf(proto.EINVAL, "%s: the policy was not changed: %v", agent, err)
		k.auditDenied(c, proto.OpPolicySet, agent+":"+sysPolicy, raw, perr.Code)
		return proto.PolicyRecord{}, perr
	}
	if raw == nil {
		raw = text
	}
	t := &tx{
		change: &state.Change{Agent: agent, Space: state.SpaceSys, Key: sysPolicy, Value: text},
		entry:  &audit.Entry{Actor: c.Actor(), Op: proto.OpPolicySet, Target: agent + ":" + sysPolicy, Args: audit.ArgsDigest(raw)},
	}
	err := k.submit(ctx, t, true)
	k.policyChanged(agent)
	if err != nil {
		return proto.PolicyRecord{}, err
	}
	return k.policyRecord(agent)
}

// PolicyCheck is a dry run: would op with args, by a run of agent, be
// allowed by agent's policy (or by the proposed policy text), and by
// which rule? Nothing is audited.
func (k *Kernel) PolicyCheck(ctx context.Context, c *Cred, a proto.PolicyCheckArgs, raw []byte) (proto.PolicyCheckRecord, error) {
	return sysPolicyCheck.Call(k, ctx, c, a, raw)
}

func (k *Kernel) policyCheck(ctx context.Context, c *Cred, a proto.PolicyCheckArgs, raw []byte) (proto.PolicyCheckRecord, error) {
	return judge.Check(a, k.policyOf, k.dryRun)
}
