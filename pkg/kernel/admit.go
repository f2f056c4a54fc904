package kernel

import (
	"context"
	"os"

	"github.com/oxios/oxios/pkg/admit"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/runq"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Admission: the runs waiting for a slot, and the audit entries of
// their queueing, start and end, are package runq's (on the queue of
// package admit), committed through the kernel's note; here is the gate
// of a syscall naming one.

// pending is a spawn in the queue.
type pending = runq.Pending

// spawned is a run as its spawner holds it, started or queued.
type spawned = runq.Spawned

// daemonActor is who the kernel's own entries are by.
func (k *Kernel) daemonActor() audit.Actor { return audit.Actor{UID: k.uid, PID: int32(os.Getpid())} }

func (k *Kernel) openAdmission(ctx context.Context) {
	k.adm = runq.New(ctx, k.cfg.Runs.MaxConcurrent, admit.Overload(k.cfg.Runs.OverloadLoad, k.cfg.Runs.OverloadMemory), k.sup, k.daemonActor(), k.log, k.note)
}

// release gives back the slot of a run of agent that ended (or did not
// start).
func (k *Kernel) release(agent string) { k.adm.Release(agent) }

// lookup returns the run id that c may act on, or its queue entry.
func (k *Kernel) lookup(c *Cred, op, id string, raw []byte) (*supervisor.Run, *pending, error) {
	if p := k.adm.Lookup(id); p != nil {
		if err := k.gate(call{op: op, c: c, agent: p.Agent, key: id, raw: raw}); err != nil {
			return nil, nil, err
		}
		return nil, p, nil
	}
	r, err := k.run(c, op, id, raw)
	return r, nil, err
}
