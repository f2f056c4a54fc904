package policy

import (
	"errors"
	"syscall"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// Load parses agent's policy file, read by read: the default policy when
// the agent has none (ENOENT), and then text is nil.
func Load(agent string, read func() ([]byte, error)) (p *Policy, text []byte, err error) {
	b, err := read()
	if err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code == proto.ENOENT {
			return Default(), nil, nil
		}
		return nil, nil, proto.AsError(err)
	}
	p, perr := Parse(b)
	if perr != nil {
		return nil, nil, proto.Errorf(proto.EIO, "agent %q: its policy file: %v", agent, perr)
	}
	return p, b, nil
}

// Record is agent's policy as a record: text is its file (nil: it has
// none, and the default policy is in force).
func Record(agent string, text []byte) proto.PolicyRecord {
	rec := proto.PolicyRecord{Type: proto.RecordPolicy, Agent: agent, Source: "file"}
	if text == nil {
		text, rec.Source = DefaultText(), "default"
	}
	rec.Text, rec.Digest = string(text), audit.ArgsDigest(text)
	return rec
}

// Offender is the run that made a violation, as signals.on_violation
// acts on it.
type Offender interface {
	Emit(rec any)
	Signal(sig syscall.Signal) error
	End(reason string)
}

// Violation applies p's signals.on_violation to r, run id of agent, for
// the refusal d: "stop" stops it (SIGSTOP) with an error record that says
// how to go on, "kill" ends it, "deny" leaves it be.
func Violation(p *Policy, d *Denied, agent, id string, r Offender) {
	switch p.Signals.OnViolation {
	case ViolationStop:
		r.Emit(&proto.ErrorRecord{Type: proto.RecordError, Run: id, Agent: agent, Code: proto.EPERM,
			Text: "stopped (SIGSTOP) for a policy violation: " + d.Reason + " (policy rule " + d.Rule + "); ox-kill -s CONT or -s KILL " + id})
		r.Signal(syscall.SIGSTOP)
	case ViolationKill:
		r.End("ended for a policy violation: " + d.Reason + " (policy rule " + d.Rule + ")")
	}
}

// Readable returns which keys of its agent's state p lets it see in a
// listing; nil means all (state.read is "**").
func (p *Policy) Readable() func(key string) bool {
	if len(p.State.Read) == 1 && p.State.Read[0] == "**" {
		return nil
	}
	return p.CanRead
}
