package kernel

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/admit"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Admission: the run queue is package admit; here are what its entries
// are (a spawn's spec and caller), the audit of their queueing, start
// and end, and the run a spawner holds while its run waits.

// spawnReq is a spawn as the queue holds it.
type spawnReq struct {
	spec   supervisor.Spec
	cred   Cred
	raw    []byte
	queued time.Time
	done   chan struct{}
	// run is what it became once done: started, or ended in the queue.
	run *supervisor.Run
	err error
}

// pending is a spawn in the queue.
type pending = admit.Ticket[spawnReq]

func (k *Kernel) openAdmission(ctx context.Context) {
	k.adm = admit.New[spawnReq](k.cfg.Runs.MaxConcurrent, admit.Overload(k.cfg.Runs.OverloadLoad, k.cfg.Runs.OverloadMemory))
	go k.adm.Serve(ctx, k.startQueued)
}

// agentLimit is the lower of max_per_agent and the policy's limits.runs.
func (k *Kernel) agentLimit(polRuns int) int {
	n := k.cfg.Runs.MaxPerAgent
	if polRuns > 0 && (n == 0 || polRuns < n) {
		n = polRuns
	}
	return n
}

// admit starts spec now if it fits, or queues it. It returns the run
// record, and the run when it started.
func (k *Kernel) admit(ctx context.Context, c *Cred, spec supervisor.Spec, prio, agentMax int, raw []byte) (proto.RunRecord, *supervisor.Run, error) {
	p := &pending{ID: spec.ID, Agent: spec.Agent, Prio: prio, AgentMax: agentMax,
		Item: spawnReq{spec: spec, cred: *c, raw: raw, queued: time.Now().UTC(), done: make(chan struct{})}}
	now, err := k.adm.Admit(p)
	if err != nil {
		return proto.RunRecord{}, nil, proto.Errorf(proto.ESHUTDOWN, "oxiosd is shutting down")
	}
	if now {
		r, err := k.startRun(ctx, p)
		if err != nil {
			return proto.RunRecord{}, nil, err
		}
		return r.Record(), r, nil
	}
	rec := record(p)
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpRunQueue, Target: spec.Agent + ":" + spec.ID, Args: audit.ArgsDigest(raw)}, data: &rec}
	if err := k.submit(ctx, t, true); err != nil {
		k.adm.Unqueue(p)
		return proto.RunRecord{}, nil, err
	}
	k.adm.Ready(p)
	return rec, nil, nil
}

// record is the run record of a queued run.
func record(p *pending) proto.RunRecord {
	s := &p.Item.spec
	q := p.Item.queued
	rec := proto.RunRecord{
		Type: proto.RecordRun, ID: s.ID, Agent: s.Agent, State: proto.RunQueued, Priority: p.Prio,
		Queued: &q, Command: s.Command, Task: s.Task, Model: s.Model,
	}
	what := s.Task
	if len(s.Command) > 0 {
		what = strings.Join(s.Command, " ")
	}
	rec.Text = fmt.Sprintf("%s %s: queued (priority %d)", rec.ID, what, p.Prio)
	return rec
}

// startRun starts p, whose slot is taken, and audits the start. A start
// that fails gives the slot back.
func (k *Kernel) startRun(ctx context.Context, p *pending) (*supervisor.Run, error) {
	r, err := k.sup.Start(p.Item.spec)
	if err != nil {
		k.release(p.Agent)
		return nil, ioError(err)
	}
	rec := r.Record()
	rec.Priority = p.Prio
	if p.Queued() {
		rec.Queued = &p.Item.queued
	}
	t := &tx{entry: &audit.Entry{Actor: actor(&p.Item.cred), Op: proto.OpRunSpawn, Target: p.Agent + ":" + p.ID, Args: audit.ArgsDigest(p.Item.raw)}, data: &rec}
	if err := k.submit(ctx, t, true); err != nil {
		// Not on the log: it must not run. Its exit gives the slot back.
		r.Signal(syscall.SIGKILL)
		return nil, err
	}
	return r, nil
}

// release gives back the slot of a run of agent that ended (or did not
// start).
func (k *Kernel) release(agent string) { k.adm.Release(agent) }

// startQueued starts a queued run whose slot the queue took.
func (k *Kernel) startQueued(ctx context.Context, p *pending) {
	r, err := k.startRun(ctx, p)
	if err != nil {
		k.log.Warn("queued run did not start", "run", p.ID, "err", err)
		p.Item.err = err
		p.Item.run = k.endQueued(p, 127, "", "did not start: "+err.Error(), audit.Actor{UID: k.uid, PID: int32(os.Getpid())})
	} else {
		p.Item.run = r
	}
	close(p.Item.done)
}

// endQueued records the end of a run that never started: its log (run
// record, exit record) and its run.exit audit entry.
func (k *Kernel) endQueued(p *pending, status int, sig, why string, who audit.Actor) *supervisor.Run {
	now := time.Now().UTC()
	ex := proto.ExitRecord{Type: proto.RecordExit, Run: p.ID, Agent: p.Agent, Status: status, Signal: sig, Error: why, Time: now}
	r, err := k.sup.Ended(record(p), ex)
	if err != nil {
		k.log.Warn("queued run's log not written", "run", p.ID, "err", err)
	}
	what := "exit " + fmt.Sprint(status)
	if sig != "" {
		what = "signal " + sig
	}
	rec := record(p)
	if r != nil {
		rec = r.Record()
	}
	t := &tx{entry: &audit.Entry{Actor: who, Op: proto.OpRunExit, Target: p.Agent + ":" + p.ID + " " + what, Result: "ok"}, agent: p.Agent, data: &rec}
	if err := k.submit(k.record(), t, true); err != nil {
		k.log.Warn("queued run's end not audited", "run", p.ID, "err", err)
	}
	return r
}

