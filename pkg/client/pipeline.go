package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/oxios/oxios/pkg/proto"
)

// Pipeline sends a run of calls together and takes their replies as they
// come: the requests go out in one write, the daemon reads them in one
// read and answers in as few writes, so n calls cost about one round
// trip instead of n, and n saves or deletes share one group commit (one
// fdatasync) instead of taking one each. This is what redis-cli -P and
// HTTP/1.1 pipelining do.
//
// Queue calls (Call, StateLoad, StateSave, StateDelete), Send them, then
// Wait for each Pending, in any order. The daemon may run the calls of
// one run side by side, as it does concurrent callers' (only quick reads
// such as state.load run in order): calls whose order matters, a save
// and a delete of the same key, go in runs of their own, the second sent
// once the first is answered. A Pipeline belongs to one goroutine; the
// Client stays usable by others meanwhile, and after Send the Pipeline
// is empty again for the next run.
type Pipeline struct {
	c   *Client
	rqs []request
	ps  []*Pending
	cls []*call
}

// Pending is one call of a Pipeline.
type Pending struct {
	c   *Client
	op  string
	h   *handArgs // the state ops': how their record is parsed
	cl  *call
	err error // the call was not sent
	// args are the state ops' (h points here): one allocation for both.
	args handArgs
}

// Pipeline returns an empty pipeline on c.
func (c *Client) Pipeline() *Pipeline { return &Pipeline{c: c} }

// Len is the number of calls queued and not sent yet.
func (p *Pipeline) Len() int { return len(p.rqs) }

// Call queues op with args. Args that do not encode fail the call
// alone, when it is waited for.
func (p *Pipeline) Call(op string, args any) *Pending {
	pd := &Pending{c: p.c, op: op, h: handEncoded(args)}
	rq := request{op: op, h: pd.h}
	if pd.h == nil {
		raw, err := encodeArgs(args)
		if err != nil {
			pd.err = fmt.Errorf("%s: encoding args: %w", op, err)
			return pd
		}
		rq.raw = raw
	}
	return p.queue(pd, rq)
}

// StateLoad queues a state.load of key of agent; take its value with
// Pending.Value.
func (p *Pipeline) StateLoad(agent, key string) *Pending {
	return p.state(proto.OpStateLoad, handArgs{agent: agent, key: key})
}

// StateSave queues a state.save of value under key of agent.
func (p *Pipeline) StateSave(agent, key string, value []byte) *Pending {
	v, enc := proto.EncodeValue(value)
	return p.state(proto.OpStateSave, handArgs{agent: agent, key: key, value: v, encoding: enc, save: true})
}

// StateDelete queues a state.delete of key of agent.
func (p *Pipeline) StateDelete(agent, key string) *Pending {
	return p.state(proto.OpStateDelete, handArgs{agent: agent, key: key})
}

func (p *Pipeline) state(op string, h handArgs) *Pending {
	pd := &Pending{c: p.c, op: op, args: h}
	pd.h = &pd.args
	return p.queue(pd, request{op: op, h: pd.h})
}

func (p *Pipeline) queue(pd *Pending, rq request) *Pending {
	p.rqs = append(p.rqs, rq)
	p.ps = append(p.ps, pd)
	return pd
}

// Send sends the queued calls. If they cannot be sent, each of their
// Pendings fails with the same error, which Send returns too.
func (p *Pipeline) Send() error {
	if len(p.rqs) == 0 {
		return nil
	}
	p.cls = slices.Grow(p.cls[:0], len(p.rqs))[:len(p.rqs)]
	err := p.c.send(p.rqs[0].op, p.rqs, p.cls)
	for i, pd := range p.ps {
		pd.cl, pd.err = p.cls[i], err
		p.rqs[i], p.ps[i], p.cls[i] = request{}, nil, nil
	}
	p.rqs, p.ps = p.rqs[:0], p.ps[:0]
	return err
}

// Wait waits for the call's reply and decodes its result into result
// (which may be nil). A refusal by the daemon is returned as a
// *proto.Error. Wait on a call not sent yet fails.
func (pd *Pending) Wait(ctx context.Context, result any) error {
	if r, ok := result.(*proto.StateRecord); ok && pd.h != nil {
		return pd.state(ctx, r)
	}
	rep, err := pd.final(ctx)
	if err != nil {
		return err
	}
	err = finish(&rep, result)
	pd.done()
	return err
}

// State waits for the reply of a state op and returns its record.
func (pd *Pending) State(ctx context.Context) (proto.StateRecord, error) {
	var rec proto.StateRecord
	err := pd.state(ctx, &rec)
	return rec, err
}

// state is Wait for a state op's record, with no boxing of it.
func (pd *Pending) state(ctx context.Context, rec *proto.StateRecord) error {
	rep, err := pd.final(ctx)
	if err != nil {
		return err
	}
	if pd.h != nil {
		err = finishState(&rep, pd.h, rec)
	} else {
		r := new(proto.StateRecord) // boxed for finish: not rec, which stays on its caller's stack
		err = finish(&rep, r)
		*rec = *r
	}
	pd.done()
	return err
}

// done gives back the call once its reply is taken.
func (pd *Pending) done() {
	pd.cl.free()
	pd.cl = nil
}

// Value waits for the reply of a state.load and returns the value and
// its record, as Client.StateLoad does.
func (pd *Pending) Value(ctx context.Context) ([]byte, proto.StateRecord, error) {
	rec, err := pd.State(ctx)
	if err != nil {
		return nil, rec, err
	}
	return stateValue(rec)
}

func (pd *Pending) final(ctx context.Context) (proto.Reply, error) {
	switch {
	case pd.err != nil:
		return proto.Reply{}, pd.err
	case pd.cl == nil:
		return proto.Reply{}, proto.Errorf(proto.EINVAL, "%s: waited for before it was sent, or twice", pd.op)
	}
	return pd.c.final(ctx, pd.cl)
}
