package kernel

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/netfetch"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/state"
)

// Syscall declares one operation of the kernel: what every part of the
// kernel reads of it (the gate, crash replay, the event names, the dry
// run). Each served op's declaration is part of its definition (Def,
// def.go) in the table below, with how the gate finds a call's subject,
// its wire docs and shape and its work; the ops only the kernel records
// are declared alone (recorded). Front ends serve exactly the ops of
// the table (pkg/serve, whose test holds the two in step), crash replay
// marks what Dirties says, the gate (gate.go) checks what Admin, Agent,
// Key and Existing say and asks what Asks says, and the dry run
// (question.go) asks the same. Adding a syscall is one Def in the table,
// with its Do.
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

// DefOf returns the definition of op, which a front end serves; nil for
// an op that only the kernel records.
func DefOf(op string) Op { return defs[op] }

// syscalls is the table of declarations: each definition's, and those
// of the ops only the kernel records; defs the definitions by op.
var (
	syscalls map[string]*Syscall
	defs     map[string]Op
)

func init() {
	syscalls = make(map[string]*Syscall, len(table)+len(recorded))
	defs = make(map[string]Op, len(table))
	for _, d := range table {
		sc := d.Decl()
		if syscalls[sc.Op] != nil {
			panic("syscall " + sc.Op + " defined twice")
		}
		syscalls[sc.Op], defs[sc.Op] = sc, d
	}
	for op, sc := range recorded {
		sc.Op, sc.Recorded = op, true
		syscalls[op] = sc
	}
}

