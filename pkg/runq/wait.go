package runq

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
)

// Attach calls emit with each record of a run (one JSON object), from
// its first, until its exit record or ctx ends: of r, or of the queued
// run p, whose record comes first, and the run's own records once it
// starts.
func Attach(ctx context.Context, r *supervisor.Run, p *Pending, emit func([]byte) error) error {
	skip := 0
	if p != nil {
		rec := Record(p)
		b, _ := json.Marshal(&rec)
		if err := emit(b); err != nil {
			return err
		}
		var err error
		if r, err = Settled(ctx, p); err != nil && r == nil {
			var pe *proto.Error
			if errors.As(err, &pe) && pe.Code == proto.ESRCH {
				return nil
			}
			return err
		}
		if r.Record().PID == 0 {
			skip = 1 // ended in the queue: its log starts with the record sent
		}
	}
	return r.Follow(ctx, func(b []byte) error {
		if skip > 0 {
			skip--
			return nil
		}
		return emit(b)
	})
}

// Waited is a run to wait for: started (Run) or still queued (Pending).
type Waited struct {
	Run     *supervisor.Run
	Pending *Pending
	err     error
}

// Wait calls emit with the exit record of each run, in the order they
// exit; a queued run is waited for until it has started and exited (or
// was killed in the queue). It returns ctx's error when ctx ends first.
func Wait(ctx context.Context, runs []Waited, emit func(*proto.ExitRecord) error) error {
	exited := make(chan Waited, len(runs))
	for _, w := range runs {
		go func() {
			if w.Pending != nil {
				w.Run, w.err = Settled(ctx, w.Pending)
				if w.Run == nil {
					if ctx.Err() == nil {
						exited <- w
					}
					return
				}
			}
			select {
			case <-w.Run.Done():
				exited <- w
			case <-ctx.Done():
			}
		}()
	}
	for range runs {
		select {
		case w := <-exited:
			if w.Run == nil {
				return w.err
			}
			ex := ExitRecord(w.Run.Record())
			if err := emit(&ex); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// ExitRecord is the exit record of the ended run rec.
func ExitRecord(rec proto.RunRecord) proto.ExitRecord {
	ex := proto.ExitRecord{Type: proto.RecordExit, Run: rec.ID, Agent: rec.Agent, Signal: rec.Signal, Error: rec.Error, Limits: rec.Limits}
	if rec.Status != nil {
		ex.Status = *rec.Status
	}
	if rec.Ended != nil {
		ex.Time = *rec.Ended
	}
	ex.Text = rec.Text
	return ex
}

// Signal sends sig, from who, to the queued run p (Kill), or to the run
// it became once it started, and returns the run's record after it: the
// record of the run it became, or its record in the queue. The record
// is empty when the queue failed to kill it.
func (q *Queue) Signal(ctx context.Context, who audit.Actor, p *Pending, sig syscall.Signal) (proto.RunRecord, error) {
	r, err := q.Kill(ctx, who, p, sig)
	switch {
	case err != nil:
		return proto.RunRecord{}, err
	case r != nil:
		serr := r.Signal(sig)
		return r.Record(), serr
	case Became(p) != nil:
		return Became(p).Record(), nil
	}
	return Record(p), nil
}

// SignalAudited is SignalRun audited: the run.kill entry by who (args digest,
// target "AGENT:ID SIGNAME", result the signal's) is recorded (the
// queue's audit.Recorder) before the signal's error is returned.
func (q *Queue) SignalAudited(ctx context.Context, who audit.Actor, r *supervisor.Run, p *Pending, sig syscall.Signal, digest string) (proto.RunRecord, error) {
	id := ""
	if p != nil {
		id = p.ID
	} else {
		id = r.ID()
	}
	rec, agent, serr := q.SignalRun(ctx, who, r, p, sig)
	e := &audit.Entry{Actor: who, Op: proto.OpRunKill, Target: agent + ":" + id + " SIG" + supervisor.SignalName(sig), Args: digest, Result: proto.Result(serr)}
	if err := q.record(ctx, e, "", "", "", nil); err != nil {
		return rec, err
	}
	return rec, serr
}

// SignalRun is Signal for a run looked up as started (r) or queued (p,
// when r is nil); it also returns the run's agent, which the record of
// a queued run that failed to be killed does not hold.
func (q *Queue) SignalRun(ctx context.Context, who audit.Actor, r *supervisor.Run, p *Pending, sig syscall.Signal) (proto.RunRecord, string, error) {
	if p == nil {
		err := r.Signal(sig)
		rec := r.Record()
		return rec, rec.Agent, err
	}
	rec, err := q.Signal(ctx, who, p, sig)
	if rec.Agent == "" {
		return rec, p.Agent, err
	}
	return rec, rec.Agent, err
}
