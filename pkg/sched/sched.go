package sched

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Overlap modes: what a job does when it comes due while its last run
// still runs.
const (
	OverlapSkip  = "skip"  // do not fire (the default)
	OverlapQueue = "queue" // fire when the last run ends; at most one waits
	OverlapAllow = "allow" // fire anyway
)

// CheckOverlap returns an error for an unknown overlap mode.
func CheckOverlap(m string) error {
	switch m {
	case OverlapSkip, OverlapQueue, OverlapAllow:
		return nil
	}
	return fmt.Errorf("overlap %q: want skip, queue or allow", m)
}

// MaxSleep bounds the timer. The timer runs on the monotonic clock, which
// stands still while the machine is suspended and ignores steps of the
// wall clock; waking at least this often bounds how late either makes a
// job. It is longer than any idle measurement (ox-bench -only schedules).
const MaxSleep = 15 * time.Minute

// Run is a run a job started, as far as overlap goes.
type Run interface {
	ID() string
	Done() <-chan struct{}
}

// Firing is one time a job fires.
type Firing struct {
	Job string
	// Due is the time it was due (now, for a manual run).
	Due time.Time
	// CatchUp: due while oxiosd was down, run once at start.
	CatchUp bool
	// Manual: ox-schedule run; it does not move the schedule.
	Manual bool
	// Queued: it waited for the job's last run to end (overlap queue).
	Queued bool
	// Msg: a message job fired on message Msg (fired by the kernel, not
	// by the clock).
	Msg string
}

// Hooks are what the scheduler calls. They are called without any lock of
// the scheduler held, possibly from several goroutines at once.
type Hooks struct {
	// Fire starts the job's run.
	Fire func(f Firing) (Run, error)
	// Skip says a firing did not run because the job's last run (busy)
	// still runs: overlap skip, or queue with one firing already waiting.
	Skip func(f Firing, busy Run)
}

// Job is a job as the scheduler sees it.
type Job struct {
	Name    string
	Spec    *Spec
	Overlap string
	CatchUp bool
	// LastDue is the last due time handled (fired or skipped), zero if
	// none: with CatchUp, a due time after it that passed while oxiosd
	// was down fires once when the job is added.
	LastDue time.Time
}

// Errors of the scheduler.
var (
	ErrNotFound = errors.New("no such job")
	ErrExists   = errors.New("job exists")
)

// BusyError is the error of a manual run of a job whose last run still
// runs (overlap skip or queue).
type BusyError struct{ Run string }

func (e *BusyError) Error() string { return "the job's last run " + e.Run + " still runs" }

// Scheduler fires jobs when they are due. One goroutine sleeps on one
// timer until the earliest job is due; adding or removing a job wakes it
// to re-arm. With no job due it uses no CPU.
type Scheduler struct {
	clock Clock
	hooks Hooks

	mu   sync.Mutex
	jobs map[string]*entry
	wake chan struct{}
	quit chan struct{}
	done chan struct{}
	wg   sync.WaitGroup // the goroutines waiting for runs (overlap queue)
}

type entry struct {
	job     Job
	next    time.Time
	catchUp bool // next is a missed firing to catch up
	run     Run  // the last run started
	firing  bool // Fire is under way
	pending *Firing
}

