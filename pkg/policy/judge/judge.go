// Package judge owns asking a policy about one operation the way the
// syscalls do, without doing it: the dry run of ox-policy check (Judge,
// Fill) and the replay of ox-policy test (Replay), which judges audited
// past actions against a proposed policy and reports the ones it would
// decide otherwise. It changes and audits nothing; the kernel gates the
// syscalls and passes what a judgement needs of the state (Usage).
package judge

import (
	"errors"
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Usage returns the bytes an agent's state uses in all and the size of
// key in it (state.Store.Usage): a write is judged against the quota
// with the key's old value taken out.
type Usage func(agent, key string) (total, size int64)

// Judge asks p about one op, the way the syscalls do. A nil *Denied is
// allowed; an error means the op or its args are not understood. An ask
// rule's verdict is a Denied whose rule is named ask.* (see Asks).
func Judge(p *policy.Policy, usage Usage, agent, op string, args []string) (*policy.Denied, error) {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	var err error
	switch op {
	case proto.OpStateLoad, proto.OpStateList, "read":
		err = p.CheckStateRead(arg(0))
	case proto.OpStateSave, proto.OpStateDelete, "write":
		total, size := usage(agent, arg(0))
		err = p.CheckStateWrite(arg(0), total-size)
	case proto.OpMemRemember, proto.OpMemRecall, proto.OpMemForget, "memory":
		err = p.CheckMemory(arg(0), 0)
	case proto.OpExec:
		if len(args) == 0 {
			return nil, proto.Errorf(proto.EINVAL, "exec: give the command")
		}
		if len(args) == 1 {
			_, err = p.CheckExec(nil, args[0])
		} else {
			_, err = p.CheckExec(args, "")
		}
	case "tool.run", "tool":
		err = p.CheckTool(arg(0))
	case "net.fetch", "fetch":
		err = p.CheckHost(HostOf(arg(0)))
	default:
		return nil, proto.Errorf(proto.EINVAL, "op %q: want state.load, state.save, state.delete, state.list, mem.remember, exec, tool.run or net.fetch", op)
	}
	var d *policy.Denied
	if errors.As(err, &d) {
		return d, nil
	}
	if a := policy.AsAsked(err); a != nil {
		// An ask rule: reported as a rule of its own (ask.*), which
		// callers tell from a refusal by its name.
		return &policy.Denied{Rule: a.Rule, Reason: a.Reason}, nil
	}
	if err != nil {
		return nil, proto.Errorf(proto.EINVAL, "%v", err)
	}
	return nil, nil
}

// Check is ox-policy check's record of a: its op judged (Judge) by the
// policy proposed in a.Policy (Proposed), or, when none is, by own, the
// agent's policy in force.
func Check(a proto.PolicyCheckArgs, own func(agent string) (*policy.Policy, error), usage Usage) (proto.PolicyCheckRecord, error) {
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
	rule, derr := Judge(p, usage, a.Agent, a.Op, a.Args)
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
