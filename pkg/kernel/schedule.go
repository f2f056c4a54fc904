package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Schedules (issue 8): jobs that start runs of an agent on a cron
// schedule. A job is the file agents/AGENT/sys/schedules/NAME.json of the
// versioned tree, so ox-commit versions it and it survives restarts; it
// keeps the last due time it handled, so that a job asking for catch-up
// runs once at start when oxiosd was down at its time. The timing is
// pkg/sched's; each firing is a run.spawn of the job's agent, the same
// syscall path as ox-spawn (policy, budget, audit), followed by a
// schedule.fire entry naming the run, published as schedule.fired. Job
// names are unique across agents (ox-schedule rm NAME needs no agent).

// sysSchedules is the folder of an agent's jobs in its sys space.
const sysSchedules = "schedules"

func jobKey(name string) string { return sysSchedules + "/" + name + ".json" }

// EventScheduleFired is the event of a firing that started a run.
const EventScheduleFired = "schedule.fired"

// jobFile is a job's file.
type jobFile struct {
	Name      string     `json:"name"`
	Agent     string     `json:"agent"`
	Schedule  string     `json:"schedule"`
	TZ        string     `json:"tz,omitempty"`
	Priority  int        `json:"priority,omitempty"`
	Overlap   string     `json:"overlap"`
	CatchUp   bool       `json:"catch_up,omitempty"`
	Command   []string   `json:"command,omitempty"`
	Task      string     `json:"task,omitempty"`
	Created   time.Time  `json:"created"`
	CreatedBy uint32     `json:"created_by"`
	LastDue   *time.Time `json:"last_due,omitempty"`
	LastFired *time.Time `json:"last_fired,omitempty"`
	LastRun   string     `json:"last_run,omitempty"`
	// Disabled: not fired until enabled (a fork's copy of a job).
	Disabled bool `json:"disabled,omitempty"`
	// LastMsg: the last message a message job fired on.
	LastMsg string `json:"last_msg,omitempty"`
}

// onMsg reports whether j fires on messages rather than on a clock.
func (j *jobFile) onMsg() bool {
	return j.Schedule == proto.ScheduleMessage || j.Schedule == proto.ScheduleMessages
}

// schedState is the kernel's side of the scheduler. mu orders changes to
// the jobs and their files: it is held across the commit of each, so
// that a firing cannot write back the file of a job removed meanwhile.
type schedState struct {
	mu   sync.Mutex
	jobs map[string]*jobFile
	s    *sched.Scheduler
	// msgMu serializes the firings of message jobs; msgRuns: the run of
	// each batch job while it runs (under msgMu).
	msgMu   sync.Mutex
	msgRuns map[string]sched.Run
	stopped bool // under msgMu: no more message firings
}

// checkJobName: job names follow the rules of agent names.
func checkJobName(name string) *proto.Error {
	if name == "" {
		return proto.Errorf(proto.EINVAL, "job name is empty (give one with --name)")
	}
	if err := proto.CheckAgent(name); err != nil {
		err.Message = strings.Replace(err.Message, "agent name", "job name", 1)
		return err
	}
	return nil
}

