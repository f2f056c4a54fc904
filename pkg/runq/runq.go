// Package runq owns the runs that wait for admission (issue 8): a spawn
// as the run queue holds it (its spec and caller), starting it when its
// slot comes, ending it in the queue (killed there, failed to start,
// oxiosd stopping) with the log and exit record a run would have, the
// record of a queued run, waiting until one has left the queue, and
// following one to its end; attaching to a run queued or not, waiting
// for runs' exits in the order they come, and signalling a queued run
// (wait.go). The queue's order and limits are package
// admit's; starting and reaping processes is the supervisor's; the audit
// entries of a queueing, a start and an end are runq's, committed by the
// kernel's audit.Recorder, so that a run that is not on the audit log
// never runs.
package runq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/admit"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Req is a spawn as the queue holds it.
type Req struct {
	Spec   supervisor.Spec
	Actor  audit.Actor // who spawned it
	Raw    []byte      // the spawn's args, for the audit digest
	queued time.Time
	done   chan struct{}
	// run is what it became once done: started, or ended in the queue.
	run *supervisor.Run
	err error
}

// Pending is a spawn in the queue.
type Pending = admit.Ticket[Req]

// Queue is the run queue with its supervisor.
type Queue struct {
	adm    *admit.Queue[Req]
	sup    *supervisor.Supervisor
	record audit.Recorder
	// daemon is who ends a run that did not start.
	daemon audit.Actor
	log    *slog.Logger
}

// New makes the queue of at most max runs at once (0: no limit), which
// holds entries while overload says why ("" not overloaded), and serves
// it until ctx ends. record commits the audit entries of the runs' life
// in the queue: run.queue when one waits for admission (an error leaves
// it out of the queue), run.spawn when it starts (an error kills it: it
// must not run unrecorded), and run.exit when it ends without having
// started.
func New(ctx context.Context, max int, overload func() string, sup *supervisor.Supervisor, daemon audit.Actor, log *slog.Logger, record audit.Recorder) *Queue {
	q := &Queue{adm: admit.New[Req](max, overload), sup: sup, record: record, daemon: daemon, log: log}
	go q.adm.Serve(ctx, q.startQueued)
	return q
}

// Admit starts spec now if it fits, or queues it. It returns the run
// record, and the run when it started. An error of the queue's closing
// is ESHUTDOWN.
func (q *Queue) Admit(ctx context.Context, spec supervisor.Spec, who audit.Actor, prio, agentMax int, raw []byte) (proto.RunRecord, *supervisor.Run, error) {
	p := &Pending{ID: spec.ID, Agent: spec.Agent, Prio: prio, AgentMax: agentMax,
		Item: Req{Spec: spec, Actor: who, Raw: raw, queued: time.Now().UTC(), done: make(chan struct{})}}
	now, err := q.adm.Admit(p)
	if errors.Is(err, admit.ErrQueueFull) {
		return proto.RunRecord{}, nil, proto.Errorf(proto.EAGAIN, "agent %s has %d runs waiting in the queue already, the most an agent has: wait for them (ox-ps -a %s), or kill some", spec.Agent, admit.MaxQueuedPerAgent, spec.Agent)
	}
	if err != nil {
		return proto.RunRecord{}, nil, proto.Errorf(proto.ESHUTDOWN, "oxiosd is shutting down")
	}
	if now {
		r, err := q.start(ctx, p)
		if err != nil {
			return proto.RunRecord{}, nil, err
		}
		return r.Record(), r, nil
	}
	rec := Record(p)
	if err := q.record(ctx, entry(p, proto.OpRunQueue), "", "", "", &rec); err != nil {
		q.adm.Unqueue(p)
		return proto.RunRecord{}, nil, err
	}
	q.adm.Ready(p)
	return rec, nil, nil
}

// entry is the audit entry of p's op (run.queue, run.spawn) by its
// spawner.
func entry(p *Pending, op string) *audit.Entry {
	return &audit.Entry{Actor: p.Item.Actor, Op: op, Target: p.Agent + ":" + p.ID, Args: audit.ArgsDigest(p.Item.Raw)}
}

// Record is the run record of a queued run.
func Record(p *Pending) proto.RunRecord {
	s := &p.Item.Spec
	qt := p.Item.queued
	rec := proto.RunRecord{
		Type: proto.RecordRun, ID: s.ID, Agent: s.Agent, State: proto.RunQueued, Priority: p.Prio,
		Queued: &qt, Command: s.Command, Task: s.Task, Model: s.Model,
	}
	what := s.Task
	if len(s.Command) > 0 {
		what = strings.Join(s.Command, " ")
	}
	rec.Text = fmt.Sprintf("%s %s: queued (priority %d)", rec.ID, what, p.Prio)
	return rec
}

