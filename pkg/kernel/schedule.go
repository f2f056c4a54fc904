package kernel

import (
	"context"
	"os"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/sched"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
)

// Schedules (issue 8): the syscalls of the jobs that start runs of an
// agent on a cron schedule or on messages. The jobs, their files and
// their firings are pkg/sched/jobs'; the timing is pkg/sched's.

// sysSchedules is the folder of an agent's jobs in its sys space.
const sysSchedules = jobs.Dir

// StartScheduler loads the jobs of every agent and starts firing them
// (clock nil: the system clock). oxiosd calls it once the socket serves,
// so that a catch-up run at start can reach the daemon.
func (k *Kernel) StartScheduler(clock sched.Clock) error {
	return k.sched.Start(clock, jobs.ByName{}, k.state)
}

// openScheduler makes the table of jobs; StartScheduler starts it.
func (k *Kernel) openScheduler() {
	k.sched = jobs.NewTable(jobs.Hooks{
		Commit: func(ctx context.Context, ch *state.Change, e *audit.Entry, key string, data any) error {
			return k.submit(ctx, &tx{change: ch, entry: e, key: key, data: data}, true)
		},
		Spawn:  k.spawnJob,
		Status: func(id string) *int { return k.sup.Status(id) },
		MsgIDs: func(agent, after string) []string { return k.inbox.IDs(agent, after) },
		Log:    k.log,
		UID:    k.uid,
	})
}

// spawnJob is a firing's run.spawn, on behalf of the job's agent: the
// spawn is audited as the daemon's, naming the agent.
func (k *Kernel) spawnJob(j *jobs.File, task string, spec []byte, env []string) (sched.Run, error) {
	c := &Cred{UID: k.uid, GID: uint32(os.Getgid()), PID: int32(os.Getpid()), Admin: true, Agent: j.Agent}
	_, r, err := k.spawn(context.Background(), c, proto.SpawnArgs{Agent: j.Agent, Command: j.Command, Task: task, Priority: j.Priority}, spec, env)
	if r == nil {
		return nil, err
	}
	return r, err
}

// stopScheduler stops firing (at Close, before the runs end).
func (k *Kernel) stopScheduler() { k.sched.Stop() }

// jobGate is the gate of op on a job name of an agent.
func (k *Kernel) jobGate(op string, c *Cred, name string, raw []byte) jobs.Gate {
	return func(agent string) error {
		if err := k.gate(call{op: op, c: c, agent: agent, key: name, raw: raw}); err != nil {
			return err
		}
		return nil
	}
}

// runnable checks what a new job runs (runspec.Runnable), with the
// model endpoint configured now.
func (k *Kernel) runnable(command []string) error {
	return runspec.Runnable(command, k.liveCfg().LLM.BaseURL)
}

// ScheduleAdd adds a job: the caller must be able to act on its agent
// (the admin, a run of the agent, a user granted it).
func (k *Kernel) ScheduleAdd(ctx context.Context, c *Cred, a proto.ScheduleAddArgs, raw []byte) (proto.JobRecord, error) {
	return sysScheduleAdd.Call(k, ctx, c, a, raw)
}

func (k *Kernel) scheduleAdd(ctx context.Context, c *Cred, a proto.ScheduleAddArgs, raw []byte) (proto.JobRecord, error) {
	j, err := jobs.New(a, c.UID, time.Now(), k.runnable)
	if err != nil {
		return proto.JobRecord{}, err
	}
	rec, err := k.sched.Add(ctx, c.Actor(), j, raw)
	if perr := proto.AsError(err); err != nil && perr.Code == proto.EDQUOT {
		k.auditDenied(c, proto.OpScheduleAdd, a.Agent+":"+a.Name, raw, perr.Code)
	}
	return rec, err
}

// ScheduleEnable enables a disabled job (or with a.Disable disables one:
// it stays, and does not fire).
func (k *Kernel) ScheduleEnable(ctx context.Context, c *Cred, a proto.ScheduleEnableArgs, raw []byte) (proto.JobRecord, error) {
	return sysScheduleEnable.Call(k, ctx, c, a, raw)
}

func (k *Kernel) scheduleEnable(ctx context.Context, c *Cred, a proto.ScheduleEnableArgs, raw []byte) (proto.JobRecord, error) {
	return k.sched.Enable(ctx, c.Actor(), a, raw, k.jobGate(proto.OpScheduleEnable, c, a.Name, raw))
}

// ScheduleRm removes a job; a run it started goes on.
func (k *Kernel) ScheduleRm(ctx context.Context, c *Cred, a proto.ScheduleArgs, raw []byte) (proto.JobRecord, error) {
	return sysScheduleRm.Call(k, ctx, c, a, raw)
}

func (k *Kernel) scheduleRm(ctx context.Context, c *Cred, a proto.ScheduleArgs, raw []byte) (proto.JobRecord, error) {
	return k.sched.Rm(ctx, c.Actor(), a, raw, k.jobGate(proto.OpScheduleRm, c, a.Name, raw))
}

// ScheduleList calls emit with each job c may see, by name.
func (k *Kernel) ScheduleList(ctx context.Context, c *Cred, a proto.ScheduleListArgs, raw []byte, emit func(*proto.JobRecord) error) error {
	return sysScheduleList.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) scheduleList(ctx context.Context, c *Cred, a proto.ScheduleListArgs, raw []byte, emit func(*proto.JobRecord) error) error {
	recs, err := k.sched.List(a.Agent, c.Lists(""))
	if err != nil {
		return err
	}
	return proto.EmitAll(recs, emit)
}

// ScheduleRun fires a job now, once, whatever its schedule (its next
// time stays). EBUSY if its last run still runs and its overlap is not
// allow.
func (k *Kernel) ScheduleRun(ctx context.Context, c *Cred, a proto.ScheduleArgs, raw []byte) (proto.RunRecord, error) {
	return sysScheduleRun.Call(k, ctx, c, a, raw)
}

func (k *Kernel) scheduleRun(ctx context.Context, c *Cred, a proto.ScheduleArgs, raw []byte) (proto.RunRecord, error) {
	r, err := k.sched.RunNow(a, k.jobGate(proto.OpScheduleRun, c, a.Name, raw))
	if err != nil {
		return proto.RunRecord{}, err
	}
	return r.(spawned).Record(), nil
}
