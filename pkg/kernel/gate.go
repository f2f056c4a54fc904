package kernel

import (
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// policyAsk is what a call asks of the agent's policy.
type policyAsk uint8

const (
	askNone  policyAsk = iota
	askRead            // read key
	askWrite           // write key at size (< 0: delete it)
	askList            // list keys
)

// call is one call of a syscall as the gate sees it. It is passed by
// value: the gate runs on every state.load, and costs no allocation.
type call struct {
	op    string
	c     *Cred
	agent string
	key   string // the key, prefix or name the call names, checked by the op's rule
	raw   []byte // the args as received, digested into an audit entry
	// target, when set, is the audit target of a refusal instead of
	// agent:key (an exec's command, a fetch's URL).
	target string
	// policy is what the call asks of the agent's policy, if anything; a
	// caller it does not bind (the admin) skips it. size is a write's.
	policy policyAsk
	size   int64
}

// gate is the one way into a syscall: it runs a call through the checks
// every syscall has, in order, whichever front end made it (the socket
// server, the mount): validate (the agent's name; the key by the op's
// declared rule), authorize (may the caller act on the agent), whether
// the agent exists (for an op declared Existing), then the agent's
// policy. A refusal is audited with its code and returned; what
// passes goes on to the method's work, whose changes the committer makes
// durable, audits and publishes.
func (k *Kernel) gate(cl call) *proto.Error {
	rule, existing := proto.KeyNone, false
	if sc := syscalls[cl.op]; sc != nil {
		rule, existing = sc.Key, sc.Existing
	}
	err := proto.CheckAgent(cl.agent)
	if err == nil {
		err = rule.Check(cl.key)
	}
	if err == nil {
		err = cl.c.Allowed(cl.agent)
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
	if cl.policy == askNone || cl.c.Admin {
		return nil
	}
	agent, key, size, ask := cl.agent, cl.key, cl.size, cl.policy
	return k.enforce(cl.c, agent, cl.op, cl.auditTarget(rule), cl.raw, func(p *policy.Policy) error {
		switch ask {
		case askRead:
			return p.CheckStateRead(key)
		case askList:
			return p.CheckStateList()
		}
		total, old := k.state.Usage(agent, key)
		return p.CheckStateWrite(key, total-old+state.Cost(size))
	})
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
	}
	return cl.agent
}
