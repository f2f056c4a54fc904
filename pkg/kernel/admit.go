package kernel

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Admission (issue 8): at most [runs] max_concurrent runs run at once, and
// at most max_per_agent (or the agent's policy [limits] runs, the lower)
// of one agent. A spawn beyond them waits in a queue, higher priority
// first, then first come first served: its run exists (ox-ps shows it
// queued, ox-wait and ox-attach wait for it, ox-kill removes it) and its
// spawn is audited as run.queue, then as run.spawn when it starts. While
// the host is overloaded (overload_load, overload_memory) queued runs
// stay queued.
//
// Nothing polls: a slot that frees (a run's exit), a queued run that is
// killed and a new queue entry wake the one admitting goroutine; only
// while runs wait on an overloaded host is the load read again, each
// second.

// pending is a run in the queue.
type pending struct {
	spec     supervisor.Spec
	cred     Cred
	raw      []byte
	prio     int
	seq      uint64
	queued   time.Time
	agentMax int  // the agent's limit when it was spawned; 0: none
	ready    bool // its run.queue entry is durable
	taken    bool // out of the queue, being started
	done     chan struct{}
	// run is what it became once done: started, or ended in the queue.
	run *supervisor.Run
	err error
}

type admission struct {
	mu      sync.Mutex
	running int
	agents  map[string]int
	queue   []*pending // sorted: priority, then seq
	byID    map[string]*pending
	seq     uint64
	closed  bool
	kick    chan struct{}
	recheck *time.Timer
}

// overloadRecheck is how often the load is read while runs wait on an
// overloaded host.
const overloadRecheck = time.Second

func (k *Kernel) openAdmission() {
	k.adm = admission{agents: map[string]int{}, byID: map[string]*pending{}, kick: make(chan struct{}, 1)}
	go k.admitter()
}

func (a *admission) kickLocked() {
	if a.closed {
		return
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// agentLimit is the lower of max_per_agent and the policy's limits.runs.
func (k *Kernel) agentLimit(polRuns int) int {
	n := k.cfg.Runs.MaxPerAgent
	if polRuns > 0 && (n == 0 || polRuns < n) {
		n = polRuns
	}
	return n
}

func (k *Kernel) fitsLocked(p *pending) bool {
	if m := k.cfg.Runs.MaxConcurrent; m > 0 && k.adm.running >= m {
		return false
	}
	return p.agentMax == 0 || k.adm.agents[p.spec.Agent] < p.agentMax
}

// admit starts spec now if it fits, or queues it. It returns the run
// record, and the run when it started.
func (k *Kernel) admit(ctx context.Context, c *Cred, spec supervisor.Spec, prio, agentMax int, raw []byte) (proto.RunRecord, *supervisor.Run, error) {
	p := &pending{spec: spec, cred: *c, raw: raw, prio: prio, agentMax: agentMax, queued: time.Now().UTC(), done: make(chan struct{})}
	a := &k.adm
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return proto.RunRecord{}, nil, proto.Errorf(proto.ESHUTDOWN, "oxiosd is shutting down")
	}
	over := k.overload()
	if over == "" && k.fitsLocked(p) {
		a.running++
		a.agents[spec.Agent]++
		a.mu.Unlock()
		r, err := k.startRun(ctx, p)
		if err != nil {
			return proto.RunRecord{}, nil, err
		}
		return r.Record(), r, nil
	}
	a.seq++
	p.seq = a.seq
	i := sort.Search(len(a.queue), func(i int) bool {
		q := a.queue[i]
		return q.prio < p.prio || (q.prio == p.prio && q.seq > p.seq)
	})
	a.queue = append(a.queue, nil)
	copy(a.queue[i+1:], a.queue[i:])
	a.queue[i] = p
	a.byID[spec.ID] = p
	a.mu.Unlock()
	rec := p.record()
	t := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpRunQueue, Target: spec.Agent + ":" + spec.ID, Args: audit.ArgsDigest(raw)}, data: &rec}
	if err := k.submit(ctx, t, true); err != nil {
		a.mu.Lock()
		k.unqueueLocked(p)
		a.mu.Unlock()
		return proto.RunRecord{}, nil, err
	}
	a.mu.Lock()
	p.ready = true
	a.kickLocked()
	a.mu.Unlock()
	return rec, nil, nil
}

// record is the run record of a queued run.
func (p *pending) record() proto.RunRecord {
	q := p.queued
	rec := proto.RunRecord{
		Type: proto.RecordRun, ID: p.spec.ID, Agent: p.spec.Agent, State: proto.RunQueued, Priority: p.prio,
		Queued: &q, Command: p.spec.Command, Task: p.spec.Task, Model: p.spec.Model,
	}
	what := p.spec.Task
	if len(p.spec.Command) > 0 {
		what = strings.Join(p.spec.Command, " ")
	}
	rec.Text = fmt.Sprintf("%s %s: queued (priority %d)", rec.ID, what, p.prio)
	return rec
}