// start starts p, whose slot is taken, and has the start recorded. A
// start that fails gives the slot back.
func (q *Queue) start(ctx context.Context, p *Pending) (*supervisor.Run, error) {
	r, err := q.sup.Start(p.Item.Spec)
	if err != nil {
		q.Release(p.Agent)
		return nil, proto.AsError(err)
	}
	rec := r.Record()
	rec.Priority = p.Prio
	if p.Queued() {
		rec.Queued = &p.Item.queued
	}
	if err := q.record(ctx, entry(p, proto.OpRunSpawn), "", "", "", &rec); err != nil {
		// Not on the log: it must not run. Its exit gives the slot back.
		r.Signal(syscall.SIGKILL)
		return nil, err
	}
	return r, nil
}

// Release gives back the slot of a run of agent that ended (or did not
// start).
func (q *Queue) Release(agent string) { q.adm.Release(agent) }

// startQueued starts a queued run whose slot the queue took.
func (q *Queue) startQueued(ctx context.Context, p *Pending) {
	r, err := q.start(ctx, p)
	if err != nil {
		q.log.Warn("queued run did not start", "run", p.ID, "err", err)
		p.Item.err = err
		p.Item.run = q.end(p, 127, "", "did not start: "+err.Error(), q.daemon)
	} else {
		p.Item.run = r
	}
	close(p.Item.done)
}

// end records the end of a run that never started, by who: its log (run
// record, exit record) and its run.exit entry.
func (q *Queue) end(p *Pending, status int, sig, why string, who audit.Actor) *supervisor.Run {
	now := time.Now().UTC()
	ex := proto.ExitRecord{Type: proto.RecordExit, Run: p.ID, Agent: p.Agent, Status: status, Signal: sig, Error: why, Time: now}
	r, err := q.sup.Ended(Record(p), ex)
	if err != nil {
		q.log.Warn("queued run's log not written", "run", p.ID, "err", err)
	}
	what := What(status, sig)
	rec := Record(p)
	if r != nil {
		rec = r.Record()
	}
	e := &audit.Entry{Actor: who, Op: proto.OpRunExit, Target: p.Agent + ":" + p.ID + " " + what, Result: "ok"}
	if err := q.record(context.Background(), e, "", p.Agent, "", &rec); err != nil {
		q.log.Warn("queued run's end not audited", "run", p.ID, "err", err)
	}
	return r
}

// What is how a run.exit entry's target says a run ended: "exit N", or
// "signal S" when a signal ended it.
func What(status int, sig string) string {
	if sig != "" {
		return "signal " + sig
	}
	return "exit " + fmt.Sprint(status)
}

// Exited is the audit entries, by who, of the end of a run that ran,
// rec its record with its status: limit, when the kernel refused its
// processes what its policy's [limits] do not grant (run.limit: a denial
// like any other, on the log), else nil; its run.exit, whose Args are
// digest, the digest of the run's whole log (its output, or an LLM run's
// conversation), so that the log can be checked against the audit chain;
// and wall, when its wall time budget ended it (run.wall, EDQUOT, which
// publishes budget.exceeded), else nil.
func Exited(rec *proto.RunRecord, who audit.Actor, digest string) (limit, exit, wall *audit.Entry) {
	if rec.Limits != "" {
		limit = &audit.Entry{Actor: who, Op: proto.OpRunLimit,
			Target: rec.Agent + ":" + rec.ID + " " + rec.Limits + " [limits]", Result: runspec.LimitErrno(rec.Limits)}
	}
	exit = &audit.Entry{Actor: who, Op: proto.OpRunExit,
		Target: rec.Agent + ":" + rec.ID + " " + What(*rec.Status, rec.Signal), Args: digest, Result: "ok"}
	if supervisor.WallEnded(rec) {
		wall = &audit.Entry{Actor: who, Op: proto.OpRunWall, Target: rec.Agent + ":" + rec.ID, Result: proto.EDQUOT}
	}
	return limit, exit, wall
}

// Lookup returns the queued run id, if it is one.
func (q *Queue) Lookup(id string) *Pending { return q.adm.Lookup(id) }

