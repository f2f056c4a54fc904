package kernel

import (
	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Syscall declares one operation of the kernel: everything about it but
// its method. The table below is the one list of operations: front ends
// serve exactly the ops not Recorded (pkg/serve adapts each from the wire,
// and its test holds the two lists equal), crash replay marks what
// Dirties says, the gate (gate.go) checks what Admin, Agent, Key and
// Existing say and asks what Asks says, and the dry run (question.go)
// asks the same. Adding a syscall is one entry here, one method that
// enters the gate under its op (TestEveryServedOpGated in pkg/serve fails
// otherwise) and its adapter in pkg/serve.
type Syscall struct {
	Op string
	// Mutates: the call commits a change, with its audit entry, through
	// the committer. Other calls are audited only when refused.
	Mutates bool
	// Key is how the gate checks the key (or prefix) a call names.
	Key proto.KeyRule
	// Inline: quick and never blocking, so the server runs it on the
	// connection's reading goroutine.
	Inline bool
	// Alone: quick, but it waits for its own commit (an fdatasync). The
	// server runs it on the reading goroutine when it is the connection's
	// only request (none in flight, none received behind it): a
	// sequential client's save is then spared the hand-off to a goroutine
	// of its own, which cost a third of its throughput (3.5k saves a
	// second against 5.4k). Requests that come pipelined run each on a
	// goroutine of its own, and group-commit together. As with Inline,
	// its args are then the connection's read buffer: the method keeps
	// nothing of them past its return (values and texts are copies).
	Alone bool
	// Event names the bus event of an entry of the op that succeeded; ""
	// names it after the op.
	Event string
	// Dirties is the path of the versioned tree that an entry of the op
	// changed ("" for none). Replaying the journal after a crash marks it
	// uncommitted, as the committer did when the change was made.
	Dirties func(e *audit.Entry) string
	// Recorded: only the kernel records the op (a run's exit, a schedule
	// firing); no front end calls it. Every other op has its adapter from
	// the wire in pkg/serve.
	Recorded bool
	// Existing: the op reads an agent or acts for it (exec, a tool, a
	// fetch, an MCP call), so the gate answers ENOENT for an agent that
	// does not exist, in the same words for every op (proto.NoAgent),
	// instead of letting the call bring it into being as a side effect
	// (an exec's budget charge would). Writes (state.save, mem.remember,
	// policy.set, budget.set, schedule.add) and run.spawn create an
	// agent; version.* and audit.log read a removed agent's history;
	// events.subscribe may wait for one.
	Existing bool
	// Admin: only the admin calls the op; the gate refuses anyone else
	// with EACCES, in the same words for every op (notAdmin).
	Admin bool
	// Asks is the op's policy question (question.go): what the gate asks
	// of the agent's policy for a call, and what the dry run (ox-policy
	// check, ox-policy test) asks for the op.
	Asks policyAsk
	// Operator: a person calls the op (an approval's decision); the gate
	// refuses a run of any agent with EPERM.
	Operator bool
	// Names: the call names a second agent (a fork's new one), on which
	// the gate authorizes the caller too; the dry run takes it as its
	// first word.
	Names bool
	// Fleet: a fleet call (fleet.call) may carry the op to other nodes
	// (proto.FleetCallable, which TestFleetCallable holds to this).
	Fleet bool
	// Agent is how a call names its agent: one it must name (the
	// default), a filter ("" for every agent the caller may see), or
	// none (the op is about the daemon, the log or the fleet).
	Agent agentRule
}

// agentRule is how a syscall's call names its agent (Syscall.Agent).
type agentRule uint8

const (
	agentNamed  agentRule = iota // the call names one agent
	agentFilter                  // "" lists every agent the caller may see
	agentNone                    // the op acts on no agent
)

// Lookup returns the declaration of op, or nil.
func Lookup(op string) *Syscall { return syscalls[op] }

// Syscalls lists the declared ops.
func Syscalls() []*Syscall {
	out := make([]*Syscall, 0, len(syscalls))
	for _, sc := range syscalls {
		out = append(out, sc)
	}
	return out
}

// syscalls is the table.
var syscalls = declare(map[string]*Syscall{
	proto.OpHello: {Inline: true, Agent: agentNone},

	proto.OpStateSave:   {Asks: askWrite, Alone: true, Mutates: true, Key: proto.KeyStored, Event: proto.EventStateChanged, Dirties: agenttree.ChangedKey(state.SpaceState)},
	proto.OpStateDelete: {Asks: askWrite, Alone: true, Mutates: true, Key: proto.KeyRead, Event: proto.EventStateChanged, Dirties: agenttree.ChangedKey(state.SpaceState)},
	proto.OpStateLoad:   {Asks: askRead, Key: proto.KeyRead, Inline: true},
	proto.OpStateList:   {Asks: askList, Existing: true, Key: proto.KeyPrefix},

	proto.OpMemRemember: {Asks: askRemember, Alone: true, Mutates: true, Event: proto.EventMemoryAdded, Dirties: agenttree.ChangedKey(state.SpaceMem)},
	proto.OpMemForget:   {Asks: askRecall, Existing: true, Mutates: true, Event: proto.EventMemoryForgotten, Dirties: agenttree.ChangedKey(state.SpaceMem)},
	proto.OpMemRecall:   {Asks: askRecall, Existing: true},
	proto.OpMemList:     {Asks: askRecall, Existing: true},

	proto.OpCommit:        {Mutates: true, Event: proto.EventCommit},
	proto.OpCommitTag:     {Mutates: true, Event: proto.EventTag},
	proto.OpCommitRestore: {Mutates: true},
	proto.OpCommitLog:     {},
	proto.OpCommitShow:    {},
	proto.OpCommitDiff:    {},

	proto.OpAuditLog:    {Fleet: true, Agent: agentFilter},
	proto.OpAuditShow:   {Agent: agentNone},
	proto.OpAuditHead:   {Fleet: true, Admin: true, Agent: agentNone},
	proto.OpAuditVerify: {Fleet: true, Admin: true, Agent: agentNone},
	proto.OpAuditExport: {Admin: true, Agent: agentNone},
	proto.OpEvents:      {Fleet: true, Agent: agentFilter},

	proto.OpPolicyShow:  {Existing: true},
	proto.OpPolicySet:   {Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysPolicy)},
	proto.OpPolicyCheck: {Existing: true},
	proto.OpPolicyTest:  {Existing: true},

	proto.OpResources: {Fleet: true, Existing: true, Agent: agentFilter},
	proto.OpStatus:    {Fleet: true, Agent: agentNone},

	proto.OpRunSpawn:  {Asks: askWork, Fleet: true, Mutates: true, Event: proto.EventRunStarted},
	proto.OpRunAttach: {Fleet: true},
	proto.OpRunWait:   {Fleet: true},
	proto.OpRunKill:   {Fleet: true, Mutates: true},
	proto.OpRunStdin:  {Mutates: true},
	proto.OpRunPs:     {Fleet: true, Existing: true, Agent: agentFilter},
	proto.OpExec:      {Asks: askExec, Existing: true, Mutates: true},
	proto.OpNetFetch:  {Asks: askHost, Existing: true, Mutates: true},
	proto.OpToolRun:   {Asks: askTool, Existing: true, Mutates: true},
	proto.OpToolList:  {Existing: true},

	proto.OpBudgetShow:   {Existing: true},
	proto.OpBudgetSet:    {Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},
	proto.OpBudgetReset:  {Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},
	proto.OpBudgetCheck:  {Existing: true},
	proto.OpBudgetCharge: {Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)}, // a run's calls are charged by llm.chat

	proto.OpScheduleAdd:    {Mutates: true, Dirties: agenttree.ChangedJob},
	proto.OpScheduleRm:     {Mutates: true, Dirties: agenttree.ChangedJob},
	proto.OpScheduleRun:    {Mutates: true},
	proto.OpScheduleEnable: {Mutates: true, Dirties: agenttree.ChangedJob},
	proto.OpScheduleList:   {Existing: true, Agent: agentFilter},

	proto.OpLLMGate: {Existing: true},
	proto.OpLLMChat: {Existing: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},

	proto.OpMCPServers: {Existing: true},
	proto.OpMCPCall:    {Asks: askMCP, Existing: true, Mutates: true},
	proto.OpMCPResult:  {Existing: true, Mutates: true},

	proto.OpAgentList:   {Agent: agentNone},
	proto.OpAgentShow:   {Existing: true},
	proto.OpAgentRemove: {Admin: true, Existing: true, Mutates: true, Event: proto.EventAgentRemoved, Dirties: agenttree.RemovedFile},

	// Forks, messages and approvals (fork.go, msg.go, approve.go).
	// A fork marks nothing on replay: forkReplayed has the next commit
	// compare everything, as its paths are not in entries.
	proto.OpAgentFork:     {Names: true, Mutates: true, Event: proto.EventAgentForked},
	proto.OpAgentDiff:     {},
	proto.OpMsgSend:       {Asks: askSend, Mutates: true, Event: proto.EventMsgSent},
	proto.OpMsgList:       {},
	proto.OpMsgRecv:       {},
	proto.OpApproveList:   {Agent: agentFilter},
	proto.OpApproveDecide: {Operator: true, Mutates: true, Event: proto.EventApprovalDecided},
	proto.OpApproveAsk:    {Mutates: true, Event: proto.EventApprovalRequested, Recorded: true},

	// Runs' work on host folders (work.go): an operator's to apply.
	proto.OpWorkList:    {Agent: agentFilter},
	proto.OpWorkDiff:    {},
	proto.OpWorkView:    {},
	proto.OpWorkApply:   {Operator: true, Mutates: true},
	proto.OpWorkDiscard: {Operator: true, Mutates: true},
	proto.OpRunReceipt:  {Admin: true},

	// The fleet (fleet.go, pkg/fleet): the called node audits what it does.
	proto.OpFleetStatus:  {Agent: agentNone},
	proto.OpFleetCall:    {Agent: agentNone},
	proto.OpFleetWitness: {Admin: true, Agent: agentNone},
	proto.OpVersionPush:  {Admin: true, Mutates: true, Agent: agentNone},

	// Recorded by the kernel itself, never called by a client.
	proto.OpAgentCreate:  {Mutates: true, Dirties: agenttree.ChangedFile(sysPolicy), Recorded: true},
	proto.OpRunExit:      {Mutates: true, Event: proto.EventRunExited, Dirties: agenttree.ChangedFile(sysBudget), Recorded: true},
	proto.OpRunQueue:     {Mutates: true, Event: proto.EventRunQueued, Recorded: true},
	proto.OpRunLimit:     {Mutates: true, Recorded: true},
	proto.OpRunWall:      {Mutates: true, Recorded: true},
	proto.OpScheduleFire: {Mutates: true, Event: proto.EventScheduleFired, Dirties: agenttree.ChangedJob, Recorded: true},
	proto.OpFSAccess:     {Recorded: true},
	opConnect:            {Recorded: true},
	opHook:               {Recorded: true},
})

// declare names each syscall of table after its op.
func declare(table map[string]*Syscall) map[string]*Syscall {
	for op, sc := range table {
		sc.Op = op
	}
	return table
}

// opConnect records a peer refused at connection time.
const opConnect = "connect"

// eventName names what an entry of op with result did: a refusal is
// policy.denied whatever the op; a successful op has its declared event,
// or is named by the op itself (so is a failure).
func eventName(op, result string) string {
	switch result {
	case proto.EPERM, proto.EACCES:
		return proto.EventPolicyDenied
	case proto.EDQUOT:
		return proto.EventBudgetExceeded
	case "ok":
		if sc := syscalls[op]; sc != nil && sc.Event != "" {
			return sc.Event
		}
	}
	return op
}

// The adapters from the wire to the methods: most syscalls take their
// args and return one record, or stream records.
