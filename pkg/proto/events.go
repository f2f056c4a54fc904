package proto

import "path"

// OpEvents streams what happens in the kernel (events.subscribe).
const OpEvents = "events.subscribe"

// Record types of the event stream.
const (
	RecordEvent = "event"
	RecordLost  = "lost"
)

// Event names. An audited syscall's event is named by the kernel's syscall
// table, for the live bus and for the replay from the audit log, so that a
// subscriber that reconnects with since_seq sees the same names.
const (
	EventStateChanged = "state.changed"
	EventPolicyDenied = "policy.denied"
	EventCommit       = "commit.created"
	EventTag          = "commit.tagged"
	// A memory remembered or forgotten (also by a restore or its TTL).
	EventMemoryAdded     = "memory.added"
	EventMemoryForgotten = "memory.forgotten"
	// Runs (issue 6).
	EventRunStarted     = "run.started"
	EventRunExited      = "run.exited"
	EventRunQueued      = "run.queued" // waits for admission (issue 8)
	EventBudgetExceeded = "budget.exceeded"
	EventExec           = "exec"
	// EventScheduleFired is the event of a firing that started a run.
	EventScheduleFired = "schedule.fired"
	// EventMsgSent is the event of a message put into an inbox.
	EventMsgSent = "msg.sent"
	// EventAgentForked is the event of a fork, published for the new
	// agent.
	EventAgentForked = "agent.forked"
	// Events of approvals.
	EventApprovalRequested = "approval.requested"
	EventApprovalDecided   = "approval.decided"
)

// EventsArgs select the events of a subscription. The zero value is every
// event the caller may see, from now on.
type EventsArgs struct {
	Agent string `json:"agent,omitempty"` // only events of this agent
	// Types are event names or globs of them ("state.*"); none: all.
	Types []string `json:"types,omitempty"`
	// SinceSeq, when not 0, first replays from the audit log the events of
	// the entries from SinceSeq on (inclusive), then goes on live without
	// a gap or a repeat: a client that reconnects passes the last seq it
	// saw plus one and misses nothing.
	SinceSeq uint64 `json:"since_seq,omitempty"`
}

// EventRecord is the "event" record: one thing the kernel did, in commit
// order. Seq is the audit entry that records it (ox-audit show SEQ);
// Data is what a kind adds live (a commit's record...), absent on replay.
type EventRecord struct {
	Type    string `json:"type"` // always "event"
	Event   string `json:"event"`
	Seq     uint64 `json:"seq,omitempty"`
	Time    string `json:"time"`
	Agent   string `json:"agent,omitempty"`
	Key     string `json:"key,omitempty"`
	Op      string `json:"op,omitempty"`
	Result  string `json:"result,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	Replay  bool   `json:"replay,omitempty"`
	Data    any    `json:"data,omitempty"`
}

// LostRecord is the "lost" record: the subscriber fell behind and Count
// events were dropped (after the last record it got and before the next).
// The stream goes on; replay them with since_seq from the audit log.
type LostRecord struct {
	Type  string `json:"type"` // always "lost"
	Count uint64 `json:"count"`
}

// CheckTypes checks that each of a.Types is an event name or a glob.
func (a *EventsArgs) CheckTypes() *Error {
	for _, t := range a.Types {
		if _, err := path.Match(t, ""); err != nil || t == "" {
			return Errorf(EINVAL, "event type %q is not a name or a glob", t)
		}
	}
	return nil
}

// Selects reports whether a selects the event name of agent: of a.Agent
// (when given), and named by one of a.Types (when any).
func (a *EventsArgs) Selects(name, agent string) bool {
	if a.Agent != "" && agent != a.Agent {
		return false
	}
	if len(a.Types) == 0 {
		return true
	}
	for _, t := range a.Types {
		if ok, _ := path.Match(t, name); ok {
			return true
		}
	}
	return false
}
