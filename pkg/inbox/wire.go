package inbox

import (
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// Record is m as the wire has it.
func (m Message) Record() proto.MsgRecord {
	return proto.MsgRecord{Type: proto.RecordMsg, ID: m.ID, Agent: m.To, From: m.From, Sender: m.Sender, Time: m.Time,
		Text: m.Text, ReplyTo: m.ReplyTo, Records: m.Records, Read: m.Read}
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
