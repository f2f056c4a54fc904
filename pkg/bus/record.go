package bus

import (
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// An event's record is the same whether it is live or replayed from the
// audit log, so that a subscriber that reconnects with since_seq reads
// the events it missed as it would have read them.

// SplitTarget splits an audit entry's target "agent:key" into an agent
// (when it names one) and the rest.
func SplitTarget(target string) (agent, key string) {
	a, k, ok := strings.Cut(target, ":")
	if !ok || proto.CheckAgent(a) != nil {
		return "", target
	}
	return a, k
}

// Replayed is the record of the event named name of an entry read back
// from the audit log: about the target's agent, else the acting agent's.
func Replayed(in *audit.Info, name string) proto.EventRecord {
	agent, key := SplitTarget(in.Target)
	if agent == "" {
		agent = in.Actor.Agent
	}
	return proto.EventRecord{
		Type: proto.RecordEvent, Event: name, Seq: in.Seq, Time: in.Time,
		Agent: agent, Key: key, Op: in.Op, Result: in.Result,
		Deleted: in.Op == proto.OpStateDelete || in.Op == proto.OpMemForget, Replay: true,
	}
}

// Record is the record of a live event.
func (e *Event) Record() proto.EventRecord {
	return proto.EventRecord{
		Type: proto.RecordEvent, Event: e.Name, Seq: e.Seq, Time: audit.FormatTime(e.Time),
		Agent: e.Agent, Key: e.Key, Op: e.Op, Result: e.Result, Deleted: e.Deleted, Data: e.Data,
	}
}
