package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Syscall declares one operation of the kernel: everything about it but
// its method. The table below is the one list of operations; the socket
// server serves exactly the ops it gives a Serve, crash replay marks what
// Dirties says, and the event bus names what Event says. Adding a syscall
// is one entry here and one method.
type Syscall struct {
	Op string
	// Mutates: the call commits a change, with its audit entry, through
	// the committer. Other calls are audited only when refused.
	Mutates bool
	// Key is how the gate checks the key (or prefix) a call names.
	Key keyRule
	// Inline: quick and never blocking, so the server runs it on the
	// connection's reading goroutine.
	Inline bool
	// Event names the bus event of an entry of the op that succeeded; ""
	// names it after the op.
	Event string
	// Dirties is the path of the versioned tree that an entry of the op
	// changed ("" for none). Replaying the journal after a crash marks it
	// uncommitted, as the committer did when the change was made.
	Dirties func(e *audit.Entry) string
	// Serve decodes the wire args and calls the method; nil for ops that
	// only the kernel records (a run's exit, a schedule firing).
	Serve serveFunc
	// Existing: the op reads an agent or acts for it (exec, a tool, a
	// fetch, an MCP call), so the gate answers ENOENT for an agent that
	// does not exist, in the same words for every op (proto.NoAgent),
	// instead of letting the call bring it into being as a side effect
	// (an exec's budget charge would). Writes (state.save, mem.remember,
	// policy.set, budget.set, schedule.add) and run.spawn create an
	// agent; version.* and audit.log read a removed agent's history;
	// events.subscribe may wait for one.
	Existing bool
}

// keyRule is the check the gate gives the key of a call.
type keyRule int

const (
	keyNone   keyRule = iota
	keyRead           // proto.CheckKey
	keyStored         // proto.CheckStoredKey: also no name git reserves
	keyPrefix         // proto.CheckPrefix
)

func (r keyRule) check(key string) *proto.Error {
	switch r {
	case keyRead:
		return proto.CheckKey(key)
	case keyStored:
		return proto.CheckStoredKey(key)
	case keyPrefix:
		return proto.CheckPrefix(key)
	}
	return nil
}

// Request is one call as a front end received it: its op, its args as
// JSON, and where its stream items go.
type Request struct {
	Op   string
	Args json.RawMessage
	Out  Out
}

// Out is where a served call writes its stream items.
type Out interface {
	// Item sends one record of the stream.
	Item(rec []byte) error
	// Flush makes the items sent so far visible now (a follower reads
	// them as they come).
	Flush()
	// Follow is the context of a call that lasts until the client closes
	// its side of the connection (events, a followed log, an attach).
	Follow() context.Context
}

// serveFunc runs a call for a front end and returns its encoded result
// (nil for a stream, whose items went to r.Out).
type serveFunc func(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error)

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

// syscalls is the table. It is filled by init only because Go would call
// a literal a cycle: the methods it names publish events, and event names
// come from the table.
var syscalls map[string]*Syscall

