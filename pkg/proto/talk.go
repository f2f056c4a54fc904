package proto

import (
	"encoding/json"
	"time"
)

// Ops of issue 22: forks of agents, messages between agents, and
// approvals of what a policy's ask rules hold back.
const (
	// OpAgentFork copies an agent at a commit as a new agent (ox-fork).
	OpAgentFork = "agent.fork"
	// OpAgentDiff compares two agents, or an agent and its fork point.
	OpAgentDiff = "agent.diff"

	OpMsgSend = "msg.send"
	OpMsgList = "msg.list"
	// OpMsgRecv streams unread messages and marks them read; with
	// Follow it goes on with each new one.
	OpMsgRecv = "msg.recv"

	OpApproveList = "approve.list"
	// OpApproveDecide approves or denies a request (ox-approve yes/no).
	OpApproveDecide = "approve.decide"
	// OpApproveAsk is the audit op of a request raised by an ask rule;
	// not a request of the wire.
	OpApproveAsk = "approve.ask"
)

// Record types.
const (
	RecordFork     = "fork"
	RecordMsg      = "msg"
	RecordApproval = "approval"
)

// ForkArgs are the args of agent.fork: copy Agent at Rev (default: its
// state now) as the new agent Name.
type ForkArgs struct {
	Agent string `json:"agent"`
	Name  string `json:"name"`
	Rev   string `json:"rev,omitempty"`
}

// ForkRecord is the "fork" record: a new agent and where it came from.
type ForkRecord struct {
	Type  string `json:"type"` // always "fork"
	Agent string `json:"agent"`
	From  string `json:"from"`
	// Point is the commit the fork was made at; Commit the commit that
	// made it (and holds the copy).
	Point  string `json:"point"`
	Commit string `json:"commit"`
	// Files is how many files (state keys, memories, the kernel's files)
	// the copy holds.
	Files    int    `json:"files"`
	AuditSeq uint64 `json:"audit_seq,omitempty"`
	Time     string `json:"time"`
	Text     string `json:"text"`
}

// AgentDiffArgs are the args of agent.diff: Agent against Other, or,
// without Other, against the commit it was forked at. Paths are relative
// to each agent's folder (state/KEY, mem/KIND/ID.md, sys/...).
type AgentDiffArgs struct {
	Agent string `json:"agent"`
	Other string `json:"other,omitempty"`
	Patch bool   `json:"patch,omitempty"`
}

// MsgSendArgs are the args of msg.send. From is the sending agent: a run
// sends as its own agent (From empty or equal); the admin may send as
// nobody (an operator) or as any agent.
type MsgSendArgs struct {
	To      string            `json:"to"`
	From    string            `json:"from,omitempty"`
	Text    string            `json:"text"`
	ReplyTo string            `json:"reply_to,omitempty"`
	Records []json.RawMessage `json:"records,omitempty"`
}

// MsgListArgs are the args of msg.list and msg.recv: Agent's inbox,
// the messages after id After, only unread ones with Unread (msg.recv:
// always). Follow (msg.recv) keeps the stream open for new messages; Max
// ends it after that many; Peek leaves them unread.
type MsgListArgs struct {
	Agent  string `json:"agent"`
	After  string `json:"after,omitempty"`
	Unread bool   `json:"unread,omitempty"`
	Follow bool   `json:"follow,omitempty"`
	Max    int    `json:"max,omitempty"`
	Peek   bool   `json:"peek,omitempty"`
	// Wait, for msg.recv without Follow: wait up to this long ("30s") for
	// a first message when none is unread.
	Wait string `json:"wait,omitempty"`
}

// MsgRecord is the "msg" record: a message of an agent's inbox.
type MsgRecord struct {
	Type    string            `json:"type"` // always "msg"
	ID      string            `json:"id"`
	Agent   string            `json:"agent"` // the inbox's agent (the recipient)
	From    string            `json:"from"`  // the sending agent; "" for an operator
	Sender  string            `json:"sender,omitempty"`
	Time    time.Time         `json:"time"`
	Text    string            `json:"text"`
	ReplyTo string            `json:"reply_to,omitempty"`
	Records []json.RawMessage `json:"records,omitempty"`
	Read    bool              `json:"read,omitempty"`
}

// ApproveListArgs are the args of approve.list: pending requests (of
// Agent), or every kept request with All.
type ApproveListArgs struct {
	Agent string `json:"agent,omitempty"`
	All   bool   `json:"all,omitempty"`
	// Follow keeps the stream open and sends each new request and each
	// decision as it happens.
	Follow bool `json:"follow,omitempty"`
}

// ApproveDecideArgs are the args of approve.decide.
type ApproveDecideArgs struct {
	ID      string `json:"id"`
	Approve bool   `json:"approve"`
	Reason  string `json:"reason,omitempty"`
}

// ApprovalRecord is the "approval" record: a request for an operator's
// decision that a policy's ask rule raised, and its outcome.
type ApprovalRecord struct {
	Type      string    `json:"type"` // always "approval"
	ID        string    `json:"id"`
	Agent     string    `json:"agent"`
	Run       string    `json:"run,omitempty"`
	Op        string    `json:"op"`
	What      string    `json:"what"`
	Rule      string    `json:"rule"`
	Why       string    `json:"why"`
	Time      time.Time `json:"time"`
	Expire    time.Time `json:"expire"`
	Default   string    `json:"default"`
	State     string    `json:"state"` // pending, approved, denied, cancelled
	DecidedBy string    `json:"decided_by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Decided   time.Time `json:"decided,omitzero"`
	Text      string    `json:"text"`
}
