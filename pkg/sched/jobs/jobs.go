// Package jobs owns the schedules' jobs (issue 8): their files, the table
// of every agent's jobs, what a firing records, and the message jobs'
// firing. A job is the file agents/AGENT/sys/schedules/NAME.json of the
// versioned tree, so ox-commit versions it and it survives restarts; it
// keeps the last due time it handled, so that a job asking for catch-up
// runs once at start when oxiosd was down at its time. The timing is
// pkg/sched's; each firing is a run.spawn of the job's agent, which the
// kernel makes (Hooks.Spawn: the same syscall path as ox-spawn: policy,
// budget, audit), followed by a schedule.fire entry naming the run,
// committed through Hooks.Commit and published as schedule.fired. Job
// names are unique across agents (ox-schedule rm NAME needs no agent).
//
// The package does not authorize: the kernel's syscalls gate each call
// and pass what a job's agent needs checked as a func.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched"
	"github.com/oxios/oxios/pkg/state"
)

// Dir is the folder of an agent's jobs in its sys space.
const Dir = "schedules"

// Key is the sys key of job name's file.
func Key(name string) string { return Dir + "/" + name + ".json" }

// File is a job's file: the job as proto.Job defines it.
type File struct {
	proto.Job
}

// OnMsg reports whether j fires on messages rather than on a clock.
func (j *File) OnMsg() bool {
	return j.Schedule == proto.ScheduleMessage || j.Schedule == proto.ScheduleMessages
}

// Change is the state change that writes j's file.
func (j *File) Change() *state.Change {
	v, _ := json.MarshalIndent(j, "", "  ")
	return &state.Change{Agent: j.Agent, Space: state.SpaceSys, Key: Key(j.Name), Value: append(v, '\n')}
}

// CheckName: job names follow the rules of agent names.
func CheckName(name string) *proto.Error {
	if name == "" {
		return proto.Errorf(proto.EINVAL, "job name is empty (give one with --name)")
	}
	if err := proto.CheckAgent(name); err != nil {
		err.Message = strings.Replace(err.Message, "agent name", "job name", 1)
		return err
	}
	return nil
}

// New checks the arguments of a schedule.add and makes the job's file
// (by uid, now). runnable checks what the job runs: a command (its
// first word), or none for an LLM task.
func New(a proto.ScheduleAddArgs, uid uint32, now time.Time, runnable func(command []string) error) (*File, error) {
	if err := CheckName(a.Name); err != nil {
		return nil, err
	}
	if a.Overlap == "" {
		a.Overlap = sched.OverlapSkip
	}
	if err := sched.CheckOverlap(a.Overlap); err != nil {
		return nil, proto.Errorf(proto.EINVAL, "%v", err)
	}
	expr := strings.TrimSpace(a.Schedule)
	onMsg := expr == proto.ScheduleMessage || expr == proto.ScheduleMessages
	if !onMsg {
		spec, err := sched.Parse(a.Schedule, a.TZ)
		if err != nil {
			return nil, proto.Errorf(proto.EINVAL, "%v (or @message, @messages: on messages)", err)
		}
		expr = spec.String()
	} else if a.TZ != "" || a.CatchUp {
		return nil, proto.Errorf(proto.EINVAL, "a job on messages has no time zone and no catch-up (it catches up on the messages that came while oxiosd was down)")
	}
	switch {
	case len(a.Command) == 0 && strings.TrimSpace(a.Task) == "":
		return nil, proto.Errorf(proto.EINVAL, "nothing to run: give a task (an LLM run) or a command after --")
	case len(a.Command) > 0 && a.Task != "":
		return nil, proto.Errorf(proto.EINVAL, "give a task or a command, not both")
	default:
		if err := runnable(a.Command); err != nil {
			return nil, err
		}
	}
	return &File{proto.Job{
		Name: a.Name, Agent: a.Agent, Schedule: expr, TZ: a.TZ, Priority: a.Priority,
		Overlap: a.Overlap, CatchUp: a.CatchUp, Command: a.Command, Task: a.Task,
		Created: now.UTC().Truncate(time.Second), CreatedBy: uid,
	}}, nil
}