// queued returns the queued run id, if it is one.
func (k *Kernel) queued(id string) *pending { return k.adm.Lookup(id) }

// killQueued ends a queued run with sig: it leaves the queue, and its exit
// (128+sig) is recorded. A signal that would not end a process (STOP,
// CONT...) leaves it queued. It returns the run p became when it was no
// longer queued (it started meanwhile: signal that), else nil.
func (k *Kernel) killQueued(ctx context.Context, c *Cred, p *pending, sig syscall.Signal) (*supervisor.Run, error) {
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		if k.queued(p.ID) == p {
			return nil, nil
		}
	default:
		if k.adm.Unqueue(p) {
			p.Item.run = k.endQueued(p, 128+int(sig), supervisor.SignalName(sig), "killed while queued", actor(c))
			p.Item.err = proto.Errorf(proto.ESRCH, "run %s was killed while queued", p.ID)
			close(p.Item.done)
			return nil, nil
		}
	}
	return k.settled(ctx, p)
}

// settled waits until p has left the queue and returns the run it became.
func (k *Kernel) settled(ctx context.Context, p *pending) (*supervisor.Run, error) {
	select {
	case <-p.Item.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.Item.run == nil {
		if p.Item.err != nil {
			return nil, p.Item.err
		}
		return nil, proto.Errorf(proto.ESRCH, "run %s did not start", p.ID)
	}
	return p.Item.run, nil
}

// lookup returns the run id that c may act on, or its queue entry.
func (k *Kernel) lookup(c *Cred, op, id string, raw []byte) (*supervisor.Run, *pending, error) {
	if p := k.queued(id); p != nil {
		if err := k.gate(call{op: op, c: c, agent: p.Agent, key: id, raw: raw}); err != nil {
			return nil, nil, err
		}
		return nil, p, nil
	}
	r, err := k.run(c, op, id, raw)
	return r, nil, err
}

// queuedRecords returns the records of the queued runs, in queue order.
func (k *Kernel) queuedRecords() []proto.RunRecord {
	// ox-ps lists the queue in the order it will be admitted.
	ps := k.adm.Queued()
	out := make([]proto.RunRecord, len(ps))
	for i, p := range ps {
		out[i] = record(p)
	}
	return out
}

// closeAdmission ends the queued runs (oxiosd is stopping: they never
// started) and stops the admitter.
func (k *Kernel) closeAdmission() {
	for _, p := range k.adm.Close() {
		p.Item.run = k.endQueued(p, 255, "", "oxiosd stopped before the run started", audit.Actor{UID: k.uid, PID: int32(os.Getpid())})
		p.Item.err = proto.Errorf(proto.ESHUTDOWN, "oxiosd stopped before run %s started", p.ID)
		close(p.Item.done)
	}
}

// admissionState is the queue's state for the resources record.
func (k *Kernel) admissionState() proto.Admission {
	running, queued := k.adm.State()
	return proto.Admission{Running: running, Queued: queued, MaxConcurrent: k.cfg.Runs.MaxConcurrent, MaxPerAgent: k.cfg.Runs.MaxPerAgent}
}

// wallExceeded publishes budget.exceeded for a run its wall budget ended,
// as an audit entry of its own (run.wall, EDQUOT), beside its run.exit.
func (k *Kernel) wallExceeded(r *supervisor.Run, rec *proto.RunRecord) {
	if !strings.HasPrefix(rec.Error, "wall time budget") {
		return
	}
	t := &tx{entry: &audit.Entry{Actor: audit.Actor{UID: k.uid, PID: int32(os.Getpid())}, Op: proto.OpRunWall,
		Target: rec.Agent + ":" + rec.ID, Result: proto.EDQUOT}, agent: rec.Agent, data: rec}
	if err := k.submit(k.record(), t, false); err != nil {
		k.log.Warn("wall budget end not audited", "run", rec.ID, "err", err)
	}
}

// spawned is a run as its spawner holds it: started (a *supervisor.Run)
// or still queued (a queuedRun). Done is closed when it has ended.
type spawned interface {
	ID() string
	Done() <-chan struct{}
	Record() proto.RunRecord
}

// queuedRun is a run waiting for admission, until it has started and
// ended.
type queuedRun struct {
	k    *Kernel
	rec  proto.RunRecord // as queued
	p    *pending        // nil once it left the queue before we looked
	done chan struct{}
}

// queuedRun follows the queued run rec to its end.
func (k *Kernel) queuedRun(rec proto.RunRecord) spawned {
	q := &queuedRun{k: k, rec: rec, done: make(chan struct{})}
	q.p = k.adm.Lookup(rec.ID)
	go func() {
		defer close(q.done)
		if q.p != nil {
			<-q.p.Item.done
		}
		if r, ok := k.sup.Get(rec.ID); ok {
			<-r.Done()
		}
	}()
	return q
}

func (q *queuedRun) ID() string            { return q.rec.ID }
func (q *queuedRun) Done() <-chan struct{} { return q.done }

// Record is the run's record now: queued, running or ended.
func (q *queuedRun) Record() proto.RunRecord {
	if r, ok := q.k.sup.Get(q.rec.ID); ok {
		return r.Record()
	}
	return q.rec
}
