package kernel

import (
	"context"
	"encoding/base64"
	"errors"

	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

func target(agent, key string) string { return agent + ":" + key }

// StateSave stores a value under a key of an agent's state. raw is the
// request's args as received, digested into the audit entry.
func (k *Kernel) StateSave(ctx context.Context, c *Cred, a proto.StateSaveArgs, raw []byte) (proto.StateRecord, error) {
	return sysStateSave.Call(k, ctx, c, a, raw)
}

// stateSave is state.save's work. A value that does not decode is
// refused here, after the gate: the caller and the key come first, as
// for any call, and a refusal of them is what the log must show.
func (k *Kernel) stateSave(ctx context.Context, c *Cred, a proto.StateSaveArgs, raw []byte) (proto.StateRecord, error) {
	value, perr := proto.DecodeValue(a.Value, a.Encoding)
	if perr != nil {
		return proto.StateRecord{}, perr
	}
	return k.change(ctx, c, proto.OpStateSave, raw, &state.Change{Agent: a.Agent, Key: a.Key, Value: value})
}

// savedSize is the size of the value a save stores, as the gate counts
// it against the agent's quota, found without decoding it: base64's
// length less its padding. A value that does not decode is refused by
// stateSave.
func savedSize(value, encoding string) int64 {
	if encoding != proto.EncodingBase64 {
		return int64(len(value))
	}
	n := base64.StdEncoding.DecodedLen(len(value))
	for i := len(value) - 1; i >= 0 && i >= len(value)-2 && value[i] == '='; i-- {
		n--
	}
	return int64(max(n, 0))
}

// StateDelete removes a key.
func (k *Kernel) StateDelete(ctx context.Context, c *Cred, a proto.StateArgs, raw []byte) (proto.StateRecord, error) {
	return sysStateDelete.Call(k, ctx, c, a, raw)
}

func (k *Kernel) stateDelete(ctx context.Context, c *Cred, a proto.StateArgs, raw []byte) (proto.StateRecord, error) {
	return k.change(ctx, c, proto.OpStateDelete, raw, &state.Change{Agent: a.Agent, Key: a.Key, Delete: true})
}

// change commits one state change with its audit entry. Conflicts are
// found while staging, so they are audited with their error.
func (k *Kernel) change(ctx context.Context, c *Cred, op string, raw []byte, ch *state.Change) (proto.StateRecord, error) {
	t := &tx{change: ch, entry: &audit.Entry{Actor: c.Actor(), Op: op, Target: target(ch.Agent, ch.Key), Args: audit.ArgsDigest(raw)}}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.StateRecord{}, err
	}
	return ch.Record, nil
}

// StateLoad returns a key's value and record.
func (k *Kernel) StateLoad(ctx context.Context, c *Cred, a proto.StateArgs, raw []byte) ([]byte, proto.StateRecord, error) {
	l, err := sysStateLoad.Call(k, ctx, c, a, raw)
	return l.value, l.rec, err
}

// loaded is what state.load answers: the value and the key's record.
type loaded struct {
	value []byte
	rec   proto.StateRecord
}

func (k *Kernel) stateLoad(ctx context.Context, c *Cred, a proto.StateArgs, raw []byte) (loaded, error) {
	k.flights.Wait(a.Agent)
	v, rec, err := k.state.Load(a.Agent, a.Key)
	if err != nil {
		return loaded{rec: rec}, proto.AsError(err)
	}
	return loaded{v, rec}, nil
}

// StateList calls emit with the record of each key at or below prefix.
func (k *Kernel) StateList(ctx context.Context, c *Cred, a proto.StateListArgs, raw []byte, emit func(*proto.StateRecord) error) error {
	return sysStateList.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) stateList(ctx context.Context, c *Cred, a proto.StateListArgs, raw []byte, emit func(*proto.StateRecord) error) error {
	k.flights.Wait(a.Agent)
	readable := k.readable(c, a.Agent)
	// Streamed as the store reads them: the first record goes out at
	// once, whatever the agent holds.
	err := k.state.Each(a.Agent, a.Prefix, func(rec proto.StateRecord) error {
		if readable != nil && !readable(rec.Key) {
			return nil // a key it may not read, it does not see
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return emit(&rec)
	})
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe
	}
	return err
}

// StateStat returns a key's record without its value.
func (k *Kernel) StateStat(ctx context.Context, c *Cred, agent, key string) (proto.StateRecord, error) {
	// Checked as a load, without the policy's question: a listing
	// shows what the policy lets the caller see (readable).
	if err := k.gate(call{op: proto.OpStateLoad, c: c, agent: agent, key: key}); err != nil {
		return proto.StateRecord{}, err
	}
	if r := k.readable(c, agent); r != nil && !r(key) {
		return proto.StateRecord{}, proto.Errorf(proto.ENOENT, "%s: no key %q", agent, key)
	}
	k.flights.WaitKey(agent, key)
	rec, err := k.state.Stat(agent, key)
	if err != nil {
		return rec, proto.AsError(err)
	}
	return rec, nil
}

// IsStateFolder reports whether prefix is a folder of keys of agent (some
// key lies below it). Unauthorized callers see no folders.
func (k *Kernel) IsStateFolder(c *Cred, agent, prefix string) bool {
	if c.Authorize(agent) != nil || proto.CheckPrefix(prefix) != nil || prefix == "" {
		return false
	}
	k.flights.WaitKey(agent, prefix+"/")
	return k.state.IsFolder(agent, prefix)
}

// Agents lists, sorted, the agents that exist and that c may act on.
func (k *Kernel) Agents(ctx context.Context, c *Cred) []string {
	return agenttree.Listed(k.state, k.state.Agents(), c.Lists(""))
}

// writeCall is the call of a save (or, size < 0, a delete) of key: the
// agent's policy must allow writing it at the size the state would have.
func writeCall(c *Cred, op, agent, key string, size int64, raw []byte) call {
	return call{op: op, c: c, agent: agent, key: key, raw: raw, policy: askWrite, size: size}
}

// readable returns, for a caller bound by agent's policy, which keys it
// may see; nil means all.
func (k *Kernel) readable(c *Cred, agent string) func(string) bool {
	return k.pol.Bound(agent, c.Admin, (*policy.Policy).Readable)
}