// unqueueLocked takes p out of the queue; false if it was not in it.
func (k *Kernel) unqueueLocked(p *pending) bool {
	a := &k.adm
	if a.byID[p.spec.ID] != p {
		return false
	}
	delete(a.byID, p.spec.ID)
	for i, q := range a.queue {
		if q == p {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	return true
}

// startRun starts p, whose slot is taken, and audits the start. A start
// that fails gives the slot back.
func (k *Kernel) startRun(ctx context.Context, p *pending) (*supervisor.Run, error) {
	r, err := k.sup.Start(p.spec)
	if err != nil {
		k.release(p.spec.Agent)
		return nil, ioError(err)
	}
	rec := r.Record()
	rec.Priority = p.prio
	if p.seq != 0 {
		rec.Queued = &p.queued
	}
	t := &tx{entry: &audit.Entry{Actor: actor(&p.cred), Op: proto.OpRunSpawn, Target: p.spec.Agent + ":" + p.spec.ID, Args: audit.ArgsDigest(p.raw)}, data: &rec}
	if err := k.submit(ctx, t, true); err != nil {
		// Not on the log: it must not run. Its exit gives the slot back.
		r.Signal(syscall.SIGKILL)
		return nil, err
	}
	return r, nil
}

// release gives back the slot of a run of agent that ended (or did not
// start) and wakes the admitter.
func (k *Kernel) release(agent string) {
	a := &k.adm
	a.mu.Lock()
	a.running--
	if a.agents[agent]--; a.agents[agent] <= 0 {
		delete(a.agents, agent)
	}
	if len(a.queue) > 0 {
		a.kickLocked()
	}
	a.mu.Unlock()
}

// admitter starts queued runs as slots free, one at a time and in queue
// order, so that runs start in the order they are admitted.
func (k *Kernel) admitter() {
	for range k.adm.kick {
		for {
			p := k.next()
			if p == nil {
				break
			}
			r, err := k.startRun(context.Background(), p)
			if err != nil {
				k.log.Warn("queued run did not start", "run", p.spec.ID, "err", err)
				p.err = err
				p.run = k.endQueued(p, 127, "", "did not start: "+err.Error(), audit.Actor{UID: k.uid, PID: int32(os.Getpid())})
			} else {
				p.run = r
			}
			close(p.done)
			k.adm.mu.Lock()
			delete(k.adm.byID, p.spec.ID)
			k.adm.mu.Unlock()
		}
	}
}

// next takes the first queued run that may start now, with its slot; nil
// if none (then, on an overloaded host, a recheck is armed).
func (k *Kernel) next() *pending {
	a := &k.adm
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || len(a.queue) == 0 {
		return nil
	}
	if why := k.overload(); why != "" {
		if a.recheck == nil {
			a.recheck = time.AfterFunc(overloadRecheck, func() {
				a.mu.Lock()
				a.recheck = nil
				a.kickLocked()
				a.mu.Unlock()
			})
		}
		return nil
	}
	for i, p := range a.queue {
		if p.ready && k.fitsLocked(p) {
			// Out of the queue, still found by id until it has started.
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			p.taken = true
			a.running++
			a.agents[p.spec.Agent]++
			return p
		}
		if m := k.cfg.Runs.MaxConcurrent; m > 0 && a.running >= m {
			return nil
		}
	}
	return nil
}

// endQueued records the end of a run that never started: its log (run
// record, exit record) and its run.exit audit entry.
func (k *Kernel) endQueued(p *pending, status int, sig, why string, who audit.Actor) *supervisor.Run {
	now := time.Now().UTC()
	ex := proto.ExitRecord{Type: proto.RecordExit, Run: p.spec.ID, Agent: p.spec.Agent, Status: status, Signal: sig, Error: why, Time: now}
	r, err := k.sup.Ended(p.record(), ex)
	if err != nil {
		k.log.Warn("queued run's log not written", "run", p.spec.ID, "err", err)
	}
	what := "exit " + fmt.Sprint(status)
	if sig != "" {
		what = "signal " + sig
	}
	rec := p.record()
	if r != nil {
		rec = r.Record()
	}
	t := &tx{entry: &audit.Entry{Actor: who, Op: proto.OpRunExit, Target: p.spec.Agent + ":" + p.spec.ID + " " + what, Result: "ok"}, agent: p.spec.Agent, data: &rec}
	if err := k.submit(context.Background(), t, true); err != nil {
		k.log.Warn("queued run's end not audited", "run", p.spec.ID, "err", err)
	}
	return r
}

// queued returns the queued run id, if it is one.
func (k *Kernel) queued(id string) *pending {
	k.adm.mu.Lock()
	defer k.adm.mu.Unlock()
	return k.adm.byID[id]
}

// killQueued ends a queued run with sig: it leaves the queue, and its exit
// (128+sig) is recorded. A signal that would not end a process (STOP,
// CONT...) leaves it queued. It returns the run p became when it was no
// longer queued (it started meanwhile: signal that), else nil.
func (k *Kernel) killQueued(ctx context.Context, c *Cred, p *pending, sig syscall.Signal) (*supervisor.Run, error) {
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		if k.queued(p.spec.ID) == p {
			return nil, nil
		}
	default:
		k.adm.mu.Lock()
		if !p.taken && k.unqueueLocked(p) {
			k.adm.mu.Unlock()
			p.run = k.endQueued(p, 128+int(sig), supervisor.SignalName(sig), "killed while queued", actor(c))
			p.err = proto.Errorf(proto.ESRCH, "run %s was killed while queued", p.spec.ID)
			close(p.done)
			return nil, nil
		}
		k.adm.mu.Unlock()
	}
	return k.settled(ctx, p)
}

// settled waits until p has left the queue and returns the run it became.
func (k *Kernel) settled(ctx context.Context, p *pending) (*supervisor.Run, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.run == nil {
		if p.err != nil {
			return nil, p.err
		}
		return nil, proto.Errorf(proto.ESRCH, "run %s did not start", p.spec.ID)
	}
	return p.run, nil
}

// lookup returns the run id that c may act on, or its queue entry.
func (k *Kernel) lookup(c *Cred, op, id string, raw []byte) (*supervisor.Run, *pending, error) {
	if p := k.queued(id); p != nil {
		if err := k.gate(&call{op: op, c: c, agent: p.spec.Agent, key: id, raw: raw}); err != nil {
			return nil, nil, err
		}
		return nil, p, nil
	}
	r, err := k.run(c, op, id, raw)
	return r, nil, err
}

// queuedRecords returns the records of the queued runs, in queue order.
func (k *Kernel) queuedRecords() []proto.RunRecord {
	k.adm.mu.Lock()
	ps := append([]*pending(nil), k.adm.queue...)
	// ox-ps lists the queue in the order it will be admitted.
	k.adm.mu.Unlock()
	out := make([]proto.RunRecord, len(ps))
	for i, p := range ps {
		out[i] = p.record()
	}
	return out
}

// closeAdmission ends the queued runs (oxiosd is stopping: they never
// started) and stops the admitter.
func (k *Kernel) closeAdmission() {
	a := &k.adm
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return
	}
	a.closed = true
	ps := a.queue
	a.queue = nil
	clear(a.byID)
	if a.recheck != nil {
		a.recheck.Stop()
	}
	close(a.kick)
	a.mu.Unlock()
	for _, p := range ps {
		p.run = k.endQueued(p, 255, "", "oxiosd stopped before the run started", audit.Actor{UID: k.uid, PID: int32(os.Getpid())})
		p.err = proto.Errorf(proto.ESHUTDOWN, "oxiosd stopped before run %s started", p.spec.ID)
		close(p.done)
	}
}