// StartScheduler loads the jobs of every agent and starts firing them
// (clock nil: the system clock). oxiosd calls it once the socket serves,
// so that a catch-up run at start can reach the daemon.
func (k *Kernel) StartScheduler(clock sched.Clock) error {
	s := sched.New(clock, sched.Hooks{Fire: k.fireJob, Skip: k.skipJob})
	k.sched.mu.Lock()
	defer k.sched.mu.Unlock()
	if k.sched.s != nil {
		return errors.New("scheduler already started")
	}
	k.sched.s = s
	k.sched.jobs = map[string]*jobFile{}
	k.sched.msgRuns = map[string]sched.Run{}
	for _, agent := range k.state.Agents() {
		ref := state.Ref(state.SpaceSys, agent)
		recs, err := k.state.List(ref, sysSchedules)
		if err != nil {
			continue
		}
		for _, rec := range recs {
			name, ok := strings.CutSuffix(strings.TrimPrefix(rec.Key, sysSchedules+"/"), ".json")
			if !ok || strings.Contains(name, "/") {
				continue
			}
			if err := k.loadJob(ref, agent, name, rec.Key); err != nil {
				k.log.Warn("schedule not loaded", "agent", agent, "file", rec.Key, "err", err)
			}
		}
	}
	s.Start()
	if n := len(k.sched.jobs); n > 0 {
		k.log.Info("schedules loaded", "jobs", n)
	}
	// Message jobs catch up on what came while oxiosd was down.
	seen := map[string]bool{}
	for _, j := range k.sched.jobs {
		if j.onMsg() && !j.Disabled && !seen[j.Agent] {
			seen[j.Agent] = true
			go k.fireMsgJobs(j.Agent)
		}
	}
	return nil
}

func (k *Kernel) loadJob(ref, agent, name, key string) error {
	b, _, err := k.state.Load(ref, key)
	if err != nil {
		return err
	}
	var j jobFile
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.Name != name || j.Agent != agent {
		return fmt.Errorf("the file names job %q of agent %q", j.Name, j.Agent)
	}
	if _, dup := k.sched.jobs[name]; dup {
		return fmt.Errorf("job %q exists for agent %q too", name, k.sched.jobs[name].Agent)
	}
	if err := k.arm(&j); err != nil {
		return err
	}
	k.sched.jobs[name] = &j
	return nil
}

// arm hands j to the clock's scheduler, unless it is disabled or fires
// on messages (the kernel fires those: msgArrived).
func (k *Kernel) arm(j *jobFile) error {
	if j.Disabled || j.onMsg() {
		return nil
	}
	sj, err := schedJob(j)
	if err != nil {
		return err
	}
	return k.sched.s.Add(sj)
}