// Hooks are what the table needs of the kernel.
type Hooks struct {
	// Commit makes ch (nil: none) and its entry durable, and publishes
	// data under key (the event is the op's).
	Commit func(ctx context.Context, ch *state.Change, e *audit.Entry, key string, data any) error
	// Spawn starts a run of j's agent on behalf of the daemon: task is
	// the run's task, spec the args audited, env the run's extra
	// environment. A nil Run with an error: none started.
	Spawn func(j *File, task string, spec []byte, env []string) (sched.Run, error)
	// Status is the exit status of run, nil while it runs or unknown.
	Status func(run string) *int
	// MsgIDs are the ids of agent's messages after after ("": all).
	MsgIDs func(agent, after string) []string
	Log    *slog.Logger
	// UID is the daemon's uid: firings are audited as the daemon's.
	UID uint32
}

// Table is every agent's jobs. Its lock orders changes to the jobs and
// their files: it is held across the commit of each, so that a firing
// cannot write back the file of a job removed meanwhile.
type Table struct {
	mu   sync.Mutex
	jobs Map
	s    *sched.Scheduler
	h    Hooks
	// msgMu serializes the firings of message jobs; msgRuns: the run of
	// each batch job while it runs (under msgMu).
	msgMu   sync.Mutex
	msgRuns map[string]sched.Run
	stopped bool // under msgMu: no more message firings
}

// Map is where the jobs are kept, by name. Each may delete the job it
// is given.
type Map interface {
	Get(name string) *File // nil if none
	Put(j *File)
	Delete(name string)
	Each(fn func(j *File))
	Len() int
}

// ByName is a Map: the jobs in a map by name.
type ByName map[string]*File

func (m ByName) Get(name string) *File { return m[name] }
func (m ByName) Put(j *File)           { m[j.Name] = j }
func (m ByName) Delete(name string)    { delete(m, name) }
func (m ByName) Len() int              { return len(m) }
func (m ByName) Each(fn func(*File)) {
	for _, j := range m {
		fn(j)
	}
}

// Store is where Start finds the jobs: the state store, whose agents'
// sys spaces hold their job files (Dir).
type Store interface {
	Agents() []string
	List(ref, prefix string) ([]proto.StateRecord, error)
	Load(ref, key string) ([]byte, proto.StateRecord, error)
}

// NewTable returns the table of jobs; until Start, every call is
// refused with ESHUTDOWN.
func NewTable(h Hooks) *Table {
	return &Table{h: h}
}

// Lock holds the table: no job changes or fires until Unlock (a
// removal of an agent holds it while the agent's jobs go; a fork while
// it picks the names of its copies and adds them). The methods of Held
// are those to call meanwhile, from any goroutine the holder waits for:
// the kernel forks on its committer, so the fork's caller holds the
// table first and then waits for the committer, as a schedule add
// does (holding the table on the committer would leave each waiting for
// the other).
func (t *Table) Lock() *Held {
	t.mu.Lock()
	return &Held{t: t}
}

// Held is the table while Lock holds it.
type Held struct{ t *Table }

// Unlock lets go of the table.
func (h *Held) Unlock() { h.t.mu.Unlock() }

// Taken reports whether the table has a job named name.
func (h *Held) Taken(name string) bool {
	return h.t.jobs != nil && h.t.jobs.Get(name) != nil
}

// Adopt adds the jobs of a fork (ForkCopy, disabled: none is armed),
// but one whose name is taken, and none before Start.
func (h *Held) Adopt(copies []*File) {
	for _, j := range copies {
		if h.t.jobs != nil && h.t.jobs.Get(j.Name) == nil {
			h.t.jobs.Put(j)
		}
	}
}

// Start loads the jobs of every agent of st into jobs and starts firing
// them (clock nil: the system clock).
func (t *Table) Start(clock sched.Clock, jobs Map, st Store) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.s != nil {
		return errors.New("scheduler already started")
	}
	t.s = sched.New(clock, sched.Hooks{Fire: t.fire, Skip: t.skip})
	t.jobs = jobs
	t.msgRuns = map[string]sched.Run{}
	for _, agent := range st.Agents() {
		ref := state.Ref(state.SpaceSys, agent)
		recs, err := st.List(ref, Dir)
		if err != nil {
			continue
		}
		for _, r := range recs {
			key := r.Key
			name, ok := strings.CutSuffix(strings.TrimPrefix(key, Dir+"/"), ".json")
			if !ok || strings.Contains(name, "/") {
				continue
			}
			if err := t.load(agent, name, key, func(key string) ([]byte, error) {
				b, _, err := st.Load(ref, key)
				return b, err
			}); err != nil {
				t.h.Log.Warn("schedule not loaded", "agent", agent, "file", key, "err", err)
			}
		}
	}
	t.s.Start()
	if n := t.jobs.Len(); n > 0 {
		t.h.Log.Info("schedules loaded", "jobs", n)
	}
	// Message jobs catch up on what came while oxiosd was down.
	seen := map[string]bool{}
	t.jobs.Each(func(j *File) {
		if j.OnMsg() && !j.Disabled && !seen[j.Agent] {
			seen[j.Agent] = true
			go t.FireMsgs(j.Agent)
		}
	})
	return nil
}

