package inbox

import (
	"context"
	"errors"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// Record is m as the wire has it.
func (m Message) Record() proto.MsgRecord {
	return proto.MsgRecord{Type: proto.RecordMsg, ID: m.ID, Agent: m.To, From: m.From, Sender: m.Sender, Time: m.Time,
		Text: m.Text, ReplyTo: m.ReplyTo, Records: m.Records, Read: m.Read}
}

// Sender is the agent a message of a is from ("" for an operator), sent
// by a caller that is run of agent, when agent is not "": its own agent,
// which a.From may only repeat (a refusal, EPERM, to audit); else a.From.
func Sender(a proto.MsgSendArgs, agent, run string) (string, *proto.Error) {
	from := a.From
	if agent != "" {
		if from != "" && from != agent {
			return from, proto.Errorf(proto.EPERM, "run %s of agent %q may not send as %q", run, agent, from)
		}
		from = agent
	}
	return from, nil
}

// Deliver puts m into its recipient's inbox, durable first (a crash
// before its audit entry keeps the message: the journal of the inbox is
// the one a reader needs), then records its audit entry by who with args
// digest (msg.send, published as msg.sent with its record) through
// record. A message the inbox does not take is refused (EINVAL), for the
// caller to audit.
func (s *Store) Deliver(ctx context.Context, m Message, who audit.Actor, digest string, record audit.Recorder) (rec proto.MsgRecord, refused *proto.Error, err error) {
	m, err = s.Send(m)
	if errors.Is(err, ErrFull) {
		return rec, proto.Errorf(proto.EDQUOT, "%v", err), nil
	}
	if err != nil {
		return rec, proto.Errorf(proto.EINVAL, "%v", err), nil
	}
	rec = m.Record()
	ev := rec // the event's own copy
	e := &audit.Entry{Actor: who, Op: proto.OpMsgSend, Target: Target(m.To, m.From, m.ID), Args: digest, Result: "ok"}
	if err := record(ctx, e, proto.EventMsgSent, m.To, m.ID, &ev); err != nil {
		return proto.MsgRecord{}, nil, err
	}
	return rec, nil, nil
}

// Target is the audit target of a message to to from the agent from (""
// for an operator), with its id once it was sent.
func Target(to, from, id string) string {
	if from == "" {
		from = "operator"
	}
	t := to + ":msg from " + from
	if id != "" {
		t += " " + id
	}
	return t
}

// Records emits the messages of a.Agent's inbox as msg.list asks for
// them (after a.After, a.Unread only, at most a.Max), oldest first.
func (s *Store) Records(a proto.MsgListArgs, emit func(*proto.MsgRecord) error) error {
	if a.After != "" {
		if err := CheckID(a.After); err != nil {
			return proto.Errorf(proto.EINVAL, "after: %v", err)
		}
	}
	n := 0
	for _, m := range s.List(a.Agent, a.After, a.Unread) {
		if a.Max > 0 && n >= a.Max {
			break
		}
		rec := m.Record()
		if err := emit(&rec); err != nil {
			return err
		}
		n++
	}
	return nil
}

// Receive is msg.recv: a's receive (RecvArgs, checked first) of a.Agent's
// messages, each emitted as its record (Recv).
func (s *Store) Receive(ctx context.Context, a proto.MsgListArgs, emit func(*proto.MsgRecord) error) error {
	o, perr := RecvArgs(a)
	if perr != nil {
		return perr
	}
	return s.Recv(ctx, a.Agent, o, func(m Message) error {
		rec := m.Record()
		return emit(&rec)
	})
}

// RecvArgs checks the args of a receive (msg.recv) and returns how Recv
// receives.
func RecvArgs(a proto.MsgListArgs) (RecvOptions, *proto.Error) {
	var wait time.Duration
	if a.Wait != "" {
		d, err := time.ParseDuration(a.Wait)
		if err != nil || d < 0 {
			return RecvOptions{}, proto.Errorf(proto.EINVAL, "wait %q: want a duration such as 30s", a.Wait)
		}
		wait = d
	}
	if a.Max < 0 {
		return RecvOptions{}, proto.Errorf(proto.EINVAL, "max must not be negative")
	}
	return RecvOptions{After: a.After, Max: a.Max, Peek: a.Peek, Follow: a.Follow, Wait: wait}, nil
}
