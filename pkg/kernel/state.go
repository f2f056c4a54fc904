package kernel

import (
	"context"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

func target(agent, key string) string { return agent + ":" + key }

// StateSave stores a value under a key of an agent's state. raw is the
// request's args as received, digested into the audit entry.
func (k *Kernel) StateSave(ctx context.Context, c *Cred, a proto.StateSaveArgs, raw []byte) (proto.StateRecord, error) {
	if err := k.authorize(c, a.Agent); err != nil {
		k.auditDenied(c, proto.OpStateSave, target(a.Agent, a.Key), raw, err.Code)
		return proto.StateRecord{}, err
	}
	if err := k.checkKey(c, proto.OpStateSave, a.Agent, a.Key, raw); err != nil {
		return proto.StateRecord{}, err
	}
	value, perr := proto.DecodeValue(a.Value, a.Encoding)
	if perr != nil {
		return proto.StateRecord{}, perr
	}
	if err := k.mayWrite(c, proto.OpStateSave, a.Agent, a.Key, int64(len(value)), raw); err != nil {
		return proto.StateRecord{}, err
	}
	return k.change(ctx, c, proto.OpStateSave, raw, &state.Change{Agent: a.Agent, Key: a.Key, Value: value})
}

// StateDelete removes a key.
func (k *Kernel) StateDelete(ctx context.Context, c *Cred, a proto.StateArgs, raw []byte) (proto.StateRecord, error) {
	if err := k.authorize(c, a.Agent); err != nil {
		k.auditDenied(c, proto.OpStateDelete, target(a.Agent, a.Key), raw, err.Code)
		return proto.StateRecord{}, err
	}
	if err := k.checkKey(c, proto.OpStateDelete, a.Agent, a.Key, raw); err != nil {
		return proto.StateRecord{}, err
	}
	if err := k.mayWrite(c, proto.OpStateDelete, a.Agent, a.Key, -1, raw); err != nil {
		return proto.StateRecord{}, err
	}
	return k.change(ctx, c, proto.OpStateDelete, raw, &state.Change{Agent: a.Agent, Key: a.Key, Delete: true})
}

// change commits one state change with its audit entry. Invalid keys and
// conflicts are found while staging, so they are audited with their error.
func (k *Kernel) change(ctx context.Context, c *Cred, op string, raw []byte, ch *state.Change) (proto.StateRecord, error) {
	// A key git would refuse (".git" and its aliases) could be saved but
	// never committed: refuse it now.
	if !ch.Delete && proto.CheckKey(ch.Key) == nil {
		if err := version.CheckPath(ch.Key); err != nil {
			perr := proto.Errorf(proto.EINVAL, "%s: key %q: %v", ch.Agent, ch.Key, err)
			k.auditDenied(c, op, target(ch.Agent, ch.Key), raw, perr.Code)
			return proto.StateRecord{}, perr
		}
	}
	t := &tx{change: ch, entry: &audit.Entry{Actor: actor(c), Op: op, Target: target(ch.Agent, ch.Key), Args: audit.ArgsDigest(raw)}}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.StateRecord{}, err
	}
	return ch.Record, nil
}

// StateLoad returns a key's value and record.
func (k *Kernel) StateLoad(ctx context.Context, c *Cred, a proto.StateArgs, raw []byte) ([]byte, proto.StateRecord, error) {
	if err := k.authorize(c, a.Agent); err != nil {
		k.auditDenied(c, proto.OpStateLoad, target(a.Agent, a.Key), raw, err.Code)
		return nil, proto.StateRecord{}, err
	}
	if err := k.checkKey(c, proto.OpStateLoad, a.Agent, a.Key, raw); err != nil {
		return nil, proto.StateRecord{}, err
	}
	if err := k.mayRead(c, proto.OpStateLoad, a.Agent, a.Key, raw); err != nil {
		return nil, proto.StateRecord{}, err
	}
	k.flights.wait(a.Agent)
	v, rec, err := k.state.Load(a.Agent, a.Key)
	if err != nil {
		return nil, rec, ioError(err)
	}
	return v, rec, nil
}

