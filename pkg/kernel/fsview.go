package kernel

import (
	"context"
	"os"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// The syscalls of the mount (package fs). They are the state syscalls in
// the shape a file system needs, through the same gate and so the same
// checks as over the socket: a save can be queued without waiting
// (close(2) hands a file over, fsync(2) waits for it), a read can get the
// key's file rather than a copy of its value, and lookups ask whether an
// agent is there without writing a denial to the audit log on every path
// walk.

// AgentVisible reports whether agent has state or memories and c may act
// on it.
// Nothing is audited: the mount asks on every lookup of /agent/NAME, and
// the read or write that follows is audited by its own syscall.
func (k *Kernel) AgentVisible(c *Cred, agent string) bool {
	return c.Authorize(agent) == nil &&
		(k.state.HasAgent(agent) || k.state.HasAgent(state.Ref(state.SpaceMem, agent)))
}

// MayAct reports why c may not act on agent, or nil, without auditing:
// the mount checks before it makes a file or folder that exists only in
// the mount until a save (which is audited) commits it.
func (k *Kernel) MayAct(c *Cred, agent string) error {
	if err := c.Authorize(agent); err != nil {
		return err
	}
	return nil
}

// MayWrite reports, for the mount, whether c may save key of agent: the
// checks of state.save, run when a file is created or opened for writing,
// so that the refusal comes at open(2), not at a later close. A refusal is
// audited like the save's would be.
func (k *Kernel) MayWrite(c *Cred, agent, key string) error {
	if err := k.gate(writeCall(c, proto.OpStateSave, agent, key, 0, nil)); err != nil {
		return err
	}
	return nil
}

// Pending is a queued change.
type Pending struct {
	t   *tx
	err error // refused before it was queued
}

// Wait blocks until the change is durable (or failed) and returns the
// key's record.
func (p Pending) Wait() (proto.StateRecord, error) {
	if p.t == nil {
		return proto.StateRecord{}, p.err
	}
	<-p.t.done
	if p.t.err != nil {
		return proto.StateRecord{}, p.t.err
	}
	return p.t.change.Record, nil
}

// Done is closed once the change is durable (the store shows it) or
// failed (it never will).
func (p Pending) Done() <-chan struct{} {
	if p.t == nil {
		return closedChan
	}
	return p.t.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// StateSubmit queues a save of value under agent's key and returns
// without waiting for it. Changes submitted one after another commit in
// that order. The store keeps value as it is: the caller must not change
// it afterwards. The audit entry digests the value itself (the mount has
// no request line). tag becomes the Data of the state.changed event, so
// that the mount can tell its own changes from others'.
func (k *Kernel) StateSubmit(c *Cred, agent, key string, value []byte, tag any) Pending {
	return k.submitChange(c, proto.OpStateSave, &state.Change{Agent: agent, Key: key, Value: value}, value, tag)
}

// FileMeta is what a save from the mount carries besides the value.
type FileMeta struct {
	// Mode is the key's new mode with proto.ModeSet; without, the key
	// keeps its mode.
	Mode uint32
	// Mod and Changed are the value's modification time and the time of
	// the change (mtime and ctime); zero means the commit's time.
	Mod, Changed time.Time
}

// StateSubmitMeta is StateSubmit with the key's metadata. The mount
// stamps a file's times when it is written (and its chmod and touch are
// saves of the same value with a new mode or mtime, audited as
// state.save).
func (k *Kernel) StateSubmitMeta(c *Cred, agent, key string, value []byte, m FileMeta, tag any) Pending {
	return k.submitChange(c, proto.OpStateSave, &state.Change{Agent: agent, Key: key, Value: value, Mode: m.Mode, Mod: m.Mod, Ctime: m.Changed}, value, tag)
}

// StateFolderTime returns when a key was last made or deleted directly in
// agent's folder prefix since the daemon started, for the mount's folder
// times; false if none was. The caller has checked that c may act on
// agent (it is asking for the attributes of a folder it looked up).
func (k *Kernel) StateFolderTime(agent, prefix string) (time.Time, bool) {
	return k.state.FolderTime(agent, prefix)
}

// StateDeleteSubmit queues the deletion of agent's key, like StateSubmit.
func (k *Kernel) StateDeleteSubmit(c *Cred, agent, key string, tag any) Pending {
	return k.submitChange(c, proto.OpStateDelete, &state.Change{Agent: agent, Key: key, Delete: true}, []byte(target(agent, key)), tag)
}

func (k *Kernel) submitChange(c *Cred, op string, ch *state.Change, raw []byte, tag any) Pending {
	failed := func(err error) Pending { return Pending{err: err} }
	size := int64(len(ch.Value))
	if ch.Delete {
		size = -1
	}
	if err := k.gate(writeCall(c, op, ch.Agent, ch.Key, size, raw)); err != nil {
		return failed(err)
	}
	t := &tx{
		change: ch,
		entry:  &audit.Entry{Actor: c.Actor(), Op: op, Target: target(ch.Agent, ch.Key), Args: audit.ArgsDigest(raw)},
		data:   tag,
		done:   make(chan struct{}),
		flight: true,
	}
	// Not waiting here: t.done is closed by the committer all the same.
	// Registered first, so that no read can fall between the queueing
	// and the registration.
	k.flights.Takeoff(t.change.Agent, t.change.Key, t.done)
	if err := k.submit(k.record(), t, false); err != nil {
		k.flights.Land(t.change.Agent, t.change.Key, t.done)
		return failed(err)
	}
	return Pending{t: t}
}

// StateOpen returns a key's current value for reading: an open read-only
// file when the value is in its file, or else the value itself (which the
// caller must not change), with the key's record. Like state.load, a read
// is not audited and a refusal is.
func (k *Kernel) StateOpen(ctx context.Context, c *Cred, agent, key string) (*os.File, []byte, proto.StateRecord, error) {
	if err := sysStateLoad.enter(k, c, proto.StateArgs{Agent: agent, Key: key}, nil); err != nil {
		return nil, nil, proto.StateRecord{}, err
	}
	k.flights.WaitKey(agent, key)
	f, v, rec, err := k.state.Open(agent, key)
	if err != nil {
		return nil, nil, rec, proto.AsError(err)
	}
	return f, v, rec, nil
}
