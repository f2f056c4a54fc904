// Package judge owns the records of asking a policy about operations
// without doing them: the dry run of ox-policy check (Check, Fill) and the
// replay of ox-policy test (Replay), which judges audited past actions
// against a proposed policy and reports the ones it would decide
// otherwise. It changes and audits nothing. The judging itself is the
// kernel's gate with the work skipped (Func, pkg/kernel/question.go).
package judge

import (
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Usage returns the bytes an agent's state uses in all and the size of
// key in it (state.Store.Usage): a write is judged against the quota
// with the key's old value taken out.
type Usage func(agent, key string) (total, size int64)

// Func is the kernel's dry run of one op (its gate with its work
// skipped): op called with args by a run of agent, judged by p. A nil
// *Denied is allowed; an error means the op or its args are not
// understood. An ask rule's verdict is a Denied whose rule is named
// ask.* (see Asks). The judge has no table of ops of its own: what an op
// asks of a policy is the syscall's, so the dry run cannot disagree with
// the call.
type Func func(p *policy.Policy, agent, op string, args []string) (*policy.Denied, error)

// Check is ox-policy check's record of a: its op judged (judge) by the
// policy proposed in a.Policy (Proposed), or, when none is, by own, the
// agent's policy in force.
func Check(a proto.PolicyCheckArgs, own func(agent string) (*policy.Policy, error), judge Func) (proto.PolicyCheckRecord, error) {
	var p *policy.Policy
	var err error
	if a.Policy == "" {
		p, err = own(a.Agent)
	} else {
		p, err = Proposed(a.Policy)
	}
	if err != nil {
		return proto.PolicyCheckRecord{}, err
	}
	rec := proto.PolicyCheckRecord{Type: proto.RecordPolicyCheck, Agent: a.Agent, Op: a.Op, Args: a.Args}
	rule, derr := judge(p, a.Agent, a.Op, a.Args)
	if derr != nil {
		return rec, derr
	}
	Fill(&rec, rule)
	return rec, nil
}

// Asks reports whether a verdict of Judge is an ask rule's.
func Asks(d *policy.Denied) bool { return d != nil && strings.HasPrefix(d.Rule, "ask.") }

// Fill completes the record of ox-policy check with the verdict rule.
func Fill(rec *proto.PolicyCheckRecord, rule *policy.Denied) {
	rec.Allowed = rule == nil
	if Asks(rule) {
		rec.Ask, rec.Rule, rec.Reason = true, rule.Rule, rule.Reason
		rec.Text = fmt.Sprintf("%s %s: asks an operator first (%s): %s", rec.Op, strings.Join(rec.Args, " "), rule.Rule, rule.Reason)
		return
	}
	if rule != nil {
		rec.Rule, rec.Reason = rule.Rule, rule.Reason
		rec.Text = fmt.Sprintf("%s %s: refused by %s: %s", rec.Op, strings.Join(rec.Args, " "), rule.Rule, rule.Reason)
	} else {
		rec.Text = fmt.Sprintf("%s %s: allowed", rec.Op, strings.Join(rec.Args, " "))
	}
}

// Proposed parses the policy text of a dry run or a replay.
func Proposed(text string) (*policy.Policy, error) {
	p, err := policy.Parse([]byte(text))
	if err != nil {
		return nil, proto.Errorf(proto.EINVAL, "the proposed policy: %v", err)
	}
	return p, nil
}

// HostOf returns the host of a URL (or the argument itself).
func HostOf(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	u, _, _ = strings.Cut(u, "/")
	if i := strings.LastIndexByte(u, '@'); i >= 0 {
		u = u[i+1:]
	}
	if strings.HasPrefix(u, "[") {
		if i := strings.IndexByte(u, ']'); i > 0 {
			return u[:i+1]
		}
	}
	if h, _, ok := strings.Cut(u, ":"); ok {
		return h
	}
	return u
}
