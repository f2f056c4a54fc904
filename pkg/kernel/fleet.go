package kernel

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// Fleet is what the kernel asks of the fleet it joined (pkg/fleet, issue
// 24): the nodes, a call carried to other nodes, and the audit heads the
// peers witnessed. A daemon alone has none, and its fleet ops answer
// ENOTCONN.
type Fleet interface {
	Nodes(ctx context.Context) ([]proto.NodeRecord, error)
	// Call runs a.Op on a.Node (or every node) with c's identity, sending
	// each record with its node; the result is a unary op's record.
	Call(ctx context.Context, c *Cred, a proto.FleetCallArgs, emit func(rec []byte) error) (json.RawMessage, error)
	// Witness checks the local chain against the heads each peer holds.
	Witness(ctx context.Context, emit func(*proto.WitnessRecord) error) error
	// Charge charges a guest's run to its home node (home.go).
	Charge(ctx context.Context, node string, a proto.HomeCharge) (proto.HomeCharged, error)
	// Name is this node's name in the fleet; Pick the live node with
	// the most room, where a spawn to "any" goes.
	Name() string
	Pick(ctx context.Context) (string, error)
}

// SetFleet joins the kernel to a fleet; called once, before serving. The
// charges this node owes to agents' homes are sent again (home.go).
func (k *Kernel) SetFleet(f Fleet) {
	k.fleet = f
	go k.resendOwed()
}

// FleetStatus lists the nodes of the fleet.
func (k *Kernel) FleetStatus(ctx context.Context, c *Cred, _ struct{}, raw []byte, emit func(*proto.NodeRecord) error) error {
	return sysFleetStatus.Stream(k, ctx, c, struct{}{}, raw, emit)
}

func (k *Kernel) fleetStatus(ctx context.Context, c *Cred, _ struct{}, raw []byte, emit func(*proto.NodeRecord) error) error {
	if k.fleet == nil {
		return proto.NoFleet(proto.OpFleetStatus)
	}
	nodes, err := k.fleet.Nodes(ctx)
	if err != nil {
		return err
	}
	return proto.EmitAll(nodes, emit)
}

// FleetCall carries an op to other nodes, whose kernels check it as their
// own callers' (the identity travels with it: the NATS credentials are
// the boundary of the fleet). Only the ops of proto.FleetCallable travel.
func (k *Kernel) FleetCall(ctx context.Context, c *Cred, a proto.FleetCallArgs, raw []byte, emit func([]byte) error) (json.RawMessage, error) {
	return sysFleetCall.Call(k, ctx, c, fleetCalling{a, emit}, raw)
}

// fleetCalling is what fleet.call takes: its args, and where the
// called op's records go (each already JSON).
type fleetCalling struct {
	proto.FleetCallArgs
	emit func([]byte) error
}

func (k *Kernel) fleetCall(ctx context.Context, c *Cred, fa fleetCalling, raw []byte) (json.RawMessage, error) {
	a, emit := fa.FleetCallArgs, fa.emit
	if err, refused := a.Check(); err != nil {
		if refused {
			k.Refused(c, proto.OpFleetCall, "fleet:"+a.Op, raw, err.Code)
		}
		return nil, err
	}
	if k.fleet == nil {
		return nil, proto.NoFleet(proto.OpFleetCall)
	}
	if a.Op == proto.OpRunSpawn {
		// A spawn placed elsewhere runs under its agent's policy here,
		// its home's, and is charged here (home.go).
		home, herr := k.homeFor(c, a, raw)
		if herr != nil {
			return nil, herr
		}
		if home != nil {
			if a.Node == proto.FleetAny {
				n, err := k.fleet.Pick(ctx)
				if err != nil {
					return nil, err
				}
				a.Node = n
			}
			nodes, err := k.place(ctx, c, a.Node, home, raw)
			if err != nil {
				return nil, err
			}
			cc := *c
			cc.Home = home
			c = &cc
			started := false
			res, err := k.fleet.Call(ctx, c, a, func(rec []byte) error {
				started = true
				return emit(rec)
			})
			if err != nil && !started && ctx.Err() == nil {
				k.unplace(c, nodes, home, err)
			}
			return res, err
		}
	}
	return k.fleet.Call(ctx, c, a, emit)
}

// FleetWitness checks the local audit chain against its heads as the peers
// saw them.
func (k *Kernel) FleetWitness(ctx context.Context, c *Cred, _ struct{}, raw []byte, emit func(*proto.WitnessRecord) error) error {
	return sysFleetWitness.Stream(k, ctx, c, struct{}{}, raw, emit)
}

func (k *Kernel) fleetWitness(ctx context.Context, c *Cred, _ struct{}, raw []byte, emit func(*proto.WitnessRecord) error) error {
	if k.fleet == nil {
		return proto.NoFleet(proto.OpFleetWitness)
	}
	return k.fleet.Witness(ctx, emit)
}

// VersionPush pushes the branch of the versioned tree, with its tags, to
// a git remote (version.Repo.Push). The push is audited, with the remote
// as its target; credentials come from the daemon's environment (an ssh
// agent, ~/.ssh of its user), never from the caller.
func (k *Kernel) VersionPush(ctx context.Context, c *Cred, a proto.PushArgs, raw []byte) (proto.PushRecord, error) {
	return sysVersionPush.Call(k, ctx, c, a, raw)
}

func (k *Kernel) versionPush(ctx context.Context, c *Cred, a proto.PushArgs, raw []byte) (proto.PushRecord, error) {
	// Not at a barrier (a push may take long): its entries go through
	// the queue of the group commit, not the committer's own batches.
	return k.work().Push(ctx, a.Remote, func(op, target, result, event string, data any) (uint64, error) {
		e := &audit.Entry{Actor: c.Actor(), Op: op, Target: target, Args: audit.ArgsDigest(raw), Result: result}
		err := k.note(ctx, e, event, "", "", data)
		return e.Seq, err
	})
}
