package kernel

import (
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// call is one call of a syscall as the gate sees it. It is passed by
// value: the gate runs on every state.load, and costs no allocation.
type call struct {
	op    string
	sc    *Syscall // op's declaration, if the caller has it (the dispatcher): no lookup
	c     *Cred
	agent string
	key   string // the key, prefix or name the call names, checked by the op's rule
	raw   []byte // the args as received, digested into an audit entry
	// target, when set, is the audit target of a refusal instead of
	// agent:key (an exec's command, a fetch's URL).
	target string
	// every: the call is about every agent (agent is ""), which is the
	// admin's whatever the op (a recall or a version log of all agents).
	every bool
	// policy is what the call asks of the agent's policy, if anything; a
	// caller it does not bind (the admin) skips it. size is a write's.
	policy policyAsk
	size   int64
}

// gate is the one way into a syscall: it runs a call through the checks
// every syscall has, in order, whichever front end made it (the socket
// server, the mount, the fleet): validate (the agent's name; the key by
// the op's declared rule), authorize (is it the admin, for an op declared
// Admin; may the caller act on the agent), whether the agent exists (for
// an op declared Existing), then the agent's policy. A refusal is audited
// with its code (refusal below) and returned; what passes goes on to the
// method's work, whose changes the committer makes durable, audits and
// publishes. The dispatcher (def.go) calls it for every call of a
// definition with a Subject, before its work; the few ops whose work
// gates itself, and the mount's own checks, are listed by
// TestOnlyTheDispatcherGates, and TestEveryServedOpGated in pkg/serve
// calls every served op to see it reach the gate under its own op.
func (k *Kernel) gate(cl call) *proto.Error { return k.gateCall(&cl) }

// gateCall is gate on a call the caller holds (the dispatcher's), not
// copied again: it does not keep cl.
func (k *Kernel) gateCall(cl *call) *proto.Error {
	if k.gated != nil {
		k.gated(cl.op)
	}
	rule, existing, admin, named := proto.KeyNone, false, cl.every, !cl.every
	sc := cl.sc
	if sc == nil {
		sc = syscalls[cl.op]
	}
	if sc != nil {
		rule, existing = sc.Key, sc.Existing
		admin = admin || sc.Admin
		named = named && (sc.Agent == agentNamed || cl.agent != "")
	}
	var err *proto.Error
	if named {
		err = proto.CheckAgent(cl.agent)
	}
	if err == nil {
		err = rule.Check(cl.key)
	}
	if err == nil {
		err = authorize(cl.c, cl.op, sc, admin, named, cl.agent, cl.every)
	}
	if err != nil {
		k.auditDenied(cl.c, cl.op, strings.ToValidUTF8(cl.auditTarget(rule), "?"), cl.raw, err.Code)
		return err
	}
	// Only a caller who may act on the agent learns whether it exists.
	// A missing agent is not a refusal, so it is not audited: nothing
	// was attempted on anything.
	if existing && cl.agent != "" && !k.AgentExists(cl.agent) {
		return proto.NoAgent(cl.agent)
	}
	if cl.policy == askNone || !cl.policy.binds(cl.c) {
		return nil
	}
	c, op, agent, key, size, ask := cl.c, cl.op, cl.agent, cl.key, cl.size, cl.policy
	return k.enforce(c, agent, op, cl.auditTarget(rule), cl.raw, func(p *policy.Policy) error {
		q := asking{ask: ask, key: key}
		if ask == askWrite {
			total, old := k.state.Usage(agent, key)
			q.total = total - old + state.Cost(size)
		}
		return k.hooked(k.root, p, c, op, agent, q)
	})
}

// authorize is the gate's step that says who may call op, declared by
// sc (nil: not in the table): what is the admin's (admin) is refused
// as such to anyone else, whichever agent it names; what is an
// operator's (Syscall.Operator) to a run; an op that names its agent
// (named) to a caller who may not act on it. The dry run (question.go)
// takes the same step.
func authorize(c *Cred, op string, sc *Syscall, admin, named bool, agent string, every bool) *proto.Error {
	if admin && !c.Admin {
		return notAdmin(c, op, every)
	}
	if sc != nil && sc.Operator && c.Run != "" {
		return proto.Errorf(proto.EPERM, "run %s of agent %q may not call %s: an operator does", c.Run, c.Agent, op)
	}
	if named {
		return c.Allowed(agent)
	}
	return nil
}

// auditTarget is the target of the call's audit entry, made only for a
// refusal or a policy check: the common call, an admin's load, builds no
// string.
func (cl *call) auditTarget(rule proto.KeyRule) string {
	switch {
	case cl.target != "":
		return cl.target
	case rule != proto.KeyNone || cl.key != "":
		return target(cl.agent, cl.key)
	case cl.agent == "":
		return "*" // every agent, or none
	}
	return cl.agent
}

// The kinds of refusal, each answered with one code whatever the op
// (oxios(7), ERRORS): what the agent's policy does not allow is EPERM
// (enforce, naming the rule); what is the admin's, to anyone else, is
// EACCES (notAdmin); another agent's data, to a run or a user not granted
// it, is EPERM (access.Cred.Allowed); over a budget is EDQUOT
// (checkBudget).

// notAdmin is the refusal of an op (or, every, of its call over every
// agent) that is the admin's to a caller who is not.
func notAdmin(c *Cred, op string, every bool) *proto.Error {
	what := op
	if every {
		what += " of every agent"
	}
	hint := "see [access] in oxios.toml(5)"
	if every {
		hint = "name your agent with -a"
	}
	return proto.Errorf(proto.EACCES, "%s is for the admin: %s (%s)", what, c.NotAdmin(), hint)
}

// OnGate has fn called with the op of each call that enters the gate,
// before it is checked: tests count with it that every op a front end
// serves goes through the gate. Set it before serving.
func (k *Kernel) OnGate(fn func(op string)) { k.gated = fn }
