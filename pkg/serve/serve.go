// Package serve adapts the wire to the kernel: for each syscall a front
// end may call, it decodes the request's args, calls the kernel's method
// (which runs the call through the one gate: identity, validation,
// policy, the call, audit, events) and encodes its result or streams its
// records. The socket server (pkg/server) and the fleet (pkg/fleet, a
// call a peer carried here) serve through it, so both serve the same ops
// the same way. Which ops exist, and what each is, stays the kernel's
// (kernel.Lookup); the handlers here cover exactly the ops the kernel
// does not record itself (TestHandlersCoverSyscalls).
package serve

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// Request is one call as a front end received it: its op, its args as
// JSON, and where its stream items go.
type Request struct {
	Op   string
	Args json.RawMessage
	Out  Out
	// Buf, if not nil, is the front end's buffer for the result: it is
	// done with the result before it serves its next call, so a handler
	// may build the result in it (Scratch) instead of allocating.
	Buf []byte
}

// Scratch returns an empty buffer of at least n bytes for the result:
// r.Buf if it is big enough, else a new one, which becomes r.Buf.
func (r *Request) Scratch(n int) []byte {
	if cap(r.Buf) < n {
		r.Buf = make([]byte, 0, n)
	}
	return r.Buf[:0]
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

// Func runs a call for a front end and returns its encoded result (nil
// for a stream, whose items went to r.Out).
type Func func(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error)

// Handler is a syscall a front end may call: its declaration and its
// adapter from the wire.
type Handler struct {
	*kernel.Syscall
	Serve Func
}

// Lookup returns the handler of op; false when no front end may call op.
func Lookup(op string) (Handler, bool) {
	h, ok := served[op]
	return h, ok
}

// served joins the two tables once: the ops a front end may call, each
// with its declaration and its adapter.
var served = func() map[string]Handler {
	m := make(map[string]Handler, len(handlers))
	for op, f := range handlers {
		if sc := kernel.Lookup(op); sc != nil && !sc.Recorded {
			m[op] = Handler{sc, f}
		}
	}
	return m
}()

// Fleet is the kernel as the fleet calls it: a call a peer carried here
// is served as the socket server serves one, the op's own checks, policy
// and audit applying to the caller.
type Fleet struct{ *kernel.Kernel }

// ServeFleet runs op for c, if the fleet may carry it.
func (f Fleet) ServeFleet(ctx context.Context, c *kernel.Cred, op string, args json.RawMessage, out Out) (json.RawMessage, error) {
	h, ok := Lookup(op)
	if !proto.FleetCallable[op] || !ok {
		return nil, proto.Errorf(proto.EINVAL, "fleet.call: op %q does not go to other nodes", op)
	}
	return h.Serve(f.Kernel, ctx, c, &Request{Op: op, Args: args, Out: out})
}

// handlers is the one table of adapters: most syscalls take their args
// and return one record, or stream records (unary, stream); the others
// have a wire shape of their own (handlers.go).
var handlers = map[string]Func{
	proto.OpHello:          unary(true, (*kernel.Kernel).HelloCall),
	proto.OpStateSave:      stateSave,
	proto.OpStateDelete:    stateDelete,
	proto.OpStateLoad:      stateLoad,
	proto.OpStateList:      stateList,
	proto.OpMemRemember:    unary(false, (*kernel.Kernel).MemRemember),
	proto.OpMemForget:      memForget,
	proto.OpMemRecall:      stream(false, (*kernel.Kernel).MemRecall),
	proto.OpMemList:        stream(false, (*kernel.Kernel).MemList),
	proto.OpCommit:         unary(true, (*kernel.Kernel).Commit),
	proto.OpCommitTag:      unary(false, (*kernel.Kernel).CommitTag),
	proto.OpCommitRestore:  unary(false, (*kernel.Kernel).CommitRestore),
	proto.OpCommitLog:      stream(true, (*kernel.Kernel).CommitLog),
	proto.OpCommitShow:     unary(false, (*kernel.Kernel).CommitShow),
	proto.OpCommitDiff:     stream(false, (*kernel.Kernel).CommitDiff),
	proto.OpAuditLog:       auditLog,
	proto.OpAuditShow:      auditShow,
	proto.OpAuditHead:      auditHead,
	proto.OpAuditVerify:    auditVerify,
	proto.OpAuditExport:    auditExport,
	proto.OpEvents:         events,
	proto.OpPolicyShow:     ofAgent((*kernel.Kernel).PolicyShow),
	proto.OpPolicySet:      unary(false, (*kernel.Kernel).PolicySet),
	proto.OpPolicyCheck:    unary(false, (*kernel.Kernel).PolicyCheck),
	proto.OpPolicyTest:     policyTest,
	proto.OpResources:      unary(true, (*kernel.Kernel).Resources),
	proto.OpStatus:         status,
	proto.OpRunSpawn:       runSpawn,
	proto.OpRunAttach:      runAttach,
	proto.OpRunWait:        runWait,
	proto.OpRunKill:        stream(false, (*kernel.Kernel).RunKill),
	proto.OpRunStdin:       unary(false, (*kernel.Kernel).RunStdin),
	proto.OpRunPs:          stream(true, (*kernel.Kernel).RunPs),
	proto.OpExec:           refusedUnary("exec", (*kernel.Kernel).Exec),
	proto.OpNetFetch:       refusedUnary("fetch", (*kernel.Kernel).NetFetch),
	proto.OpToolRun:        refusedUnary("tool", (*kernel.Kernel).ToolRun),
	proto.OpToolList:       stream(false, (*kernel.Kernel).ToolList),
	proto.OpBudgetShow:     ofAgent((*kernel.Kernel).BudgetShow),
	proto.OpBudgetSet:      unary(false, (*kernel.Kernel).BudgetSet),
	proto.OpBudgetReset:    ofAgent((*kernel.Kernel).BudgetReset),
	proto.OpBudgetCheck:    unary(false, (*kernel.Kernel).BudgetCheck),
	proto.OpBudgetCharge:   unary(false, (*kernel.Kernel).BudgetCharge),
	proto.OpScheduleAdd:    unary(false, (*kernel.Kernel).ScheduleAdd),
	proto.OpScheduleRm:     unary(false, (*kernel.Kernel).ScheduleRm),
	proto.OpScheduleRun:    unary(false, (*kernel.Kernel).ScheduleRun),
	proto.OpScheduleEnable: unary(false, (*kernel.Kernel).ScheduleEnable),
	proto.OpScheduleList:   stream(true, (*kernel.Kernel).ScheduleList),
	proto.OpLLMGate:        unary(false, (*kernel.Kernel).LLMGate),
	proto.OpLLMChat:        llmChat,
	proto.OpMCPServers:     mcpServers,
	proto.OpMCPCall:        refusedUnary("mcp", (*kernel.Kernel).MCPCall),
	proto.OpMCPResult:      mcpResult,
	proto.OpAgentList:      agentList,
	proto.OpAgentShow:      ofAgent((*kernel.Kernel).AgentShow),
	proto.OpAgentRemove:    ofAgent((*kernel.Kernel).AgentRemove),
	proto.OpAgentFork:      unary(false, (*kernel.Kernel).Fork),
	proto.OpAgentDiff:      stream(false, (*kernel.Kernel).AgentDiff),
	proto.OpMsgSend:        unary(false, (*kernel.Kernel).MsgSend),
	proto.OpMsgList:        stream(false, (*kernel.Kernel).MsgList),
	proto.OpMsgRecv:        msgRecv,
	proto.OpApproveList:    approveList,
	proto.OpApproveDecide:  unary(false, (*kernel.Kernel).ApproveDecide),
	proto.OpFleetStatus:    stream(true, (*kernel.Kernel).FleetStatus),
	proto.OpFleetCall:      fleetCall,
	proto.OpFleetWitness:   stream(true, (*kernel.Kernel).FleetWitness),
	proto.OpVersionPush:    unary(false, (*kernel.Kernel).VersionPush),
	proto.OpWorkList:       stream(true, (*kernel.Kernel).WorkList),
	proto.OpWorkDiff:       unary(false, (*kernel.Kernel).WorkDiff),
	proto.OpWorkView:       unary(false, (*kernel.Kernel).WorkView),
	proto.OpWorkApply:      unary(false, (*kernel.Kernel).WorkApply),
	proto.OpWorkDiscard:    unary(false, (*kernel.Kernel).WorkDiscard),
	proto.OpRunReceipt:     stream(false, (*kernel.Kernel).RunReceipt),
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

func unary[A, R any](optional bool, m func(*kernel.Kernel, context.Context, *kernel.Cred, A, []byte) (R, error)) Func {
	return func(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
		a, err := decode[A](optional, r)
		if err != nil {
			return nil, err
		}
		rec, err := m(k, ctx, c, a, r.Args)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(&rec)
	}
}

// refusedUnary is unary for an op that acts for an agent (exec, a tool, a
// fetch): args that do not decode, an exec that brings an "env" say, are
// an attempt the log must show, not only a malformed line.
func refusedUnary[A, R any](what string, m func(*kernel.Kernel, context.Context, *kernel.Cred, A, []byte) (R, error)) Func {
	call := unary(false, m)
	return func(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
		if _, err := decode[A](false, r); err != nil {
			var who struct {
				Agent string `json:"agent"`
			}
			json.Unmarshal(r.Args, &who)
			k.Refused(c, r.Op, fmt.Sprintf("%.64s:%s [args]", who.Agent, what), r.Args, proto.Result(err))
			return nil, err
		}
		return call(k, ctx, c, r)
	}
}

// ofAgent is unary for a syscall whose only arg is the agent.
func ofAgent[R any](m func(*kernel.Kernel, context.Context, *kernel.Cred, string, []byte) (R, error)) Func {
	return func(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
		a, err := decode[proto.AgentArgs](false, r)
		if err != nil {
			return nil, err
		}
		rec, err := m(k, ctx, c, a.Agent, r.Args)
		if err != nil {
			return nil, err
		}
		return proto.Marshal(&rec)
	}
}

func stream[A, R any](optional bool, m func(*kernel.Kernel, context.Context, *kernel.Cred, A, []byte, func(*R) error) error) Func {
	return func(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
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
		b, err := proto.Marshal(rec)
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
