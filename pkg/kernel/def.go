package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oxios/oxios/pkg/proto"
)

// Def is one syscall, complete: its declaration (Syscall), how the gate's
// call is found in its args (Subject), its wire docs (Args, Result, as
// oxios(7) lists them), how a front end decodes it (Optional, Refused,
// Own) and its work (Do, or Each for an op that streams records). A is
// what the op takes (its args, and the callbacks of a stream of its
// own), R what it answers (or each record it streams).
//
// A call runs through Call (or Stream): the gate, on the call Subject
// finds, then Do. The kernel's exported method of the op is a one-line
// call of its Def, so a front end that serves the wire (pkg/serve, via
// Serve), one in the daemon's process (the mount: fs, pkg/vfs) and the
// kernel itself reach the op the same way, and Do never gates.
type Def[A, R any] struct {
	Syscall
	// Args and Result are the op's row in the tables of ops of oxios(7)
	// (TestManOpTable holds them equal): its args on the wire, and what
	// it answers.
	Args, Result string
	// Example is args of a call of the op, and Dry the words ox-policy
	// check takes for it (those of its policy question). The guard
	// tests (pkg/serve) make each call, as every kind of caller, on a
	// fixture: an agent ops with a key k, a job j1, a run $RUN with its
	// work and an approval $APPROVAL pending.
	Example string
	Dry     []string
	// Subject is the call as the gate sees it (the agent, the key,
	// the audit target, the policy question and a write's size), found
	// in the args; the op, the caller and the raw args are the Def's
	// own. Nil for an op whose gating is irregular, which Do gates
	// itself (Gates says why).
	Subject func(c *Cred, a A) call
	Gates   string
	// Optional: the op's args may be absent.
	Optional bool
	// Refused, for an op that acts as an agent (exec, a fetch, a tool):
	// args that do not decode are an attempt the audit log must show
	// (as AGENT:Refused [args]), not only a malformed line.
	Refused string
	// Own: pkg/serve adapts the op from the wire by hand (a fast path,
	// a stream with a reply, a call that follows); else Serve does.
	Own bool
	// Do is the op's work, the gate passed; Each that of an op that
	// streams records, sending each to emit.
	Do   func(k *Kernel, ctx context.Context, c *Cred, a A, raw []byte) (R, error)
	Each func(k *Kernel, ctx context.Context, c *Cred, a A, raw []byte, emit func(*R) error) error
}

// Op is a Def whatever its types: what the table and the front ends
// hold.
type Op interface {
	// Decl is the op's declaration.
	Decl() *Syscall
	// Serve decodes args, runs the call (the gate, then its work) and
	// returns its encoded result, or sends the records it streams to
	// out. An op declared Own is adapted by pkg/serve instead: Serve
	// refuses it.
	Serve(k *Kernel, ctx context.Context, c *Cred, args json.RawMessage, out Out) (json.RawMessage, error)
	// Sample is the op's Example and Dry.
	Sample() (args string, dry []string)
	// gated reports whether the Def runs the gate itself (it has a
	// Subject), else why not.
	gated() (bool, string)
	// docs are the op's row in oxios(7)'s tables of ops.
	docs() (args, result string)
	// probe is the call Subject finds in empty args (tests).
	probe() call
	// works reports whether the Def has its work, unary or streamed.
	works() (do, each bool)
	// Shape is the op's wire shape: unary, stream or own.
	Shape() string
}

// Out is where a served call sends the records it streams.
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

func (d *Def[A, R]) Decl() *Syscall { return &d.Syscall }

func (d *Def[A, R]) gated() (bool, string) { return d.Subject != nil, d.Gates }

func (d *Def[A, R]) docs() (string, string) { return d.Args, d.Result }

func (d *Def[A, R]) Sample() (string, []string) { return d.Example, d.Dry }

func (d *Def[A, R]) works() (bool, bool) { return d.Do != nil, d.Each != nil }

func (d *Def[A, R]) probe() call {
	var a A
	if d.Subject == nil {
		return call{}
	}
	return d.Subject(&Cred{}, a)
}

func (d *Def[A, R]) Shape() string {
	switch {
	case d.Own:
		return "own"
	case d.Each != nil:
		return "stream"
	}
	return "unary"
}

// enter runs the gate on the call of the op by c with a: what the
// dispatcher does before the op's work, and what an in-process caller
// asks (the mount, before reading a file) to be checked as the op
// would be. An op without a Subject gates itself.
func (d *Def[A, R]) enter(k *Kernel, c *Cred, a A, raw []byte) error {
	if d.Subject == nil {
		return nil
	}
	cl := d.Subject(c, a)
	cl.op, cl.sc, cl.c, cl.raw = d.Op, &d.Syscall, c, raw
	if err := k.gateCall(&cl); err != nil {
		return err
	}
	return nil
}

// Call is the dispatcher of a unary op: the gate, then Do.
func (d *Def[A, R]) Call(k *Kernel, ctx context.Context, c *Cred, a A, raw []byte) (R, error) {
	if err := d.enter(k, c, a, raw); err != nil {
		var none R
		return none, err
	}
	return d.Do(k, ctx, c, a, raw)
}

// Stream is the dispatcher of an op that streams: the gate, then Each.
func (d *Def[A, R]) Stream(k *Kernel, ctx context.Context, c *Cred, a A, raw []byte, emit func(*R) error) error {
	if err := d.enter(k, c, a, raw); err != nil {
		return err
	}
	return d.Each(k, ctx, c, a, raw, emit)
}

// Serve is the op from the wire: its args decoded as JSON, its result
// (or each record it streams) encoded.
func (d *Def[A, R]) Serve(k *Kernel, ctx context.Context, c *Cred, args json.RawMessage, out Out) (json.RawMessage, error) {
	if d.Own {
		return nil, proto.Errorf(proto.EINVAL, "%s: served by its own adapter", d.Op)
	}
	var a A
	var perr *proto.Error
	if d.Optional {
		perr = proto.DecodeOptionalArgs(d.Op, args, &a)
	} else {
		perr = proto.DecodeArgs(d.Op, args, &a)
	}
	if perr != nil {
		if d.Refused != "" {
			var who struct {
				Agent string `json:"agent"`
			}
			json.Unmarshal(args, &who)
			k.Refused(c, d.Op, fmt.Sprintf("%.64s:%s [args]", who.Agent, d.Refused), args, proto.Result(perr))
		}
		return nil, perr
	}
	if d.Each != nil {
		return nil, d.Stream(k, ctx, c, a, args, func(rec *R) error {
			b, err := proto.Marshal(rec)
			if err != nil {
				return err
			}
			return out.Item(b)
		})
	}
	rec, err := d.Call(k, ctx, c, a, args)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&rec)
}

// The Subjects most ops share: a call that names its agent, and one on
// the whole audit log.
func named(agent string) call { return call{agent: agent} }

func onAgent(_ *Cred, a proto.AgentArgs) call { return call{agent: a.Agent} }

func onAudit(*Cred, struct{}) call { return call{target: "audit"} }