func init() {
	syscalls = map[string]*Syscall{
		proto.OpHello: {Inline: true, Serve: serveHello},

		proto.OpStateSave:   {Mutates: true, Key: keyStored, Event: EventStateChanged, Dirties: dirtyOK(state.SpaceState), Serve: serveStateSave},
		proto.OpStateDelete: {Mutates: true, Key: keyRead, Event: EventStateChanged, Dirties: dirtyOK(state.SpaceState), Serve: serveStateDelete},
		proto.OpStateLoad:   {Key: keyRead, Inline: true, Serve: serveStateLoad},
		proto.OpStateList:   {Existing: true, Key: keyPrefix, Serve: serveStateList},

		proto.OpMemRemember: {Mutates: true, Event: EventMemoryAdded, Dirties: dirtyOK(state.SpaceMem), Serve: unary(false, (*Kernel).MemRemember)},
		proto.OpMemForget:   {Existing: true, Mutates: true, Event: EventMemoryForgotten, Dirties: dirtyOK(state.SpaceMem), Serve: serveMemForget},
		proto.OpMemRecall:   {Existing: true, Serve: stream(false, (*Kernel).MemRecall)},
		proto.OpMemList:     {Existing: true, Serve: stream(false, (*Kernel).MemList)},

		proto.OpCommit:        {Mutates: true, Event: EventCommit, Serve: unary(true, (*Kernel).Commit)},
		proto.OpCommitTag:     {Mutates: true, Event: EventTag, Serve: unary(false, (*Kernel).CommitTag)},
		proto.OpCommitRestore: {Mutates: true, Serve: unary(false, (*Kernel).CommitRestore)},
		proto.OpCommitLog:     {Serve: stream(true, (*Kernel).CommitLog)},
		proto.OpCommitShow:    {Serve: unary(false, (*Kernel).CommitShow)},
		proto.OpCommitDiff:    {Serve: stream(false, (*Kernel).CommitDiff)},

		proto.OpAuditLog:    {Serve: serveAuditLog},
		proto.OpAuditShow:   {Serve: serveAuditShow},
		proto.OpAuditHead:   {Serve: serveAuditHead},
		proto.OpAuditVerify: {Serve: serveAuditVerify},
		proto.OpAuditExport: {Serve: serveAuditExport},
		proto.OpEvents:      {Serve: serveEvents},

		proto.OpPolicyShow:  {Existing: true, Serve: servePolicyShow},
		proto.OpPolicySet:   {Mutates: true, Dirties: dirtySys(sysPolicy), Serve: unary(false, (*Kernel).PolicySet)},
		proto.OpPolicyCheck: {Existing: true, Serve: unary(false, (*Kernel).PolicyCheck)},
		proto.OpPolicyTest:  {Existing: true, Serve: servePolicyTest},

		proto.OpResources: {Existing: true, Serve: unary(true, (*Kernel).Resources)},
		proto.OpStatus:    {Serve: serveStatus},

		proto.OpRunSpawn:  {Mutates: true, Event: EventRunStarted, Serve: serveRunSpawn},
		proto.OpRunAttach: {Serve: serveRunAttach},
		proto.OpRunWait:   {Serve: serveRunWait},
		proto.OpRunKill:   {Mutates: true, Serve: stream(false, (*Kernel).RunKill)},
		proto.OpRunPs:     {Existing: true, Serve: stream(true, (*Kernel).RunPs)},
		proto.OpExec:      {Existing: true, Mutates: true, Serve: refusedUnary("exec", (*Kernel).Exec)},
		proto.OpNetFetch:  {Existing: true, Mutates: true, Serve: refusedUnary("fetch", (*Kernel).NetFetch)},
		proto.OpToolRun:   {Existing: true, Mutates: true, Serve: refusedUnary("tool", (*Kernel).ToolRun)},
		proto.OpToolList:  {Existing: true, Serve: stream(false, (*Kernel).ToolList)},

		proto.OpBudgetShow:   {Existing: true, Serve: serveBudgetShow},
		proto.OpBudgetSet:    {Mutates: true, Dirties: dirtySys(sysBudget), Serve: unary(false, (*Kernel).BudgetSet)},
		proto.OpBudgetReset:  {Mutates: true, Dirties: dirtySys(sysBudget), Serve: serveBudgetReset},
		proto.OpBudgetCheck:  {Existing: true, Serve: unary(false, (*Kernel).BudgetCheck)},
		proto.OpBudgetCharge: {Mutates: true, Dirties: dirtySys(sysBudget), Serve: unary(false, (*Kernel).BudgetCharge)},

		proto.OpScheduleAdd:    {Mutates: true, Dirties: dirtyJob, Serve: unary(false, (*Kernel).ScheduleAdd)},
		proto.OpScheduleRm:     {Mutates: true, Dirties: dirtyJob, Serve: unary(false, (*Kernel).ScheduleRm)},
		proto.OpScheduleRun:    {Mutates: true, Serve: unary(false, (*Kernel).ScheduleRun)},
		proto.OpScheduleEnable: {Mutates: true, Dirties: dirtyJob, Serve: unary(false, (*Kernel).ScheduleEnable)},
		proto.OpScheduleList:   {Existing: true, Serve: stream(true, (*Kernel).ScheduleList)},

		proto.OpLLMGate: {Existing: true, Serve: unary(false, (*Kernel).LLMGate)},

		proto.OpMCPServers: {Existing: true, Serve: serveMCPServers},
		proto.OpMCPCall:    {Existing: true, Mutates: true, Serve: refusedUnary("mcp", (*Kernel).MCPCall)},
		proto.OpMCPResult:  {Existing: true, Mutates: true, Serve: serveMCPResult},

		proto.OpAgentList:   {Serve: serveAgentList},
		proto.OpAgentShow:   {Existing: true, Serve: serveAgentShow},
		proto.OpAgentRemove: {Mutates: true, Event: proto.EventAgentRemoved, Dirties: dirtyRemoved, Serve: serveAgentRemove},

		// Forks, messages and approvals (fork.go, msg.go, approve.go).
		// A fork marks nothing on replay: forkReplayed has the next commit
		// compare everything, as its paths are not in entries.
		proto.OpAgentFork:     {Mutates: true, Event: EventAgentForked, Serve: unary(false, (*Kernel).Fork)},
		proto.OpAgentDiff:     {Serve: stream(false, (*Kernel).AgentDiff)},
		proto.OpMsgSend:       {Mutates: true, Event: EventMsgSent, Serve: unary(false, (*Kernel).MsgSend)},
		proto.OpMsgList:       {Serve: stream(false, (*Kernel).MsgList)},
		proto.OpMsgRecv:       {Serve: serveMsgRecv},
		proto.OpApproveList:   {Serve: serveApproveList},
		proto.OpApproveDecide: {Mutates: true, Event: EventApprovalDecided, Serve: unary(false, (*Kernel).ApproveDecide)},
		proto.OpApproveAsk:    {Mutates: true, Event: EventApprovalRequested},

		// The fleet (fleet.go, pkg/fleet): the called node audits what it does.
		proto.OpFleetStatus:  {Serve: stream(true, (*Kernel).FleetStatus)},
		proto.OpFleetCall:    {Serve: serveFleetCall},
		proto.OpFleetWitness: {Serve: stream(true, (*Kernel).FleetWitness)},
		proto.OpVersionPush:  {Mutates: true, Serve: unary(false, (*Kernel).VersionPush)},

		// Recorded by the kernel itself, never called by a client.
		proto.OpAgentCreate:  {Mutates: true, Dirties: dirtySys(sysPolicy)},
		proto.OpRunExit:      {Mutates: true, Event: EventRunExited, Dirties: dirtySys(sysBudget)},
		proto.OpRunQueue:     {Mutates: true, Event: EventRunQueued},
		proto.OpRunLimit:     {Mutates: true},
		proto.OpRunWall:      {Mutates: true},
		proto.OpScheduleFire: {Mutates: true, Event: EventScheduleFired, Dirties: dirtyJob},
		proto.OpFSAccess:     {},
		opConnect:            {},
	}
	for op, sc := range syscalls {
		sc.Op = op
	}
}

