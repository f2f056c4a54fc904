// Package serve adapts the wire to the kernel: for each syscall a front
// end may call, it decodes the request's args, runs the call through the
// kernel's dispatcher (its definition's gate, then its work: identity,
// validation, policy, the call, audit, events) and encodes its result or
// streams its records. The socket server (pkg/server) and the fleet
// (pkg/fleet, a call a peer carried here) serve through it, so both serve
// the same ops the same way.
//
// Which ops exist, and everything about each, is the kernel's: each is
// one definition (kernel.Def) in pkg/kernel/syscalls.go, whose generic
// Serve decodes JSON args and encodes a result or a stream of records.
// Here are only the adapters of the ops declared Own, whose wire shape
// is their own (handlers.go: the state ops' allocation-free fast paths,
// streams with a reply, calls that follow); TestHandlersCoverSyscalls
// holds the two in step.
package serve

import (
	"context"
	"encoding/json"

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
type Out = kernel.Out

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
// with its declaration and its adapter, its own (handlers) or its
// definition's.
var served = func() map[string]Handler {
	m := make(map[string]Handler)
	for _, sc := range kernel.Syscalls() {
		d := kernel.DefOf(sc.Op)
		if d == nil {
			continue
		}
		f := handlers[sc.Op]
		if f == nil && d.Shape() != "own" {
			f = func(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
				return d.Serve(k, ctx, c, r.Args, r.Out)
			}
		}
		if f != nil {
			m[sc.Op] = Handler{sc, f}
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

// handlers are the adapters of the ops declared Own, each with a wire
// shape of its own (handlers.go).
var handlers = map[string]Func{
	proto.OpStateSave:   stateSave,
	proto.OpStateDelete: stateDelete,
	proto.OpStateLoad:   stateLoad,
	proto.OpStateList:   stateList,
	proto.OpMemForget:   memForget,
	proto.OpAuditLog:    auditLog,
	proto.OpAuditShow:   auditShow,
	proto.OpAuditExport: auditExport,
	proto.OpEvents:      events,
	proto.OpPolicyTest:  policyTest,
	proto.OpRunSpawn:    runSpawn,
	proto.OpRunAttach:   runAttach,
	proto.OpRunWait:     runWait,
	proto.OpLLMChat:     llmChat,
	proto.OpMsgRecv:     msgRecv,
	proto.OpApproveList: approveList,
	proto.OpFleetCall:   fleetCall,
}

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