// StateList calls emit with the record of each key at or below prefix.
func (k *Kernel) StateList(ctx context.Context, c *Cred, a proto.StateListArgs, raw []byte, emit func(*proto.StateRecord) error) error {
	if err := k.authorize(c, a.Agent); err != nil {
		k.auditDenied(c, proto.OpStateList, target(a.Agent, a.Prefix), raw, err.Code)
		return err
	}
	if err := proto.CheckPrefix(a.Prefix); err != nil {
		k.auditDenied(c, proto.OpStateList, target(a.Agent, strings.ToValidUTF8(a.Prefix, "?")), raw, err.Code)
		return err
	}
	if err := k.permit(c, a.Agent, proto.OpStateList, target(a.Agent, a.Prefix), raw, func(p *policy.Policy) error { return p.CheckStateList() }); err != nil {
		return err
	}
	k.flights.wait(a.Agent)
	recs, err := k.state.List(a.Agent, a.Prefix)
	if err != nil {
		return ioError(err)
	}
	readable := k.readable(c, a.Agent)
	for i := range recs {
		if readable != nil && !readable(recs[i].Key) {
			continue // a key it may not read, it does not see
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := emit(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// StateStat returns a key's record without its value.
func (k *Kernel) StateStat(ctx context.Context, c *Cred, agent, key string) (proto.StateRecord, error) {
	if err := k.authorize(c, agent); err != nil {
		k.auditDenied(c, proto.OpStateLoad, target(agent, key), nil, err.Code)
		return proto.StateRecord{}, err
	}
	if err := proto.CheckKey(key); err != nil {
		return proto.StateRecord{}, err
	}
	if r := k.readable(c, agent); r != nil && !r(key) {
		return proto.StateRecord{}, proto.Errorf(proto.ENOENT, "%s: no key %q", agent, key)
	}
	rec, err := k.state.Stat(agent, key)
	if err != nil {
		return rec, ioError(err)
	}
	return rec, nil
}

// IsStateFolder reports whether prefix is a folder of keys of agent (some
// key lies below it). Unauthorized callers see no folders.
func (k *Kernel) IsStateFolder(c *Cred, agent, prefix string) bool {
	if k.authorize(c, agent) != nil || proto.CheckPrefix(prefix) != nil || prefix == "" {
		return false
	}
	return k.state.IsFolder(agent, prefix)
}

// Agents lists, sorted, the agents that exist and that c may act on.
func (k *Kernel) Agents(ctx context.Context, c *Cred) []string {
	all := k.state.Agents()
	out := all[:0:0]
	for _, a := range all {
		if k.authorize(c, a) == nil && k.AgentExists(a) {
			out = append(out, a)
		}
	}
	return out
}

// checkKey refuses, and audits, a key that is not one: a path out of the
// agent's state ("..", absolute, NUL) is an attack to have on the log,
// whoever the caller and whatever the policy.
func (k *Kernel) checkKey(c *Cred, op, agent, key string, raw []byte) *proto.Error {
	err := proto.CheckKey(key)
	if err != nil {
		k.auditDenied(c, op, target(agent, strings.ToValidUTF8(key, "?")), raw, err.Code)
	}
	return err
}

// mayWrite asks agent's policy whether c may write (or, size < 0, delete)
// key.
func (k *Kernel) mayWrite(c *Cred, op, agent, key string, size int64, raw []byte) *proto.Error {
	return k.permit(c, agent, op, target(agent, key), raw, func(p *policy.Policy) error {
		total, old := k.state.Usage(agent, key)
		if size < 0 {
			size = 0
		}
		return p.CheckStateWrite(key, total-old+size)
	})
}

// mayRead asks agent's policy whether c may read key.
func (k *Kernel) mayRead(c *Cred, op, agent, key string, raw []byte) *proto.Error {
	return k.permit(c, agent, op, target(agent, key), raw, func(p *policy.Policy) error { return p.CheckStateRead(key) })
}

// readable returns, for a caller bound by agent's policy, which keys it
// may see; nil means all.
func (k *Kernel) readable(c *Cred, agent string) func(string) bool {
	if c.Admin {
		return nil
	}
	p, err := k.policyOf(agent)
	if err != nil {
		return func(string) bool { return false }
	}
	if len(p.State.Read) == 1 && p.State.Read[0] == "**" {
		return nil
	}
	return p.CanRead
}