// recorded are the ops only the kernel records (a run's exit, a
// schedule firing): no front end calls them.
var recorded = map[string]*Syscall{
	proto.OpApproveAsk:   {Mutates: true, Event: proto.EventApprovalRequested},
	proto.OpAgentCreate:  {Mutates: true, Dirties: agenttree.ChangedFile(sysPolicy)},
	proto.OpRunExit:      {Mutates: true, Event: proto.EventRunExited, Dirties: agenttree.ChangedFile(sysBudget)},
	proto.OpRunQueue:     {Mutates: true, Event: proto.EventRunQueued},
	proto.OpRunLimit:     {Mutates: true},
	proto.OpRunWall:      {Mutates: true},
	proto.OpScheduleFire: {Mutates: true, Event: proto.EventScheduleFired, Dirties: agenttree.ChangedJob},
	proto.OpFSAccess:     {},
	opConnect:            {},
	opHook:               {},
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

// table is the one list of the ops a front end serves, each its whole
// definition (Def): the declaration, how the gate's call is found in its
// args, its wire docs and shape, and its work. Adding a syscall is its
// Def here, with its Do (the method body, which does not gate), in this
// list; the kernel's exported method of it, if the kernel's own front
// ends (the mount) call it, is a one-line call of the Def.
var table = []Op{
	sysHello,
	sysStateSave, sysStateDelete, sysStateLoad, sysStateList, sysStateStat,
	sysMemRemember, sysMemForget, sysMemRecall, sysMemList,
	sysCommit, sysCommitTag, sysCommitRestore, sysCommitLog, sysCommitShow, sysCommitDiff,
	sysAuditLog, sysAuditShow, sysAuditHead, sysAuditVerify, sysAuditExport, sysEvents,
	sysPolicyShow, sysPolicySet, sysPolicyCheck, sysPolicyTest,
	sysResources, sysStatus,
	sysRunSpawn, sysRunAttach, sysRunWait, sysRunKill, sysRunStdin, sysRunPs,
	sysExec, sysNetFetch, sysToolRun, sysToolList,
	sysBudgetShow, sysBudgetSet, sysBudgetReset, sysBudgetCheck, sysBudgetCharge,
	sysScheduleAdd, sysScheduleRm, sysScheduleRun, sysScheduleEnable, sysScheduleList,
	sysLLMGate, sysLLMChat,
	sysMCPServers, sysMCPCall, sysMCPResult,
	sysAgentList, sysAgentShow, sysAgentRemove,
	sysAgentFork, sysAgentDiff, sysMsgSend, sysMsgList, sysMsgRecv, sysApproveList, sysApproveDecide,
	sysWorkList, sysWorkDiff, sysWorkView, sysWorkApply, sysWorkDiscard, sysRunReceipt,
	sysFleetStatus, sysFleetCall, sysFleetWitness, sysVersionPush,
}

// The daemon.

var sysHello = &Def[proto.HelloArgs, proto.Hello]{
	Syscall: Syscall{Op: proto.OpHello, Inline: true, Agent: agentNone},
	Example: `{}`,
	Args:    "proto, client", Result: "the hello", Optional: true,
	Subject: func(*Cred, proto.HelloArgs) call { return call{} },
	Do:      (*Kernel).helloCall,
}

var sysResources = &Def[proto.ResourcesArgs, proto.ResourcesRecord]{
	Syscall: Syscall{Op: proto.OpResources, Fleet: true, Existing: true, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent", Result: "resources record", Optional: true,
	Subject: func(_ *Cred, a proto.ResourcesArgs) call { return named(a.Agent) },
	Do:      (*Kernel).resources,
}

var sysStatus = &Def[struct{}, proto.DaemonRecord]{
	Syscall: Syscall{Op: proto.OpStatus, Fleet: true, Agent: agentNone},
	Example: `{}`,
	Args:    "none", Result: "daemon record", Optional: true,
	Subject: func(*Cred, struct{}) call { return call{} },
	Do: func(k *Kernel, ctx context.Context, c *Cred, _ struct{}, _ []byte) (proto.DaemonRecord, error) {
		return k.status(ctx, c)
	},
}

// State (state.go): served by pkg/serve's fast paths, which build no
// record but the reply.

var sysStateSave = &Def[proto.StateSaveArgs, proto.StateRecord]{
	Syscall: Syscall{Op: proto.OpStateSave, Asks: askWrite, Alone: true, Mutates: true, Key: proto.KeyStored, Event: proto.EventStateChanged, Dirties: agenttree.ChangedKey(state.SpaceState)},
	Example: `{"agent":"ops","key":"k","value":"v"}`, Dry: []string{"k"},
	Args: "agent, key, value, encoding", Result: "state record", Own: true,
	Subject: func(_ *Cred, a proto.StateSaveArgs) call {
		return call{agent: a.Agent, key: a.Key, policy: askWrite, size: savedSize(a.Value, a.Encoding)}
	},
	Do: (*Kernel).stateSave,
}

var sysStateDelete = &Def[proto.StateArgs, proto.StateRecord]{
	Syscall: Syscall{Op: proto.OpStateDelete, Asks: askWrite, Alone: true, Mutates: true, Key: proto.KeyRead, Event: proto.EventStateChanged, Dirties: agenttree.ChangedKey(state.SpaceState)},
	Example: `{"agent":"ops","key":"k"}`, Dry: []string{"k"},
	Args: "agent, key", Result: "state record, deleted", Own: true,
	Subject: func(_ *Cred, a proto.StateArgs) call {
		return call{agent: a.Agent, key: a.Key, policy: askWrite, size: -1}
	},
	Do: (*Kernel).stateDelete,
}

var sysStateLoad = &Def[proto.StateArgs, loaded]{
	Syscall: Syscall{Op: proto.OpStateLoad, Asks: askRead, Key: proto.KeyRead, Inline: true},
	Example: `{"agent":"ops","key":"k"}`, Dry: []string{"k"},
	Args: "agent, key", Result: "state record + value", Own: true,
	Subject: func(_ *Cred, a proto.StateArgs) call { return call{agent: a.Agent, key: a.Key, policy: askRead} },
	Do:      (*Kernel).stateLoad,
}

var sysStateList = &Def[proto.StateListArgs, proto.StateRecord]{
	Syscall: Syscall{Op: proto.OpStateList, Asks: askList, Existing: true, Key: proto.KeyPrefix},
	Example: `{"agent":"ops"}`,
	Args:    "agent, prefix", Result: "state records, streamed", Own: true,
	Subject: func(_ *Cred, a proto.StateListArgs) call { return call{agent: a.Agent, key: a.Prefix, policy: askList} },
	Each:    (*Kernel).stateList,
}

// state.stat is a load without the value: whether a key exists, and its
// size and time, as cheap as the record.
var sysStateStat = &Def[proto.StateArgs, proto.StateRecord]{
	Syscall: Syscall{Op: proto.OpStateStat, Asks: askRead, Key: proto.KeyRead, Inline: true},
	Example: `{"agent":"ops","key":"k"}`, Dry: []string{"k"},
	Args: "agent, key", Result: "state record",
	Subject: func(_ *Cred, a proto.StateArgs) call {
		return call{agent: a.Agent, key: a.Key, policy: askRead}
	},
	Do: func(k *Kernel, _ context.Context, _ *Cred, a proto.StateArgs, _ []byte) (proto.StateRecord, error) {
		k.flights.WaitKey(a.Agent, a.Key)
		rec, err := k.state.Stat(a.Agent, a.Key)
		if err != nil {
			return rec, proto.AsError(err)
		}
		return rec, nil
	},
}

// Memory (memory.go).

var sysMemRemember = &Def[proto.MemRememberArgs, proto.MemRememberResult]{
	Syscall: Syscall{Op: proto.OpMemRemember, Asks: askRemember, Alone: true, Mutates: true, Event: proto.EventMemoryAdded, Dirties: agenttree.ChangedKey(state.SpaceMem)},
	Example: `{"agent":"ops","memories":[{"kind":"episodic","text":"t"}]}`, Dry: []string{"episodic"},
	Args: "agent, memories", Result: "memories: records",
	Subject: func(_ *Cred, a proto.MemRememberArgs) call { return named(a.Agent) },
	Do:      (*Kernel).memRemember,
}

// mem.forget answers with the records it forgot, which pkg/serve
// streams: its result may be long (--before).
var sysMemForget = &Def[proto.MemForgetArgs, []proto.MemoryRecord]{
	Syscall: Syscall{Op: proto.OpMemForget, Asks: askRecall, Existing: true, Mutates: true, Event: proto.EventMemoryForgotten, Dirties: agenttree.ChangedKey(state.SpaceMem)},
	Example: `{"agent":"ops","ids":["x"]}`,
	Args:    "agent, ids, tags, before", Result: "memory records", Own: true,
	Subject: func(_ *Cred, a proto.MemForgetArgs) call { return named(a.Agent) },
	Do:      (*Kernel).memForget,
}

var sysMemRecall = &Def[proto.MemRecallArgs, proto.MemoryRecord]{
	Syscall: Syscall{Op: proto.OpMemRecall, Asks: askRecall, Existing: true},
	Example: `{"agent":"ops","query":"q"}`,
	Args:    "agent, query, k, kind, tags, since, min_score, all_agents", Result: "memory records",
	Subject: func(_ *Cred, a proto.MemRecallArgs) call {
		if a.AllAgents {
			return call{every: true}
		}
		return named(a.Agent)
	},
	Each: (*Kernel).memRecall,
}

var sysMemList = &Def[proto.MemListArgs, proto.MemoryRecord]{
	Syscall: Syscall{Op: proto.OpMemList, Asks: askRecall, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent, kind, tags, since", Result: "memory records",
	Subject: func(_ *Cred, a proto.MemListArgs) call { return named(a.Agent) },
	Each:    (*Kernel).memList,
}

// Versions (version.go): of one agent, or of every agent ("": the
// admin's).

func versioned(agent string) call { return call{agent: agent, every: agent == ""} }

var sysCommit = &Def[proto.CommitArgs, proto.CommitRecord]{
	Syscall: Syscall{Op: proto.OpCommit, Mutates: true, Event: proto.EventCommit},
	Example: `{"agent":"ops"}`,
	Args:    "agent, message, tag", Result: "commit record", Optional: true,
	Subject: func(_ *Cred, a proto.CommitArgs) call {
		if a.Tag != "" {
			// Tags name commits of the whole repository: the admin's.
			return call{agent: a.Agent, every: true}
		}
		return versioned(a.Agent)
	},
	Do: (*Kernel).commitCall,
}

var sysCommitTag = &Def[proto.CommitTagArgs, proto.CommitRecord]{
	Syscall: Syscall{Op: proto.OpCommitTag, Mutates: true, Event: proto.EventTag},
	Example: `{"name":"t1"}`,
	Args:    "name, rev", Result: "commit record",
	Subject: func(*Cred, proto.CommitTagArgs) call { return versioned("") },
	Do:      (*Kernel).commitTag,
}

var sysCommitRestore = &Def[proto.CommitRestoreArgs, proto.CommitRecord]{
	Syscall: Syscall{Op: proto.OpCommitRestore, Mutates: true},
	Example: `{"agent":"ops","rev":"HEAD"}`,
	Args:    "agent, rev", Result: "commit record",
	// One agent, named: a restore of every agent is no call.
	Subject: func(_ *Cred, a proto.CommitRestoreArgs) call { return named(a.Agent) },
	Do:      (*Kernel).commitRestore,
}

var sysCommitLog = &Def[proto.CommitLogArgs, proto.CommitRecord]{
	Syscall: Syscall{Op: proto.OpCommitLog},
	Example: `{"agent":"ops"}`,
	Args:    "agent, rev, n", Result: "commit records, streamed", Optional: true,
	Subject: func(_ *Cred, a proto.CommitLogArgs) call { return versioned(a.Agent) },
	Each:    (*Kernel).commitLog,
}

var sysCommitShow = &Def[proto.CommitShowArgs, proto.CommitRecord]{
	Syscall: Syscall{Op: proto.OpCommitShow},
	Example: `{"agent":"ops","rev":"HEAD"}`,
	Args:    "rev, agent", Result: "commit record",
	Subject: func(_ *Cred, a proto.CommitShowArgs) call { return versioned(a.Agent) },
	Do:      (*Kernel).commitShow,
}

var sysCommitDiff = &Def[proto.CommitDiffArgs, proto.DiffRecord]{
	Syscall: Syscall{Op: proto.OpCommitDiff},
	Example: `{"agent":"ops"}`,
	Args:    "agent, from, to, patch", Result: "diff records, streamed",
	Subject: func(_ *Cred, a proto.CommitDiffArgs) call { return versioned(a.Agent) },
	Each:    (*Kernel).commitDiff,
}

var sysVersionPush = &Def[proto.PushArgs, proto.PushRecord]{
	Syscall: Syscall{Op: proto.OpVersionPush, Admin: true, Mutates: true, Agent: agentNone},
	Example: `{"remote":"origin"}`,
	Args:    "remote", Result: "push record (admin)",
	Subject: func(_ *Cred, a proto.PushArgs) call { return call{target: "remote:" + a.Remote} },
	Do:      (*Kernel).versionPush,
}

// The audit log (audit.go) and the events (events.go). A stream of
// raw lines, or of records of several kinds, takes its own callbacks
// (auditStream, eventStream).

var sysAuditLog = &Def[auditStream, struct{}]{
	Syscall: Syscall{Op: proto.OpAuditLog, Fleet: true, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent, op, since_seq, since_time, n, follow, only_new", Result: "audit records, streamed", Own: true,
	Subject: func(_ *Cred, a auditStream) call { return named(a.Agent) },
	Do:      (*Kernel).auditLog,
}

var sysAuditShow = &Def[proto.AuditShowArgs, json.RawMessage]{
	Syscall: Syscall{Op: proto.OpAuditShow, Agent: agentNone},
	Example: `{"seq":1}`,
	Args:    "seq", Result: "audit record", Own: true,
	Subject: func(*Cred, proto.AuditShowArgs) call { return call{target: "audit"} },
	Do:      (*Kernel).auditShow,
}

var sysAuditHead = &Def[struct{}, proto.AuditHead]{
	Syscall: Syscall{Op: proto.OpAuditHead, Fleet: true, Admin: true, Agent: agentNone},
	Example: `{}`,
	Args:    "none", Result: "audit_head record", Optional: true,
	Subject: onAudit,
	Do: func(k *Kernel, _ context.Context, _ *Cred, _ struct{}, _ []byte) (proto.AuditHead, error) {
		return k.audit.SyncedHead()
	},
}

var sysAuditVerify = &Def[struct{}, proto.AuditVerify]{
	Syscall: Syscall{Op: proto.OpAuditVerify, Fleet: true, Admin: true, Agent: agentNone},
	Example: `{}`,
	Args:    "none", Result: "audit_verify record", Optional: true,
	Subject: onAudit,
	Do: func(k *Kernel, _ context.Context, _ *Cred, _ struct{}, _ []byte) (proto.AuditVerify, error) {
		return k.audit.VerifySynced("oxiosd")
	},
}

var sysAuditExport = &Def[auditStream, struct{}]{
	Syscall: Syscall{Op: proto.OpAuditExport, Admin: true, Agent: agentNone},
	Example: `{}`,
	Args:    "none", Result: "audit records, then audit_head, streamed", Own: true,
	Subject: func(*Cred, auditStream) call { return call{target: "audit"} },
	Do:      (*Kernel).auditExport,
}

var sysEvents = &Def[eventStream, struct{}]{
	Syscall: Syscall{Op: proto.OpEvents, Fleet: true, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent, types, since_seq", Result: "event and lost records, streamed", Own: true,
	Subject: func(_ *Cred, a eventStream) call { return named(a.Agent) },
	Do:      (*Kernel).events,
}

// Policies (policy.go, policytest.go).

var sysPolicyShow = &Def[proto.AgentArgs, proto.PolicyRecord]{
	Syscall: Syscall{Op: proto.OpPolicyShow, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "policy record",
	Subject: onAgent,
	Do:      (*Kernel).policyShow,
}

var sysPolicySet = &Def[proto.PolicySetArgs, proto.PolicyRecord]{
	Syscall: Syscall{Op: proto.OpPolicySet, Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysPolicy)},
	Example: `{"agent":"ops","text":""}`,
	Args:    "agent, text", Result: "policy record",
	Subject: func(_ *Cred, a proto.PolicySetArgs) call {
		return call{agent: a.Agent, target: a.Agent + ":" + sysPolicy}
	},
	Do: (*Kernel).policySet,
}

var sysPolicyCheck = &Def[proto.PolicyCheckArgs, proto.PolicyCheckRecord]{
	Syscall: Syscall{Op: proto.OpPolicyCheck, Existing: true},
	Example: `{"agent":"ops","op":"state.load","args":["k"]}`,
	Args:    "agent, op, args, policy", Result: "policy_check record",
	Subject: func(_ *Cred, a proto.PolicyCheckArgs) call { return named(a.Agent) },
	Do:      (*Kernel).policyCheck,
}

var sysPolicyTest = &Def[policyTesting, proto.PolicyTestResult]{
	Syscall: Syscall{Op: proto.OpPolicyTest, Existing: true},
	Example: `{"agent":"ops","policy":"","entries":[]}`,
	Args:    "agent, policy, entries", Result: "policy_test records", Own: true,
	Subject: func(_ *Cred, a policyTesting) call { return named(a.Agent) },
	Do:      (*Kernel).policyTest,
}

// Runs (run.go, admit.go): a call that names a run is gated on the
// run's agent, found first.

const gatesRun = "the agent is the named run's, looked up first (lookup, run)"

var sysRunSpawn = &Def[proto.SpawnArgs, proto.RunRecord]{
	Syscall: Syscall{Op: proto.OpRunSpawn, Asks: askWork, Fleet: true, Mutates: true, Event: proto.EventRunStarted},
	Example: `{"agent":"ops","command":["true"]}`,
	Args:    "agent, command or task, model, input, env, attach, priority, llm, work, open_stdin", Result: "run record (attached: its records)", Own: true,
	Gates: "the work folder is resolved once, before the gate, which checks what the run then gets (spawn)",
	Do:    (*Kernel).runSpawn,
}

var sysRunAttach = &Def[attaching, struct{}]{
	Syscall: Syscall{Op: proto.OpRunAttach, Fleet: true},
	Example: `{"run":"$RUN"}`,
	Args:    "run", Result: "its records, streamed", Own: true,
	Gates: gatesRun,
	Do:    (*Kernel).runAttach,
}

var sysRunWait = &Def[proto.RunsArgs, proto.ExitRecord]{
	Syscall: Syscall{Op: proto.OpRunWait, Fleet: true},
	Example: `{"runs":["$RUN"]}`,
	Args:    "runs", Result: "exit records, streamed", Own: true,
	Gates: gatesRun,
	Each:  (*Kernel).runWait,
}

var sysRunKill = &Def[proto.KillArgs, proto.RunRecord]{
	Syscall: Syscall{Op: proto.OpRunKill, Fleet: true, Mutates: true},
	Example: `{"runs":["$RUN"]}`,
	Args:    "runs, signal", Result: "run records, streamed",
	Gates: gatesRun,
	Each:  (*Kernel).runKill,
}

var sysRunStdin = &Def[proto.StdinArgs, proto.RunRecord]{
	Syscall: Syscall{Op: proto.OpRunStdin, Mutates: true},
	Example: `{"run":"$RUN","close":true}`,
	Args:    "run, data, close", Result: "run record",
	Gates: gatesRun,
	Do:    (*Kernel).runStdin,
}

var sysRunPs = &Def[proto.PsArgs, proto.RunRecord]{
	Syscall: Syscall{Op: proto.OpRunPs, Fleet: true, Existing: true, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent, all", Result: "run records, streamed", Optional: true,
	Subject: func(_ *Cred, a proto.PsArgs) call { return named(a.Agent) },
	Each:    (*Kernel).runPs,
}

var sysRunReceipt = &Def[proto.ReceiptArgs, proto.ReceiptLine]{
	Syscall: Syscall{Op: proto.OpRunReceipt, Admin: true},
	Example: `{"run":"$RUN"}`,
	Args:    "run", Result: "receipt_line records, streamed (admin)",
	Gates: gatesRun,
	Each:  (*Kernel).runReceipt,
}

// What a run does as its agent (exec.go, net.go, tool.go, mcp.go): its
// policy's question is asked in Do, with the ask rules and hooks.

var sysExec = &Def[proto.ExecArgs, proto.ExecRecord]{
	Syscall: Syscall{Op: proto.OpExec, Asks: askExec, Existing: true, Mutates: true},
	Example: `{"agent":"ops","argv":["true"]}`, Dry: []string{"--", "true"},
	Args: "agent, argv or command, stdin, timeout, work", Result: "exec record", Refused: "exec",
	Subject: func(_ *Cred, a proto.ExecArgs) call {
		return call{agent: a.Agent, target: runspec.ExecTarget(a.Agent, a.Argv, a.Command, "")}
	},
	Do: (*Kernel).exec,
}

var sysNetFetch = &Def[proto.FetchArgs, proto.FetchRecord]{
	Syscall: Syscall{Op: proto.OpNetFetch, Asks: askHost, Existing: true, Mutates: true},
	Example: `{"agent":"ops","url":"http://127.0.0.1:1/"}`, Dry: []string{"http://127.0.0.1:1/"},
	Args: "agent, url, method, headers, body, timeout", Result: "fetch record", Refused: "fetch",
	Subject: func(_ *Cred, a proto.FetchArgs) call {
		return call{agent: a.Agent, target: netfetch.Target(a.Agent, netfetch.Method(a.Method), a.URL, "")}
	},
	Do: (*Kernel).netFetch,
}

var sysToolRun = &Def[proto.ToolRunArgs, proto.ToolRecord]{
	Syscall: Syscall{Op: proto.OpToolRun, Asks: askTool, Existing: true, Mutates: true},
	Example: `{"agent":"ops","tool":"t"}`, Dry: []string{"t"},
	Args: "agent, tool, args, input, timeout", Result: "tool record", Refused: "tool",
	Subject: func(_ *Cred, a proto.ToolRunArgs) call {
		return call{agent: a.Agent, target: runspec.ToolTarget(a.Agent, a.Tool, "")}
	},
	Do: (*Kernel).toolRun,
}

var sysToolList = &Def[proto.ToolListArgs, proto.ToolInfoRecord]{
	Syscall: Syscall{Op: proto.OpToolList, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "tool_info records",
	Subject: func(_ *Cred, a proto.ToolListArgs) call { return named(a.Agent) },
	Each:    (*Kernel).toolList,
}

var sysMCPServers = &Def[proto.MCPServersArgs, proto.MCPServersResult]{
	Syscall: Syscall{Op: proto.OpMCPServers, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "servers",
	Subject: func(_ *Cred, a proto.MCPServersArgs) call { return named(a.Agent) },
	Do:      (*Kernel).mcpServers,
}

var sysMCPCall = &Def[proto.MCPCallArgs, proto.MCPCallRecord]{
	Syscall: Syscall{Op: proto.OpMCPCall, Asks: askMCP, Existing: true, Mutates: true},
	Example: `{"agent":"ops","server":"s","tool":"t"}`, Dry: []string{"s", "t"},
	Args: "agent, server, tool, arguments", Result: "mcp_call record", Refused: "mcp",
	Subject: func(_ *Cred, a proto.MCPCallArgs) call {
		return call{agent: a.Agent, target: runspec.MCPTarget(a.Agent, a.Server, a.Tool, "")}
	},
	Do: (*Kernel).mcpCall,
}

var sysMCPResult = &Def[proto.MCPResultArgs, struct{}]{
	Syscall: Syscall{Op: proto.OpMCPResult, Existing: true, Mutates: true},
	Example: `{"agent":"ops","server":"s","tool":"t"}`,
	Args:    "agent, server, tool, call, digest, error", Result: "{}",
	Subject: func(_ *Cred, a proto.MCPResultArgs) call {
		return call{agent: a.Agent, target: runspec.MCPTarget(a.Agent, a.Server, a.Tool, "")}
	},
	Do: (*Kernel).mcpResult,
}

// Budgets (budget.go): setting one is the admin's.

var sysBudgetShow = &Def[proto.AgentArgs, proto.BudgetRecord]{
	Syscall: Syscall{Op: proto.OpBudgetShow, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "budget record",
	Subject: onAgent,
	Do:      (*Kernel).budgetShow,
}

var sysBudgetSet = &Def[proto.BudgetSetArgs, proto.BudgetRecord]{
	Syscall: Syscall{Op: proto.OpBudgetSet, Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},
	Example: `{"agent":"ops"}`,
	Args:    "agent, limit, run_limit", Result: "budget record",
	Subject: func(_ *Cred, a proto.BudgetSetArgs) call { return named(a.Agent) },
	Do:      (*Kernel).budgetSet,
}

var sysBudgetReset = &Def[proto.AgentArgs, proto.BudgetRecord]{
	Syscall: Syscall{Op: proto.OpBudgetReset, Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "budget record",
	Subject: onAgent,
	Do:      (*Kernel).budgetReset,
}

var sysBudgetCheck = &Def[proto.BudgetCheckArgs, proto.BudgetRecord]{
	Syscall: Syscall{Op: proto.OpBudgetCheck, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent, tokens", Result: "budget record",
	Subject: func(_ *Cred, a proto.BudgetCheckArgs) call { return named(a.Agent) },
	Do:      (*Kernel).budgetCheck,
}

// budget.charge: a run's calls are charged by llm.chat.
var sysBudgetCharge = &Def[proto.BudgetChargeArgs, proto.BudgetRecord]{
	Syscall: Syscall{Op: proto.OpBudgetCharge, Admin: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},
	Example: `{"agent":"ops","prompt_tokens":1,"completion_tokens":1}`,
	Args:    "agent, model, prompt_tokens, completion_tokens", Result: "budget record",
	Subject: func(_ *Cred, a proto.BudgetChargeArgs) call { return named(a.Agent) },
	Do:      (*Kernel).budgetCharge,
}

// Schedules (schedule.go): a call that names a job is gated on the
// job's agent, found first.

const gatesJob = "the agent is the named job's, looked up first (jobGate)"

var sysScheduleAdd = &Def[proto.ScheduleAddArgs, proto.JobRecord]{
	Syscall: Syscall{Op: proto.OpScheduleAdd, Mutates: true, Dirties: agenttree.ChangedJob},
	Example: `{"agent":"ops","name":"j2","schedule":"@daily","command":["true"]}`,
	Args:    "agent, name, schedule, tz, priority, overlap, catch_up, command or task", Result: "job record",
	Subject: func(_ *Cred, a proto.ScheduleAddArgs) call { return call{agent: a.Agent, key: a.Name} },
	Do:      (*Kernel).scheduleAdd,
}

var sysScheduleRm = &Def[proto.ScheduleArgs, proto.JobRecord]{
	Syscall: Syscall{Op: proto.OpScheduleRm, Mutates: true, Dirties: agenttree.ChangedJob},
	Example: `{"name":"j1"}`,
	Args:    "name, agent", Result: "job record, deleted",
	Gates: gatesJob,
	Do:    (*Kernel).scheduleRm,
}

var sysScheduleRun = &Def[proto.ScheduleArgs, proto.RunRecord]{
	Syscall: Syscall{Op: proto.OpScheduleRun, Mutates: true},
	Example: `{"name":"j1"}`,
	Args:    "name, agent", Result: "run record",
	Gates: gatesJob,
	Do:    (*Kernel).scheduleRun,
}

var sysScheduleEnable = &Def[proto.ScheduleEnableArgs, proto.JobRecord]{
	Syscall: Syscall{Op: proto.OpScheduleEnable, Mutates: true, Dirties: agenttree.ChangedJob},
	Example: `{"name":"j1","disable":true}`,
	Args:    "name, agent, disable", Result: "job record",
	Gates: gatesJob,
	Do:    (*Kernel).scheduleEnable,
}

var sysScheduleList = &Def[proto.ScheduleListArgs, proto.JobRecord]{
	Syscall: Syscall{Op: proto.OpScheduleList, Existing: true, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent", Result: "job records, streamed", Optional: true,
	Subject: func(_ *Cred, a proto.ScheduleListArgs) call { return named(a.Agent) },
	Each:    (*Kernel).scheduleList,
}

// Model calls (llmhealth.go, llmchat.go).

var sysLLMGate = &Def[proto.LLMGateArgs, proto.LLMGateRecord]{
	Syscall: Syscall{Op: proto.OpLLMGate, Existing: true},
	Example: `{"agent":"ops","endpoint":"http://127.0.0.1:1/"}`,
	Args:    "agent, endpoint, outcome", Result: "llm_gate record",
	Subject: func(_ *Cred, a proto.LLMGateArgs) call { return named(a.Agent) },
	Do:      (*Kernel).llmGate,
}

var sysLLMChat = &Def[chatting, proto.LLMTurnRecord]{
	Syscall: Syscall{Op: proto.OpLLMChat, Asks: askModel, Existing: true, Mutates: true, Dirties: agenttree.ChangedFile(sysBudget)},
	Example: `{"agent":"ops","model":"m1","messages":[{"role":"user","content":"hi"}]}`, Dry: []string{"m1"},
	Args: "agent, model, messages, tools, max_tokens, temperature, stream, wait", Result: "llm_delta, endpoint and llm_error records, streamed; llm_turn record", Own: true,
	Subject: func(_ *Cred, a chatting) call { return named(a.Agent) },
	Do:      (*Kernel).llmChat,
}

// Agents (agents.go, fork.go).

var sysAgentList = &Def[struct{}, proto.AgentRecord]{
	Syscall: Syscall{Op: proto.OpAgentList, Agent: agentNone},
	Example: `{}`,
	Args:    "", Result: "agent records, streamed", Optional: true,
	Subject: func(*Cred, struct{}) call { return call{} },
	Each:    (*Kernel).agentList,
}

var sysAgentShow = &Def[proto.AgentArgs, proto.AgentRecord]{
	Syscall: Syscall{Op: proto.OpAgentShow, Existing: true},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "agent record",
	Subject: onAgent,
	Do:      (*Kernel).agentShow,
}

var sysAgentRemove = &Def[proto.AgentArgs, proto.AgentRecord]{
	Syscall: Syscall{Op: proto.OpAgentRemove, Admin: true, Existing: true, Mutates: true, Event: proto.EventAgentRemoved, Dirties: agenttree.RemovedFile},
	Example: `{"agent":"ops"}`,
	Args:    "agent", Result: "agent record, removed (admin; EBUSY while it has live runs)",
	Subject: onAgent,
	Do:      (*Kernel).agentRemove,
}

// A fork marks nothing on replay: forkReplayed has the next commit
// compare everything, as its paths are not in entries.
var sysAgentFork = &Def[proto.ForkArgs, proto.ForkRecord]{
	Syscall: Syscall{Op: proto.OpAgentFork, Names: true, Mutates: true, Event: proto.EventAgentForked},
	Example: `{"agent":"ops","name":"ops2"}`, Dry: []string{"ops2"},
	Args: "agent, name, rev", Result: "fork record",
	Gates: "two agents, the forked and the new one, each gated",
	Do:    (*Kernel).fork,
}

var sysAgentDiff = &Def[proto.AgentDiffArgs, proto.DiffRecord]{
	Syscall: Syscall{Op: proto.OpAgentDiff},
	Example: `{"agent":"ops"}`,
	Args:    "agent, other, patch", Result: "diffs, streamed",
	Gates: "two agents, the diffed and the other, each gated",
	Each:  (*Kernel).agentDiff,
}

// Messages and approvals (msg.go, approve.go).

func inboxOf(agent string) call { return call{agent: agent, target: agent + ":inbox"} }

var sysMsgSend = &Def[proto.MsgSendArgs, proto.MsgRecord]{
	Syscall: Syscall{Op: proto.OpMsgSend, Asks: askSend, Mutates: true, Event: proto.EventMsgSent},
	Example: `{"to":"ops","from":"ops","text":"hi"}`, Dry: []string{"ops"},
	Args: "to, from, text, reply_to, records", Result: "msg record",
	Gates: "the agent is the sender, found from the caller first (msgCheck, which the mount asks too)",
	Do:    (*Kernel).msgSend,
}

var sysMsgList = &Def[proto.MsgListArgs, proto.MsgRecord]{
	Syscall: Syscall{Op: proto.OpMsgList},
	Example: `{"agent":"ops"}`,
	Args:    "agent, after, unread, max", Result: "msg records",
	Subject: func(_ *Cred, a proto.MsgListArgs) call { return inboxOf(a.Agent) },
	Each:    (*Kernel).msgList,
}

var sysMsgRecv = &Def[proto.MsgListArgs, proto.MsgRecord]{
	Syscall: Syscall{Op: proto.OpMsgRecv},
	Example: `{"agent":"ops"}`,
	Args:    "agent, after, follow, max, peek, wait", Result: "msg records, marked read", Own: true,
	Subject: func(_ *Cred, a proto.MsgListArgs) call { return inboxOf(a.Agent) },
	Each:    (*Kernel).msgRecv,
}

var sysApproveList = &Def[proto.ApproveListArgs, proto.ApprovalRecord]{
	Syscall: Syscall{Op: proto.OpApproveList, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent, all, follow", Result: "approvals, streamed", Own: true,
	Subject: func(_ *Cred, a proto.ApproveListArgs) call { return named(a.Agent) },
	Each:    (*Kernel).approveList,
}

var sysApproveDecide = &Def[proto.ApproveDecideArgs, proto.ApprovalRecord]{
	Syscall: Syscall{Op: proto.OpApproveDecide, Operator: true, Mutates: true, Event: proto.EventApprovalDecided},
	Example: `{"id":"$APPROVAL","approve":true}`,
	Args:    "id, approve, reason", Result: "approval",
	Gates: "the agent is the named request's, looked up first; a run is refused before any is",
	Do:    (*Kernel).approveDecide,
}

// Runs' work on host folders (work.go): an operator's to apply.

const gatesWork = "the agent is the named run's work's, looked up first (workOf)"

var sysWorkList = &Def[proto.WorkArgs, proto.WorkRecord]{
	Syscall: Syscall{Op: proto.OpWorkList, Agent: agentFilter},
	Example: `{}`,
	Args:    "agent", Result: "work records, streamed", Optional: true,
	Subject: func(_ *Cred, a proto.WorkArgs) call { return named(a.Agent) },
	Each:    (*Kernel).workList,
}

var sysWorkDiff = &Def[proto.WorkArgs, proto.WorkRecord]{
	Syscall: Syscall{Op: proto.OpWorkDiff},
	Example: `{"run":"$RUN"}`,
	Args:    "run, stat", Result: "work record with its patch (or diffstat)",
	Gates: gatesWork,
	Do:    (*Kernel).workDiff,
}

var sysWorkView = &Def[proto.WorkArgs, proto.WorkView]{
	Syscall: Syscall{Op: proto.OpWorkView},
	Example: `{"run":"$RUN"}`,
	Args:    "run, path", Result: "work_view record: a folder's entries or a file's data",
	Gates: gatesWork,
	Do:    (*Kernel).workView,
}

var sysWorkApply = &Def[proto.WorkArgs, proto.WorkRecord]{
	Syscall: Syscall{Op: proto.OpWorkApply, Operator: true, Mutates: true},
	Example: `{"run":"$RUN"}`,
	Args:    "run, force", Result: "work record",
	Gates: gatesWork,
	Do:    (*Kernel).workApply,
}

var sysWorkDiscard = &Def[proto.WorkArgs, proto.WorkRecord]{
	Syscall: Syscall{Op: proto.OpWorkDiscard, Operator: true, Mutates: true},
	Example: `{"run":"$RUN"}`,
	Args:    "run", Result: "work record",
	Gates: gatesWork,
	Do:    (*Kernel).workDiscard,
}

// The fleet (fleet.go, pkg/fleet): the called node audits what it does.

var sysFleetStatus = &Def[struct{}, proto.NodeRecord]{
	Syscall: Syscall{Op: proto.OpFleetStatus, Agent: agentNone},
	Example: `{}`,
	Args:    "none", Result: "node records, streamed", Optional: true,
	Subject: func(*Cred, struct{}) call { return call{target: "fleet"} },
	Each:    (*Kernel).fleetStatus,
}

var sysFleetCall = &Def[fleetCalling, json.RawMessage]{
	Syscall: Syscall{Op: proto.OpFleetCall, Agent: agentNone},
	Example: `{"op":"state.load","args":{"agent":"ops","key":"k"}}`,
	Args:    "node, op, args", Result: "the op's records, with node", Own: true,
	Subject: func(_ *Cred, a fleetCalling) call { return call{target: "fleet:" + a.Op} },
	Do:      (*Kernel).fleetCall,
}

var sysFleetWitness = &Def[struct{}, proto.WitnessRecord]{
	Syscall: Syscall{Op: proto.OpFleetWitness, Admin: true, Agent: agentNone},
	Example: `{}`,
	Args:    "none", Result: "witness records (admin)", Optional: true,
	Subject: func(*Cred, struct{}) call { return call{target: "fleet"} },
	Each:    (*Kernel).fleetWitness,
}