// opConnect records a peer refused at connection time.
const opConnect = "connect"

// dirtyOK marks the key an entry names in space, if the entry succeeded.
func dirtyOK(space string) func(e *audit.Entry) string {
	return func(e *audit.Entry) string {
		agent, key, ok := strings.Cut(e.Target, ":")
		if e.Result != "ok" || !ok {
			return ""
		}
		return spacePath(space, agent, key)
	}
}

// dirtySys marks a kernel file of the agent an entry names (an extra path
// for a refused entry is harmless).
func dirtySys(file string) func(e *audit.Entry) string {
	return func(e *audit.Entry) string { return spacePath(state.SpaceSys, targetAgent(e.Target), file) }
}

// dirtyRemoved marks the kernel file of a removed agent that an entry
// names ("agent:sys/KEY", agents.go); the entry naming the agent itself
// ("agent:") marks nothing.
func dirtyRemoved(e *audit.Entry) string {
	agent, rest, ok := strings.Cut(e.Target, ":")
	if !ok {
		return ""
	}
	key, ok := strings.CutPrefix(rest, state.SpaceSys+"/")
	if !ok {
		return ""
	}
	return spacePath(state.SpaceSys, agent, key)
}

// dirtyJob marks the file of the job an entry names ("agent:name ...").
func dirtyJob(e *audit.Entry) string {
	agent, rest, ok := strings.Cut(e.Target, ":")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return spacePath(state.SpaceSys, agent, jobKey(name))
}