// New returns a scheduler; Start starts it.
func New(clock Clock, hooks Hooks) *Scheduler {
	if clock == nil {
		clock = System
	}
	return &Scheduler{clock: clock, hooks: hooks, jobs: map[string]*entry{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// Start starts the goroutine that fires the jobs.
func (s *Scheduler) Start() { go s.loop() }

// Stop stops firing and waits until the goroutines are gone. Runs under
// way go on; a firing waiting for one (overlap queue) is dropped.
func (s *Scheduler) Stop() {
	select {
	case <-s.quit:
		return
	default:
	}
	close(s.quit)
	<-s.done
	s.wg.Wait()
}

func (s *Scheduler) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Add adds j. A job asking for catch-up whose due time after j.LastDue
// has passed fires once at once.
func (s *Scheduler) Add(j Job) error {
	if err := CheckOverlap(j.Overlap); err != nil {
		return err
	}
	now := s.clock.Now()
	e := &entry{job: j}
	e.next = j.Spec.Next(now)
	if j.CatchUp && !j.LastDue.IsZero() {
		if missed := j.Spec.Next(j.LastDue); !missed.IsZero() && !missed.After(now) {
			e.next, e.catchUp = missed, true
		}
	}
	s.mu.Lock()
	if _, ok := s.jobs[j.Name]; ok {
		s.mu.Unlock()
		return ErrExists
	}
	s.jobs[j.Name] = e
	s.mu.Unlock()
	s.kick()
	return nil
}

// Remove removes a job. Its run goes on.
func (s *Scheduler) Remove(name string) error {
	s.mu.Lock()
	_, ok := s.jobs[name]
	delete(s.jobs, name)
	s.mu.Unlock()
	if !ok {
		return ErrNotFound
	}
	s.kick()
	return nil
}

// Status is what the scheduler knows of a job now.
type Status struct {
	Next    time.Time
	Running string // the id of its run if it still runs
	Pending bool   // a firing waits for that run to end
}

// Status returns the status of job name.
func (s *Scheduler) Status(name string) (Status, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.jobs[name]
	if !ok {
		return Status{}, false
	}
	st := Status{Next: e.next, Pending: e.pending != nil}
	if e.run != nil && running(e.run) {
		st.Running = e.run.ID()
	}
	return st, true
}

// Len is the number of jobs.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs)
}

func running(r Run) bool {
	select {
	case <-r.Done():
		return false
	default:
		return true
	}
}

// RunNow fires job name now, once, whatever its schedule: a *BusyError if
// its last run still runs and its overlap is not allow.
func (s *Scheduler) RunNow(name string) (Run, error) {
	s.mu.Lock()
	e, ok := s.jobs[name]
	if !ok {
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	if e.job.Overlap != OverlapAllow && (e.firing || e.run != nil && running(e.run)) {
		id := "(starting)"
		if e.run != nil {
			id = e.run.ID()
		}
		s.mu.Unlock()
		return nil, &BusyError{Run: id}
	}
	e.firing = true
	s.mu.Unlock()
	return s.fire(e, Firing{Job: name, Due: s.clock.Now(), Manual: true})
}

// fire calls the Fire hook for e, which is marked firing.
func (s *Scheduler) fire(e *entry, f Firing) (Run, error) {
	r, err := s.hooks.Fire(f)
	s.mu.Lock()
	e.firing = false
	if err == nil && r != nil {
		e.run = r
	}
	if e.pending != nil && e.run != nil && s.jobs[f.Job] == e {
		s.waitRun(e, e.run)
	}
	s.mu.Unlock()
	return r, err
}

// dispatch fires f, or skips or queues it when the job's last run still
// runs.
func (s *Scheduler) dispatch(f Firing) {
	s.mu.Lock()
	e, ok := s.jobs[f.Job]
	if !ok {
		s.mu.Unlock()
		return
	}
	busy := e.firing || e.run != nil && running(e.run)
	if busy && e.job.Overlap != OverlapAllow {
		last := e.run
		if e.job.Overlap == OverlapQueue && e.pending == nil {
			f.Queued = true
			e.pending = &f
			if !e.firing {
				s.waitRun(e, e.run)
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if s.hooks.Skip != nil {
			s.hooks.Skip(f, last)
		}
		return
	}
	e.firing = true
	s.mu.Unlock()
	s.fire(e, f)
}

// waitRun fires e's pending firing once r ends. s.mu is held.
func (s *Scheduler) waitRun(e *entry, r Run) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case <-r.Done():
		case <-s.quit:
			return
		}
		s.mu.Lock()
		p := e.pending
		e.pending = nil
		ok := s.jobs[e.job.Name] == e
		s.mu.Unlock()
		if p != nil && ok {
			s.dispatch(*p)
		}
	}()
}

func (s *Scheduler) loop() {
	defer close(s.done)
	t := s.clock.NewTimer(MaxSleep)
	defer t.Stop()
	var due []Firing
	for {
		now := s.clock.Now()
		earliest := now.Add(MaxSleep)
		due = due[:0]
		s.mu.Lock()
		for name, e := range s.jobs {
			if e.next.IsZero() {
				continue
			}
			if !e.next.After(now) {
				due = append(due, Firing{Job: name, Due: e.next, CatchUp: e.catchUp})
				e.job.LastDue, e.catchUp = e.next, false
				// From now, not from the due time: a late wake fires
				// once, not once per time missed.
				e.next = e.job.Spec.Next(now)
			}
			if !e.next.IsZero() && e.next.Before(earliest) {
				earliest = e.next
			}
		}
		s.mu.Unlock()
		for _, f := range due {
			s.dispatch(f)
		}
		t.ResetAt(earliest)
		select {
		case <-t.C():
		case <-s.wake:
		case <-s.quit:
			return
		}
	}
}