func schedJob(j *jobFile) (sched.Job, error) {
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

// stopScheduler stops firing (at Close, before the runs end).
func (k *Kernel) stopScheduler() {
	k.sched.msgMu.Lock()
	k.sched.stopped = true
	k.sched.msgMu.Unlock()
	k.sched.mu.Lock()
	s := k.sched.s
	k.sched.mu.Unlock()
	if s != nil {
		s.Stop()
	}
}

// jobRecord is j as a record, with where it stands now.
func (k *Kernel) jobRecord(j *jobFile) proto.JobRecord {
	rec := proto.JobRecord{
		Type: proto.RecordJob, Name: j.Name, Agent: j.Agent, Schedule: j.Schedule, TZ: j.TZ,
		Priority: j.Priority, Overlap: j.Overlap, CatchUp: j.CatchUp, Command: j.Command, Task: j.Task,
		Created: j.Created, LastDue: j.LastDue, LastFired: j.LastFired, LastRun: j.LastRun,
		Disabled: j.Disabled, LastMsg: j.LastMsg,
	}
	if k.sched.s != nil {
		if st, ok := k.sched.s.Status(j.Name); ok {
			if !st.Next.IsZero() {
				n := st.Next.UTC()
				rec.Next = &n
			}
			rec.Running, rec.Pending = st.Running, st.Pending
		}
	}
	if j.LastRun != "" && rec.Running != j.LastRun {
		if r, ok := k.sup.Get(j.LastRun); ok {
			if rr := r.Record(); rr.Status != nil {
				rec.LastStatus = rr.Status
			}
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
	if j.onMsg() {
		rec.Text = fmt.Sprintf("%s: on %s for %s: %s", j.Name, strings.TrimPrefix(j.Schedule, "@"), j.Agent, what)
	}
	if j.Disabled {
		rec.Text += " (disabled: ox-schedule enable " + j.Name + ")"
	}
	return rec
}

func (j *jobFile) change() *state.Change {
	v, _ := json.MarshalIndent(j, "", "  ")
	return &state.Change{Agent: j.Agent, Space: state.SpaceSys, Key: jobKey(j.Name), Value: append(v, '\n')}
}

func (k *Kernel) schedReady() *proto.Error {
	if k.sched.s == nil {
		return proto.Errorf(proto.ESHUTDOWN, "the scheduler is not running")
	}
	return nil
}

// ScheduleAdd adds a job: the caller must be able to act on its agent
// (the admin, a run of the agent, a user granted it).
func (k *Kernel) ScheduleAdd(ctx context.Context, c *Cred, a proto.ScheduleAddArgs, raw []byte) (proto.JobRecord, error) {
	if err := k.gate(call{op: proto.OpScheduleAdd, c: c, agent: a.Agent, key: a.Name, raw: raw}); err != nil {
		return proto.JobRecord{}, err
	}
	if err := checkJobName(a.Name); err != nil {
		return proto.JobRecord{}, err
	}
	if a.Overlap == "" {
		a.Overlap = sched.OverlapSkip
	}
	if err := sched.CheckOverlap(a.Overlap); err != nil {
		return proto.JobRecord{}, proto.Errorf(proto.EINVAL, "%v", err)
	}
	expr := strings.TrimSpace(a.Schedule)
	onMsg := expr == proto.ScheduleMessage || expr == proto.ScheduleMessages
	if !onMsg {
		spec, err := sched.Parse(a.Schedule, a.TZ)
		if err != nil {
			return proto.JobRecord{}, proto.Errorf(proto.EINVAL, "%v (or @message, @messages: on messages)", err)
		}
		expr = spec.String()
	} else if a.TZ != "" || a.CatchUp {
		return proto.JobRecord{}, proto.Errorf(proto.EINVAL, "a job on messages has no time zone and no catch-up (it catches up on the messages that came while oxiosd was down)")
	}
	switch {
	case len(a.Command) == 0 && strings.TrimSpace(a.Task) == "":
		return proto.JobRecord{}, proto.Errorf(proto.EINVAL, "nothing to run: give a task (an LLM run) or a command after --")
	case len(a.Command) > 0 && a.Task != "":
		return proto.JobRecord{}, proto.Errorf(proto.EINVAL, "give a task or a command, not both")
	case len(a.Command) == 0 && k.liveCfg().LLM.BaseURL == "":
		// Accepted, it would fail at every firing, seen only in the log.
		return proto.JobRecord{}, proto.Errorf(proto.ENOEXEC, "no model endpoint is configured for LLM runs, so an LLM job would fail at every firing: set base_url in the [llm] section of oxios.toml, or give a command after --")
	case len(a.Command) > 0:
		if _, err := lookPath(a.Command[0]); err != nil {
			return proto.JobRecord{}, err
		}
	}
	j := &jobFile{
		Name: a.Name, Agent: a.Agent, Schedule: expr, TZ: a.TZ, Priority: a.Priority,
		Overlap: a.Overlap, CatchUp: a.CatchUp, Command: a.Command, Task: a.Task,
		Created: time.Now().UTC().Truncate(time.Second), CreatedBy: c.UID,
	}
	if onMsg {
		// Only messages that come from now on fire it.
		if ms := k.talk.inbox.List(a.Agent, "", false); len(ms) > 0 {
			j.LastMsg = ms[len(ms)-1].ID
		}
	}
	k.sched.mu.Lock()
	defer k.sched.mu.Unlock()
	if err := k.schedReady(); err != nil {
		return proto.JobRecord{}, err
	}
	if old, ok := k.sched.jobs[a.Name]; ok {
		return proto.JobRecord{}, proto.Errorf(proto.EEXIST, "job %q exists (of agent %s): ox-schedule rm %s first, or choose another name", a.Name, old.Agent, a.Name)
	}
	t := &tx{change: j.change(), entry: &audit.Entry{Actor: actor(c), Op: proto.OpScheduleAdd, Target: a.Agent + ":" + a.Name, Args: audit.ArgsDigest(raw)}, key: a.Name}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.JobRecord{}, err
	}
	k.sched.jobs[a.Name] = j
	if err := k.arm(j); err != nil {
		return proto.JobRecord{}, ioError(err)
	}
	return k.jobRecord(j), nil
}

// ScheduleEnable enables a disabled job (or with a.Disable disables one:
// it stays, and does not fire).
func (k *Kernel) ScheduleEnable(ctx context.Context, c *Cred, a proto.ScheduleEnableArgs, raw []byte) (proto.JobRecord, error) {
	k.sched.mu.Lock()
	defer k.sched.mu.Unlock()
	j, err := k.job(c, proto.OpScheduleEnable, proto.ScheduleArgs{Name: a.Name, Agent: a.Agent}, raw)
	if err != nil {
		return proto.JobRecord{}, err
	}
	if j.Disabled == a.Disable {
		return k.jobRecord(j), nil
	}
	verb := "enable"
	if a.Disable {
		verb = "disable"
	}
	next := *j
	next.Disabled = a.Disable
	if !a.Disable && next.onMsg() {
		// Enabled, it fires on the messages that come from now on.
		if ms := k.talk.inbox.List(next.Agent, "", false); len(ms) > 0 {
			next.LastMsg = ms[len(ms)-1].ID
		}
	}
	t := &tx{change: next.change(), entry: &audit.Entry{Actor: actor(c), Op: proto.OpScheduleEnable, Target: j.Agent + ":" + j.Name + " " + verb, Args: audit.ArgsDigest(raw)}, key: j.Name}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.JobRecord{}, err
	}
	*j = next
	if a.Disable {
		k.sched.s.Remove(j.Name)
	} else if err := k.arm(j); err != nil {
		return proto.JobRecord{}, ioError(err)
	}
	return k.jobRecord(j), nil
}

// job returns the job a.Name if c may act on its agent.
func (k *Kernel) job(c *Cred, op string, a proto.ScheduleArgs, raw []byte) (*jobFile, error) {
	if err := checkJobName(a.Name); err != nil {
		return nil, err
	}
	if a.Agent != "" {
		if err := k.gate(call{op: op, c: c, agent: a.Agent, key: a.Name, raw: raw}); err != nil {
			return nil, err
		}
	}
	if err := k.schedReady(); err != nil {
		return nil, err
	}
	j, ok := k.sched.jobs[a.Name]
	if !ok || (a.Agent != "" && j.Agent != a.Agent) {
		return nil, proto.Errorf(proto.ENOENT, "no job %q (ox-schedule ls lists the jobs)", a.Name)
	}
	if err := k.gate(call{op: op, c: c, agent: j.Agent, key: a.Name, raw: raw}); err != nil {
		return nil, err
	}
	return j, nil
}

// ScheduleRm removes a job; a run it started goes on.
func (k *Kernel) ScheduleRm(ctx context.Context, c *Cred, a proto.ScheduleArgs, raw []byte) (proto.JobRecord, error) {
	k.sched.mu.Lock()
	defer k.sched.mu.Unlock()
	j, err := k.job(c, proto.OpScheduleRm, a, raw)
	if err != nil {
		return proto.JobRecord{}, err
	}
	rec := k.jobRecord(j)
	ch := j.change()
	ch.Value, ch.Delete = nil, true
	t := &tx{change: ch, entry: &audit.Entry{Actor: actor(c), Op: proto.OpScheduleRm, Target: j.Agent + ":" + j.Name, Args: audit.ArgsDigest(raw)}, key: j.Name}
	if err := k.submit(ctx, t, true); err != nil {
		return proto.JobRecord{}, err
	}
	delete(k.sched.jobs, j.Name)
	k.sched.s.Remove(j.Name)
	rec.Next, rec.Pending, rec.Deleted = nil, false, true
	return rec, nil
}

// ScheduleList calls emit with each job c may see, by name.
func (k *Kernel) ScheduleList(ctx context.Context, c *Cred, a proto.ScheduleListArgs, raw []byte, emit func(*proto.JobRecord) error) error {
	if a.Agent != "" {
		if err := k.gate(call{op: proto.OpScheduleList, c: c, agent: a.Agent, raw: raw}); err != nil {
			return err
		}
	}
	k.sched.mu.Lock()
	if err := k.schedReady(); err != nil {
		k.sched.mu.Unlock()
		return err
	}
	var recs []proto.JobRecord
	for _, j := range k.sched.jobs {
		if (a.Agent != "" && j.Agent != a.Agent) || k.authorize(c, j.Agent) != nil {
			continue
		}
		recs = append(recs, k.jobRecord(j))
	}
	k.sched.mu.Unlock()
	sort.Slice(recs, func(i, j int) bool { return recs[i].Name < recs[j].Name })
	for i := range recs {
		if err := emit(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// ScheduleRun fires a job now, once, whatever its schedule (its next
// time stays). EBUSY if its last run still runs and its overlap is not
// allow.
func (k *Kernel) ScheduleRun(ctx context.Context, c *Cred, a proto.ScheduleArgs, raw []byte) (proto.RunRecord, error) {
	k.sched.mu.Lock()
	j, err := k.job(c, proto.OpScheduleRun, a, raw)
	s := k.sched.s
	k.sched.mu.Unlock()
	if err != nil {
		return proto.RunRecord{}, err
	}
	r, err := s.RunNow(j.Name)
	var busy *sched.BusyError
	switch {
	case errors.Is(err, sched.ErrNotFound):
		return proto.RunRecord{}, proto.Errorf(proto.ENOENT, "no job %q (ox-schedule ls lists the jobs)", a.Name)
	case errors.As(err, &busy):
		return proto.RunRecord{}, proto.Errorf(proto.EBUSY, "job %q: its last run %s still runs and its overlap is %s (ox-wait %s, or ox-kill it)", j.Name, busy.Run, j.Overlap, busy.Run)
	case err != nil:
		return proto.RunRecord{}, err
	}
	return r.(spawned).Record(), nil
}

// fireJob is the scheduler's Fire hook: a run.spawn of the job's agent,
// then the schedule.fire entry naming the run, which the same commit
// records in the job's file as its last firing.
func (k *Kernel) fireJob(f sched.Firing) (sched.Run, error) {
	k.sched.mu.Lock()
	j := k.sched.jobs[f.Job]
	var cp jobFile
	if j != nil {
		cp = *j
	}
	k.sched.mu.Unlock()
	if j == nil {
		return nil, proto.Errorf(proto.ENOENT, "no job %q", f.Job)
	}
	// The kernel fires on behalf of the job's agent: the spawn is
	// audited as the daemon's, naming the agent.
	c := &Cred{UID: k.uid, GID: uint32(os.Getgid()), PID: int32(os.Getpid()), Admin: true, Agent: cp.Agent}
	spec, _ := json.Marshal(&cp)
	_, r, err := k.spawn(context.Background(), c, proto.SpawnArgs{Agent: cp.Agent, Command: cp.Command, Task: cp.Task, Priority: cp.Priority}, spec,
		[]string{"OXIOS_SCHEDULE=" + cp.Name})
	id := ""
	if r != nil {
		id = r.ID()
	}
	k.recordFiring(c, f, id, errCode(err))
	if err != nil {
		k.log.Warn("scheduled run not started", "job", f.Job, "agent", cp.Agent, "err", err)
		return nil, err
	}
	return r, nil
}

// skipJob is the scheduler's Skip hook: the firing is audited with
// EBUSY, naming the run that still runs.
func (k *Kernel) skipJob(f sched.Firing, busy sched.Run) {
	k.sched.mu.Lock()
	j := k.sched.jobs[f.Job]
	k.sched.mu.Unlock()
	if j == nil {
		return
	}
	id := ""
	if busy != nil {
		id = busy.ID()
	}
	c := &Cred{UID: k.uid, PID: int32(os.Getpid()), Admin: true, Agent: j.Agent}
	k.recordFiring(c, f, id, proto.EBUSY)
}

// recordFiring appends the schedule.fire entry of a firing (result ok,
// or why it did not start a run) and keeps it in the job's file. The
// entry's target is AGENT:NAME RUN.
func (k *Kernel) recordFiring(c *Cred, f sched.Firing, run, result string) {
	k.sched.mu.Lock()
	defer k.sched.mu.Unlock()
	j := k.sched.jobs[f.Job]
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
	rec := k.jobRecord(j)
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
	t := &tx{
		entry: &audit.Entry{Actor: actor(c), Op: proto.OpScheduleFire, Target: target, Args: audit.ArgsDigest(args), Result: result},
		// The key as a replay from the audit log has it: NAME RUN.
		key: strings.TrimPrefix(target, j.Agent+":"), data: &rec,
	}
	// The file changes when the schedule moves or a run started; a
	// manual run that failed changes nothing.
	if !f.Manual || result == "ok" {
		t.change = j.change()
	}
	if err := k.submit(context.Background(), t, true); err != nil {
		k.log.Warn("schedule firing not recorded", "job", j.Name, "err", err)
	}
}

// fireMsgJobs fires agent's message jobs on the messages after the last
// each fired on: a run per message (@message), or one run for all of
// them while none of the job runs (@messages; the run's end looks
// again). Called on each message put into agent's inbox and at start.
func (k *Kernel) fireMsgJobs(agent string) {
	k.sched.msgMu.Lock()
	defer k.sched.msgMu.Unlock()
	if k.sched.stopped {
		return
	}
	k.sched.mu.Lock()
	var jobs []jobFile
	for _, j := range k.sched.jobs {
		if j.Agent == agent && j.onMsg() && !j.Disabled {
			jobs = append(jobs, *j)
		}
	}
	k.sched.mu.Unlock()
	for _, j := range jobs {
		msgs := k.talk.inbox.List(agent, j.LastMsg, false)
		if len(msgs) == 0 {
			continue
		}
		if j.Schedule == proto.ScheduleMessage {
			for _, m := range msgs {
				k.fireMsg(&j, m.ID, 1)
			}
			continue
		}
		if r := k.sched.msgRuns[j.Name]; r != nil {
			select {
			case <-r.Done():
			default:
				continue // its end fires the next batch
			}
		}
		if r := k.fireMsg(&j, msgs[len(msgs)-1].ID, len(msgs)); r != nil {
			k.sched.msgRuns[j.Name] = r
			go func() {
				<-r.Done()
				k.fireMsgJobs(agent)
			}()
		}
	}
}

// fireMsg starts a run of message job j for message id (the last of n),
// and records the firing, which moves the job past id whatever came of
// it (a refused spawn is not retried at each message).
func (k *Kernel) fireMsg(j *jobFile, id string, n int) sched.Run {
	c := &Cred{UID: k.uid, GID: uint32(os.Getgid()), PID: int32(os.Getpid()), Admin: true, Agent: j.Agent}
	spec, _ := json.Marshal(j)
	task := j.Task
	if task != "" {
		task += fmt.Sprintf("\n\n(%d new message(s) in your inbox, the last %s: receive them with your message tools.)", n, id)
	}
	_, r, err := k.spawn(context.Background(), c, proto.SpawnArgs{Agent: j.Agent, Command: j.Command, Task: task, Priority: j.Priority}, spec,
		[]string{"OXIOS_SCHEDULE=" + j.Name, "OXIOS_MSG=" + id})
	runID := ""
	if r != nil {
		runID = r.ID()
	}
	k.recordFiring(c, sched.Firing{Job: j.Name, Due: time.Now(), Msg: id}, runID, errCode(err))
	j.LastMsg = id
	if err != nil {
		k.log.Warn("run on a message not started", "job", j.Name, "agent", j.Agent, "msg", id, "err", err)
		return nil
	}
	return r
}
