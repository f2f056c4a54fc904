package kernel

import (
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// call is one call of a syscall as the gate sees it.
type call struct {
	op    string
	c     *Cred
	agent string
	key   string // the key, prefix or name the call names, checked by the op's rule
	raw   []byte // the args as received, digested into an audit entry
	// target, when set, is the audit target of a refusal instead of
	// agent:key (an exec's command, a fetch's URL).
	target string
	// policy, when set, asks the agent's policy; a caller it does not
	// bind (the admin) skips it.
	policy func(*policy.Policy) error
}

// gate is the one way into a syscall: it runs a call through the checks
// every syscall has, in order, whichever front end made it (the socket
// server, the mount): validate (the agent's name; the key by the op's
// declared rule), authorize (may the caller act on the agent), then the
// agent's policy. A refusal is audited with its code and returned; what
// passes goes on to the method's work, whose changes the committer makes
// durable, audits and publishes.
func (k *Kernel) gate(cl *call) *proto.Error {
	rule := keyNone
	if sc := syscalls[cl.op]; sc != nil {
		rule = sc.Key
	}
	tgt := cl.target
	switch {
	case tgt != "":
	case rule != keyNone || cl.key != "":
		tgt = target(cl.agent, cl.key)
	default:
		tgt = cl.agent
	}
	err := proto.CheckAgent(cl.agent)
	if err == nil {
		err = rule.check(cl.key)
	}
	if err == nil {
		err = k.allowed(cl.c, cl.agent)
	}
	if err != nil {
		k.auditDenied(cl.c, cl.op, strings.ToValidUTF8(tgt, "?"), cl.raw, err.Code)
		return err
	}
	if cl.policy != nil {
		return k.permit(cl.c, cl.agent, cl.op, tgt, cl.raw, cl.policy)
	}
	return nil
}