// eventName names what an entry of op with result did: a refusal is
// policy.denied whatever the op; a successful op has its declared event,
// or is named by the op itself (so is a failure).
func eventName(op, result string) string {
	switch result {
	case proto.EPERM, proto.EACCES:
		return EventPolicyDenied
	case proto.EDQUOT:
		return EventBudgetExceeded
	case "ok":
		if sc := syscalls[op]; sc != nil && sc.Event != "" {
			return sc.Event
		}
	}
	return op
}

// The adapters from the wire to the methods: most syscalls take their
// args and return one record, or stream records.

func decode[A any](optional bool, r *Request) (A, error) {
	var a A
	var err *proto.Error
	if optional {
		err = proto.DecodeOptionalArgs(r.Op, r.Args, &a)
	} else {
		err = proto.DecodeArgs(r.Op, r.Args, &a)
	}
	if err != nil {
		return a, err
	}
	return a, nil
}

func unary[A, R any](optional bool, m func(*Kernel, context.Context, *Cred, A, []byte) (R, error)) serveFunc {
	return func(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error) {
		a, err := decode[A](optional, r)
		if err != nil {
			return nil, err
		}
		rec, err := m(k, ctx, c, a, r.Args)
		if err != nil {
			return nil, err
		}
		return encodeRecord(&rec)
	}
}

// refusedUnary is unary for an op that acts for an agent (exec, a tool, a
// fetch): args that do not decode, an exec that brings an "env" say, are
// an attempt the log must show, not only a malformed line.
func refusedUnary[A, R any](what string, m func(*Kernel, context.Context, *Cred, A, []byte) (R, error)) serveFunc {
	return func(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error) {
		a, err := decode[A](false, r)
		if err != nil {
			var who struct {
				Agent string `json:"agent"`
			}
			json.Unmarshal(r.Args, &who)
			k.Refused(c, r.Op, fmt.Sprintf("%.64s:%s [args]", who.Agent, what), r.Args, proto.Result(err))
			return nil, err
		}
		rec, err := m(k, ctx, c, a, r.Args)
		if err != nil {
			return nil, err
		}
		return encodeRecord(&rec)
	}
}

func stream[A, R any](optional bool, m func(*Kernel, context.Context, *Cred, A, []byte, func(*R) error) error) serveFunc {
	return func(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error) {
		a, err := decode[A](optional, r)
		if err != nil {
			return nil, err
		}
		return nil, m(k, ctx, c, a, r.Args, items[R](r.Out))
	}
}

// items sends each record to out as an item.
func items[R any](out Out) func(*R) error {
	return func(rec *R) error {
		b, err := encodeRecord(rec)
		if err != nil {
			return err
		}
		return out.Item(b)
	}
}

// flushed sends each record as an item, flushed at once: a run's records
// are read as they happen.
func flushed(out Out) func([]byte) error {
	return func(b []byte) error {
		if err := out.Item(b); err != nil {
			return err
		}
		out.Flush()
		return nil
	}
}