// Kill ends a queued run with sig, sent by who: it leaves the queue, and
// its exit (128+sig) is recorded. A signal that would not end a process
// (STOP, CONT...) leaves it queued. It returns the run p became when it
// was no longer queued (it started meanwhile: signal that), else nil.
func (q *Queue) Kill(ctx context.Context, who audit.Actor, p *Pending, sig syscall.Signal) (*supervisor.Run, error) {
	switch sig {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
		syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		if q.Lookup(p.ID) == p {
			return nil, nil
		}
	default:
		if q.adm.Unqueue(p) {
			p.Item.run = q.end(p, 128+int(sig), supervisor.SignalName(sig), "killed while queued", who)
			p.Item.err = proto.Errorf(proto.ESRCH, "run %s was killed while queued", p.ID)
			close(p.Item.done)
			return nil, nil
		}
	}
	return Settled(ctx, p)
}

// Became is the run p became once it left the queue (nil: it has not
// yet, or it ended there without a log).
func Became(p *Pending) *supervisor.Run { return p.Item.run }

// Settled waits until p has left the queue and returns the run it
// became.
func Settled(ctx context.Context, p *Pending) (*supervisor.Run, error) {
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

// Records returns the records of the queued runs, in the order they will
// be admitted.
func (q *Queue) Records() []proto.RunRecord {
	ps := q.adm.Queued()
	out := make([]proto.RunRecord, len(ps))
	for i, p := range ps {
		out[i] = Record(p)
	}
	return out
}

// Ps is the records of the runs keep keeps (by their agent): the live
// ones, with their usage sampled now, then the queued ones in the order
// they will start, and with all the ended ones kept too.
func (q *Queue) Ps(all bool, keep func(agent string) bool) []proto.RunRecord {
	var runs []*supervisor.Run
	for _, r := range q.sup.Runs(all) {
		if keep(r.Agent()) {
			runs = append(runs, r)
		}
	}
	out := q.sup.Records(runs)
	for _, rec := range q.Records() {
		if keep(rec.Agent) {
			out = append(out, rec)
		}
	}
	return out
}

// Live counts agent's runs that have not ended: the supervisor's live
// runs and the queued ones.
func (q *Queue) Live(agent string) int {
	n := 0
	for _, r := range q.sup.Runs(false) {
		if r.Agent() == agent {
			n++
		}
	}
	for _, p := range q.adm.Queued() {
		if p.Agent == agent {
			n++
		}
	}
	return n
}

// Close ends the queued runs (oxiosd is stopping: they never started)
// and stops the admitter.
func (q *Queue) Close() {
	for _, p := range q.adm.Close() {
		p.Item.run = q.end(p, 255, "", "oxiosd stopped before the run started", q.daemon)
		p.Item.err = proto.Errorf(proto.ESHUTDOWN, "oxiosd stopped before run %s started", p.ID)
		close(p.Item.done)
	}
}

// State is how many runs run and how many wait.
func (q *Queue) State() (running, queued int) { return q.adm.State() }

// Admission is the queue's state for the resources record: its runs, its
// limits (max at once, maxPerAgent of an agent).
func (q *Queue) Admission(max, maxPerAgent int) proto.Admission {
	running, queued := q.State()
	return proto.Admission{Running: running, Queued: queued, MaxConcurrent: max, MaxPerAgent: maxPerAgent}
}

// Spawned is a run as its spawner holds it: started (a *supervisor.Run)
// or still queued (Follow's). Done is closed when it has ended.
type Spawned interface {
	ID() string
	Done() <-chan struct{}
	Record() proto.RunRecord
}

// queuedRun is a run waiting for admission, until it has started and
// ended.
type queuedRun struct {
	sup  *supervisor.Supervisor
	rec  proto.RunRecord // as queued
	p    *Pending        // nil once it left the queue before we looked
	done chan struct{}
}

// Follow follows the queued run rec to its end.
func (q *Queue) Follow(rec proto.RunRecord) Spawned {
	f := &queuedRun{sup: q.sup, rec: rec, done: make(chan struct{})}
	f.p = q.adm.Lookup(rec.ID)
	go func() {
		defer close(f.done)
		if f.p != nil {
			<-f.p.Item.done
		}
		if r, ok := q.sup.Get(rec.ID); ok {
			<-r.Done()
		}
	}()
	return f
}

func (f *queuedRun) ID() string            { return f.rec.ID }
func (f *queuedRun) Done() <-chan struct{} { return f.done }

// Record is the run's record now: queued, running or ended.
func (f *queuedRun) Record() proto.RunRecord {
	if r, ok := f.sup.Get(f.rec.ID); ok {
		return r.Record()
	}
	return f.rec
}