func (t *Table) load(agent, name, key string, load func(key string) ([]byte, error)) error {
	b, err := load(key)
	if err != nil {
		return err
	}
	var j File
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Name != name || j.Agent != agent {
		return fmt.Errorf("the file names job %q of agent %q", j.Name, j.Agent)
	}
	if dup := t.jobs.Get(name); dup != nil {
		return fmt.Errorf("job %q exists for agent %q too", name, dup.Agent)
	}
	if err := t.arm(&j); err != nil {
		return err
	}
	t.jobs.Put(&j)
	return nil
}

// Running reports whether the scheduler runs.
func (t *Table) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.s != nil
}

// arm hands j to the clock's scheduler, unless it is disabled or fires
// on messages (FireMsgs fires those).
func (t *Table) arm(j *File) error {
	if j.Disabled || j.OnMsg() {
		return nil
	}
	sj, err := schedJob(j)
	if err != nil {
		return err
	}
	return t.s.Add(sj)
}

func schedJob(j *File) (sched.Job, error) {
	spec, err := sched.Parse(j.Schedule, j.TZ)
	if err != nil {
		return sched.Job{}, err
	}
	sj := sched.Job{Name: j.Name, Spec: spec, Overlap: j.Overlap, CatchUp: j.CatchUp}
	if j.LastDue != nil {
		sj.LastDue = *j.LastDue
	}
	return sj, nil
}

// Stop stops firing (at Close, before the runs end).
func (t *Table) Stop() {
	t.msgMu.Lock()
	t.stopped = true
	t.msgMu.Unlock()
	t.mu.Lock()
	s := t.s
	t.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}

// record is j as a record, with where it stands now.
func (t *Table) record(j *File) proto.JobRecord {
	rec := proto.JobRecord{Type: proto.RecordJob, Job: j.Job}
	if t.s != nil {
		if st, ok := t.s.Status(j.Name); ok {
			if !st.Next.IsZero() {
				n := st.Next.UTC()
				rec.Next = &n
			}
			rec.Running, rec.Pending = st.Running, st.Pending
		}
	}
	if j.LastRun != "" && rec.Running != j.LastRun {
		if st := t.h.Status(j.LastRun); st != nil {
			rec.LastStatus = st
		}
	}
	what := j.Task
	if len(j.Command) > 0 {
		what = strings.Join(j.Command, " ")
	}
	tz := j.TZ
	if tz == "" {
		tz = "local time"
	}
	rec.Text = fmt.Sprintf("%s: %s (%s) for %s: %s", j.Name, j.Schedule, tz, j.Agent, what)
	if j.OnMsg() {
		rec.Text = fmt.Sprintf("%s: on %s for %s: %s", j.Name, strings.TrimPrefix(j.Schedule, "@"), j.Agent, what)
	}
	if j.Disabled {
		rec.Text += " (disabled: ox-schedule enable " + j.Name + ")"
	}
	return rec
}

func (t *Table) ready() *proto.Error {
	if t.s == nil {
		return proto.Errorf(proto.ESHUTDOWN, "the scheduler is not running")
	}
	return nil
}

// lastMsg is the id of agent's last message, "" if none.
func (t *Table) lastMsg(agent string) string {
	if ids := t.h.MsgIDs(agent, ""); len(ids) > 0 {
		return ids[len(ids)-1]
	}
	return ""
}

// MaxPerAgent is how many jobs one agent has at most. A run may add its
// own agent's jobs; without a bound it could add thousands firing every
// minute, each a run.
const MaxPerAgent = 64