// admissionState is the queue's state for the resources record.
func (k *Kernel) admissionState() proto.Admission {
	k.adm.mu.Lock()
	defer k.adm.mu.Unlock()
	return proto.Admission{Running: k.adm.running, Queued: len(k.adm.queue), MaxConcurrent: k.cfg.Runs.MaxConcurrent, MaxPerAgent: k.cfg.Runs.MaxPerAgent}
}

// wallExceeded publishes budget.exceeded for a run its wall budget ended,
// as an audit entry of its own (run.wall, EDQUOT), beside its run.exit.
func (k *Kernel) wallExceeded(r *supervisor.Run, rec *proto.RunRecord) {
	if !strings.HasPrefix(rec.Error, "wall time budget") {
		return
	}
	t := &tx{entry: &audit.Entry{Actor: audit.Actor{UID: k.uid, PID: int32(os.Getpid())}, Op: proto.OpRunWall,
		Target: rec.Agent + ":" + rec.ID, Result: proto.EDQUOT}, agent: rec.Agent, data: rec}
	if err := k.submit(context.Background(), t, false); err != nil {
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
	k.adm.mu.Lock()
	q.p = k.adm.byID[rec.ID]
	k.adm.mu.Unlock()
	go func() {
		defer close(q.done)
		if q.p != nil {
			<-q.p.done
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