// Add commits and arms the new job j (New made it), as who. An agent
// that has MaxPerAgent jobs already is refused (EDQUOT).
func (t *Table) Add(ctx context.Context, who audit.Actor, j *File, raw []byte) (proto.JobRecord, error) {
	if j.OnMsg() {
		// Only messages that come from now on fire it.
		j.LastMsg = t.lastMsg(j.Agent)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.ready(); err != nil {
		return proto.JobRecord{}, err
	}
	if old := t.jobs.Get(j.Name); old != nil {
		return proto.JobRecord{}, proto.Errorf(proto.EEXIST, "job %q exists (of agent %s): ox-schedule rm %s first, or choose another name", j.Name, old.Agent, j.Name)
	}
	n := 0
	t.jobs.Each(func(o *File) {
		if o.Agent == j.Agent {
			n++
		}
	})
	if n >= MaxPerAgent {
		return proto.JobRecord{}, proto.Errorf(proto.EDQUOT, "agent %s has %d jobs, the most an agent has: ox-schedule rm one first (ox-schedule ls -a %s)", j.Agent, n, j.Agent)
	}
	e := &audit.Entry{Actor: who, Op: proto.OpScheduleAdd, Target: j.Agent + ":" + j.Name, Args: audit.ArgsDigest(raw)}
	if err := t.h.Commit(ctx, j.Change(), e, j.Name, nil); err != nil {
		return proto.JobRecord{}, err
	}
	t.jobs.Put(j)
	if err := t.arm(j); err != nil {
		return proto.JobRecord{}, proto.AsError(err)
	}
	return t.record(j), nil
}

// Gate checks that the caller may do op on a job of agent (the kernel's
// gate, with the job's name as the key).
type Gate func(agent string) error

// job returns the job name (of agent, if given) if gate lets the caller
// act on its agent. The lock is held.
func (t *Table) job(name, agent string, gate Gate) (*File, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if agent != "" {
		if err := gate(agent); err != nil {
			return nil, err
		}
	}
	if err := t.ready(); err != nil {
		return nil, err
	}
	j := t.jobs.Get(name)
	if j == nil || (agent != "" && j.Agent != agent) {
		return nil, proto.Errorf(proto.ENOENT, "no job %q (ox-schedule ls lists the jobs)", name)
	}
	if err := gate(j.Agent); err != nil {
		return nil, err
	}
	return j, nil
}

// Enable enables a disabled job (or with a.Disable disables one: it
// stays, and does not fire).
func (t *Table) Enable(ctx context.Context, who audit.Actor, a proto.ScheduleEnableArgs, raw []byte, gate Gate) (proto.JobRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, err := t.job(a.Name, a.Agent, gate)
	if err != nil {
		return proto.JobRecord{}, err
	}
	if j.Disabled == a.Disable {
		return t.record(j), nil
	}
	verb := "enable"
	if a.Disable {
		verb = "disable"
	}
	next := *j
	next.Disabled = a.Disable
	if !a.Disable && next.OnMsg() {
		// Enabled, it fires on the messages that come from now on.
		if id := t.lastMsg(next.Agent); id != "" {
			next.LastMsg = id
		}
	}
	e := &audit.Entry{Actor: who, Op: proto.OpScheduleEnable, Target: j.Agent + ":" + j.Name + " " + verb, Args: audit.ArgsDigest(raw)}
	if err := t.h.Commit(ctx, next.Change(), e, j.Name, nil); err != nil {
		return proto.JobRecord{}, err
	}
	*j = next
	if a.Disable {
		t.s.Remove(j.Name)
	} else if err := t.arm(j); err != nil {
		return proto.JobRecord{}, proto.AsError(err)
	}
	return t.record(j), nil
}

// Rm removes a job; a run it started goes on.
func (t *Table) Rm(ctx context.Context, who audit.Actor, a proto.ScheduleArgs, raw []byte, gate Gate) (proto.JobRecord, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j, err := t.job(a.Name, a.Agent, gate)
	if err != nil {
		return proto.JobRecord{}, err
	}
	rec := t.record(j)
	ch := j.Change()
	ch.Value, ch.Delete = nil, true
	e := &audit.Entry{Actor: who, Op: proto.OpScheduleRm, Target: j.Agent + ":" + j.Name, Args: audit.ArgsDigest(raw)}
	if err := t.h.Commit(ctx, ch, e, j.Name, nil); err != nil {
		return proto.JobRecord{}, err
	}
	t.jobs.Delete(j.Name)
	t.s.Remove(j.Name)
	rec.Next, rec.Pending, rec.Deleted = nil, false, true
	return rec, nil
}

// RemoveAgent forgets the jobs of a removed agent.
func (h *Held) RemoveAgent(agent string) {
	t := h.t
	if t.jobs == nil {
		return
	}
	t.jobs.Each(func(j *File) {
		if j.Agent == agent {
			t.jobs.Delete(j.Name)
			t.s.Remove(j.Name)
		}
	})
}

// List returns the records of the jobs (of agent, if given) whose agent
// visible accepts, by name.
func (t *Table) List(agent string, visible func(agent string) bool) ([]proto.JobRecord, error) {
	t.mu.Lock()
	if err := t.ready(); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	var recs []proto.JobRecord
	t.jobs.Each(func(j *File) {
		if (agent == "" || j.Agent == agent) && visible(j.Agent) {
			recs = append(recs, t.record(j))
		}
	})
	t.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	return recs, nil
}

// RunNow fires a job now, once, whatever its schedule (its next time
// stays). EBUSY if its last run still runs and its overlap is not allow.
func (t *Table) RunNow(a proto.ScheduleArgs, gate Gate) (sched.Run, error) {
	t.mu.Lock()
	j, err := t.job(a.Name, a.Agent, gate)
	s := t.s
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	r, err := s.RunNow(j.Name)
	var busy *sched.BusyError
	switch {
	case errors.Is(err, sched.ErrNotFound):
		return nil, proto.Errorf(proto.ENOENT, "no job %q (ox-schedule ls lists the jobs)", a.Name)
	case errors.As(err, &busy):
		return nil, proto.Errorf(proto.EBUSY, "job %q: its last run %s still runs and its overlap is %s (ox-wait %s, or ox-kill it)", j.Name, busy.Run, j.Overlap, busy.Run)
	case err != nil:
		return nil, err
	}
	return r, nil
}

// daemon is the actor of a firing: the daemon, on behalf of agent.
func (t *Table) daemon(agent string) audit.Actor {
	return audit.Actor{UID: t.h.UID, PID: int32(os.Getpid()), Agent: agent}
}

// fire is the scheduler's Fire hook: a run.spawn of the job's agent,
// then the schedule.fire entry naming the run, which the same commit
// records in the job's file as its last firing.
func (t *Table) fire(f sched.Firing) (sched.Run, error) {
	t.mu.Lock()
	j := t.jobs.Get(f.Job)
	var cp File
	if j != nil {
		cp = *j
	}
	t.mu.Unlock()
	if j == nil {
		return nil, proto.Errorf(proto.ENOENT, "no job %q", f.Job)
	}
	spec, _ := json.Marshal(&cp)
	r, err := t.h.Spawn(&cp, cp.Task, spec, []string{"OXIOS_SCHEDULE=" + cp.Name})
	id := ""
	if r != nil {
		id = r.ID()
	}
	t.recordFiring(t.daemon(cp.Agent), f, id, proto.Result(err))
	if err != nil {
		t.h.Log.Warn("scheduled run not started", "job", f.Job, "agent", cp.Agent, "err", err)
		return nil, err
	}
	return r, nil
}

// skip is the scheduler's Skip hook: the firing is audited with EBUSY,
// naming the run that still runs.
func (t *Table) skip(f sched.Firing, busy sched.Run) {
	t.mu.Lock()
	j := t.jobs.Get(f.Job)
	t.mu.Unlock()
	if j == nil {
		return
	}
	id := ""
	if busy != nil {
		id = busy.ID()
	}
	t.recordFiring(t.daemon(j.Agent), f, id, proto.EBUSY)
}

// recordFiring appends the schedule.fire entry of a firing (result ok,
// or why it did not start a run) and keeps it in the job's file. The
// entry's target is AGENT:NAME RUN.
func (t *Table) recordFiring(who audit.Actor, f sched.Firing, run, result string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	j := t.jobs.Get(f.Job)
	if j == nil {
		return
	}
	now := time.Now().UTC()
	if f.Msg != "" {
		j.LastMsg = f.Msg
	} else if !f.Manual {
		d := f.Due.UTC()
		j.LastDue = &d
	}
	if result == "ok" {
		j.LastFired, j.LastRun = &now, run
	}
	target := j.Agent + ":" + j.Name
	if run != "" {
		target += " " + run
	}
	rec := t.record(j)
	rec.Run = run
	due := f.Due.UTC()
	rec.Due = &due
	switch {
	case f.Msg != "":
		rec.Fired = "message"
	case f.Manual:
		rec.Fired = "manual"
	case f.CatchUp:
		rec.Fired = "catch-up"
	case f.Queued:
		rec.Fired = "queued"
	default:
		rec.Fired = "schedule"
	}
	if run != "" {
		rec.Running = run
	}
	if result != "ok" {
		rec.Run = ""
	}
	args, _ := json.Marshal(struct {
		Due   time.Time `json:"due"`
		Fired string    `json:"fired"`
		Msg   string    `json:"msg,omitempty"`
	}{due, rec.Fired, f.Msg})
	e := &audit.Entry{Actor: who, Op: proto.OpScheduleFire, Target: target, Args: audit.ArgsDigest(args), Result: result}
	// The file changes when the schedule moves or a run started; a
	// manual run that failed changes nothing.
	var ch *state.Change
	if !f.Manual || result == "ok" {
		ch = j.Change()
	}
	// The key as a replay from the audit log has it: NAME RUN.
	if err := t.h.Commit(context.Background(), ch, e, strings.TrimPrefix(target, j.Agent+":"), &rec); err != nil {
		t.h.Log.Warn("schedule firing not recorded", "job", j.Name, "err", err)
	}
}

// MsgArrived fires agent's message jobs, in the background, when a
// message came for agent and the table runs.
func (t *Table) MsgArrived(agent string) {
	if t.Running() {
		go t.FireMsgs(agent)
	}
}

// FireMsgs fires agent's message jobs on the messages after the last
// each fired on: a run per message (@message), or one run for all of
// them while none of the job runs (@messages; the run's end looks
// again). Called on each message put into agent's inbox and at start.
func (t *Table) FireMsgs(agent string) {
	t.msgMu.Lock()
	defer t.msgMu.Unlock()
	if t.stopped {
		return
	}
	t.mu.Lock()
	var jobs []File
	t.jobs.Each(func(j *File) {
		if j.Agent == agent && j.OnMsg() && !j.Disabled {
			jobs = append(jobs, *j)
		}
	})
	t.mu.Unlock()
	for _, j := range jobs {
		ids := t.h.MsgIDs(agent, j.LastMsg)
		if len(ids) == 0 {
			continue
		}
		if j.Schedule == proto.ScheduleMessage {
			for _, id := range ids {
				t.fireMsg(&j, id, 1)
			}
			continue
		}
		if r := t.msgRuns[j.Name]; r != nil {
			select {
			case <-r.Done():
			default:
				continue // its end fires the next batch
			}
		}
		if r := t.fireMsg(&j, ids[len(ids)-1], len(ids)); r != nil {
			t.msgRuns[j.Name] = r
			go func() {
				<-r.Done()
				t.FireMsgs(agent)
			}()
		}
	}
}

// fireMsg starts a run of message job j for message id (the last of n),
// and records the firing, which moves the job past id whatever came of
// it (a refused spawn is not retried at each message).
func (t *Table) fireMsg(j *File, id string, n int) sched.Run {
	spec, _ := json.Marshal(j)
	task := j.Task
	if task != "" {
		task += fmt.Sprintf("\n\n(%d new message(s) in your inbox, the last %s: receive them with your message tools.)", n, id)
	}
	r, err := t.h.Spawn(j, task, spec, []string{"OXIOS_SCHEDULE=" + j.Name, "OXIOS_MSG=" + id})
	runID := ""
	if r != nil {
		runID = r.ID()
	}
	t.recordFiring(t.daemon(j.Agent), sched.Firing{Job: j.Name, Due: time.Now(), Msg: id}, runID, proto.Result(err))
	j.LastMsg = id
	if err != nil {
		t.h.Log.Warn("run on a message not started", "job", j.Name, "agent", j.Agent, "msg", id, "err", err)
		return nil
	}
	return r
}

// ForkCopy is the disabled copy, for the fork named fork, of the job in
// val: named FORK.JOB, its history cleared. nil when the file does not
// read or the name is too long or taken (the copy is then left out).
func ForkCopy(val []byte, fork string, taken func(name string) bool) *File {
	var j File
	if json.Unmarshal(val, &j) != nil {
		return nil
	}
	name := fork + "." + j.Name
	if CheckName(name) != nil || taken(name) {
		return nil
	}
	j.Name, j.Agent, j.Disabled = name, fork, true
	j.LastDue, j.LastFired, j.LastRun, j.LastMsg = nil, nil, "", ""
	j.Created = time.Now().UTC().Truncate(time.Second)
	return &j
}
