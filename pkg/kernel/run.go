package kernel

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/oxios/oxios/pkg/admit"
	"github.com/oxios/oxios/pkg/agenttree"
	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runq"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/supervisor"
)

// The syscalls of runs (issue 6): a run is a process of an agent, started
// and reaped by the supervisor; the kernel decides what may run, under
// which limits, and records each start and end on the audit log.

// The kernel's files of an agent, in its sys space.
const (
	sysPolicy = agenttree.Policy
	sysBudget = agenttree.Budget
)

func (k *Kernel) openSupervisor() error {
	s, err := supervisor.Open(filepath.Join(k.cfg.Data, "runs"), k.cfg.Runs.Keep, k.cfg.Runs.Cgroups, k.log)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	s.OnExit = k.runExited
	k.sup = s
	k.runs = supervisor.Resolver{S: s}
	k.openSandbox()
	k.openWork()
	return nil
}

// ensureAgent creates agent, with the default policy, if it has no
// policy yet. The creation is audited (agent.create) and durable before
// the spawn that asked for it goes on.
func (k *Kernel) ensureAgent(ctx context.Context, c *Cred, agent string) error {
	ref := state.Ref(state.SpaceSys, agent)
	if _, err := k.state.Stat(ref, sysPolicy); err == nil {
		return nil
	}
	ch, e := agenttree.Creation(agent, c.Actor())
	err := k.submit(ctx, &tx{change: ch, entry: e}, true)
	k.policyChanged(agent)
	return err
}

// RunSpawn starts a run of a.Agent: a.Command as a process, or the LLM
// runner with a.Task. The agent is created with the default policy if it
// does not exist. The start is durable on the audit log before the reply.
//
// Beyond the limits of admission (admit.go) the run is queued: the record
// returned is then in state queued, and the run starts when a slot frees.
func (k *Kernel) RunSpawn(ctx context.Context, c *Cred, a proto.SpawnArgs, raw []byte) (proto.RunRecord, error) {
	return sysRunSpawn.Call(k, ctx, c, a, raw)
}

// runSpawn gates itself (spawn): the work folder is resolved once,
// before the gate, which checks what the run then gets.
func (k *Kernel) runSpawn(ctx context.Context, c *Cred, a proto.SpawnArgs, raw []byte) (proto.RunRecord, error) {
	rec, _, err := k.spawn(ctx, c, a, raw, nil)
	return rec, err
}

// spawn is RunSpawn with sysEnv, OXIOS_ variables oxiosd adds (a
// scheduled run's OXIOS_SCHEDULE); it returns the run too, started or
// queued.
func (k *Kernel) spawn(ctx context.Context, c *Cred, a proto.SpawnArgs, raw []byte, sysEnv []string) (proto.RunRecord, spawned, error) {
	var none proto.RunRecord
	dir, werr := k.workFolder(a.Work)
	if werr != nil {
		return none, nil, werr
	}
	if c.Home != nil && c.Node != "" {
		// Placed here by the agent's home: the caller may act on the
		// agent, and then the agent is its home's guest (home.go),
		// before its policy is asked below.
		if err := k.gate(call{op: proto.OpRunSpawn, c: c, agent: a.Agent, raw: raw}); err != nil {
			return none, nil, err
		}
		if err := k.adoptHome(ctx, c, a.Agent, raw); err != nil {
			return none, nil, err
		}
	}
	if err := k.gate(call{op: proto.OpRunSpawn, c: c, agent: a.Agent, key: dir, policy: askWork, raw: raw}); err != nil {
		return none, nil, err
	}
	fail := func(err *proto.Error) (proto.RunRecord, spawned, error) {
		k.auditDenied(c, proto.OpRunSpawn, a.Agent, raw, err.Code)
		return none, nil, err
	}
	if err := runspec.CheckSpawn(a); err != nil {
		return none, nil, err
	}
	argv, aerr, refused := runspec.Argv(a, k.liveCfg().LLM, k.cfg.Runs.Runner)
	if aerr != nil {
		if refused {
			return fail(aerr)
		}
		return none, nil, aerr
	}
	if err := k.ensureAgent(ctx, c, a.Agent); err != nil {
		return none, nil, err
	}
	pol, err := k.policyOf(a.Agent)
	if err != nil {
		return none, nil, err
	}
	runLim, qerr := k.budgets.SpawnCheck(a.Agent, pol)
	if qerr != nil {
		return fail(qerr)
	}
	id := runspec.NewID(k.sup.Has) // an id no run has
	home := ""
	if c.Home != nil && c.Node != "" && c.Home.Run != "" && (k.fleet == nil || c.Node != k.fleet.Name()) {
		// Placed by its home, which chose the id and charges by it (a
		// run a node places on itself is not away, nor charged).
		placed, perr := k.placedID(c)
		if perr != nil {
			return fail(perr)
		}
		id, home = placed, c.Node
	}
	run := runspec.Run{ID: id, Dir: runspec.WorkDir(k.cfg.Data, a.Agent, id), Work: dir, Argv: argv, Policy: pol, Wall: runLim.Wall, Where: k.box.Where(), LLM: k.liveCfg().LLM, SysEnv: sysEnv}
	spec, serr := runspec.Boxed(a, run, k.box, k.cfg.Socket)
	if serr != nil {
		return fail(serr)
	}
	spec.Home = home
	// The policy's version, in the run's record (and so its receipt).
	if _, text, err := k.loadPolicy(a.Agent); err == nil {
		spec.Policy = policy.Record(a.Agent, text).Digest
	}
	if err := k.beginWork(id, a.Agent, dir); err != nil {
		return none, nil, err
	}
	rec, r, err := k.adm.Admit(ctx, spec, c.Actor(), a.Priority, admit.AgentLimit(k.cfg.Runs.MaxPerAgent, pol.Limits.Runs), raw)
	if err != nil {
		if dir != "" {
			k.works.Remove(id)
		}
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code != proto.ESHUTDOWN {
			return fail(pe)
		}
		return none, nil, err
	}
	if r != nil {
		return rec, r, nil
	}
	return rec, k.adm.Follow(rec), nil
}

// runExited records a run's end: on the audit log (the target holds its
// status, runq.Exited) with its wall time charged to the agent's budget.
func (k *Kernel) runExited(r *supervisor.Run) {
	rec := r.Record()
	_, _, _, wall := r.Usage()
	limit, exit, walled := runq.Exited(&rec, k.daemonActor(), r.Digest())
	if rec.Work != "" {
		// The patch of its work, bound to the chain (a receipt names it).
		if m, err := k.works.Load(rec.ID); err == nil && m.Digest != "" {
			exit.Target += " work " + m.Digest
		}
	}
	if limit != nil {
		if err := k.submit(k.record(), &tx{entry: limit}, false); err != nil {
			k.log.Warn("run limit not audited", "run", rec.ID, "err", err)
		}
	}
	t := &tx{entry: exit, agent: rec.Agent, data: &rec}
	// A run its agent's home placed here owes its use to the home, in
	// the write that records its end, durable before the end is told
	// (OnExit returns before the run's waiters hear): all of it for a
	// guest, nothing for this node's own agent of that name, which paid
	// here (the home then only learns that it ended). home.go sends it.
	var owed proto.Budget
	if rec.Home != "" {
		t.done = make(chan struct{})
		if k.homeOf(rec.Agent) == rec.Home {
			tokens, cost, execs, _ := r.Usage()
			owed = proto.Budget{Tokens: tokens, Cost: cost, Wall: wall.Seconds(), Execs: execs}
		}
	}
	err := k.budgets.Owe(rec.Agent, proto.Budget{Wall: wall.Seconds()}, owed, rec.ID, rec.Home, func(value []byte) error {
		t.change = budgetChange(rec.Agent, value)
		return k.submit(k.record(), t, false)
	})
	if err == nil && t.done != nil {
		<-t.done
		err = t.err
	}
	if err != nil {
		k.log.Warn("run exit not audited", "run", rec.ID, "err", err)
	} else if rec.Home != "" {
		k.owe(rec.Agent, rec.ID, budget.Owed{Home: rec.Home, Used: owed})
	}
	if walled != nil {
		if err := k.submit(k.record(), &tx{entry: walled, agent: rec.Agent, data: &rec}, false); err != nil {
			k.log.Warn("wall budget end not audited", "run", rec.ID, "err", err)
		}
	}
	k.release(rec.Agent)
}

// run returns a run that c may act on.
func (k *Kernel) run(c *Cred, op, id string, raw []byte) (*supervisor.Run, error) {
	r, ok := k.sup.Get(id)
	if !ok {
		return nil, proto.Errorf(proto.ESRCH, "no run %q (ox-ps --all lists the runs)", id)
	}
	if err := k.gate(call{op: op, c: c, agent: r.Agent(), key: id, raw: raw}); err != nil {
		return nil, err
	}
	return r, nil
}

// RunAttach calls emit with each record of a run (one JSON object), from
// its first, until its exit record or ctx ends. A queued run's record
// comes first, and the run's own records once it starts.
func (k *Kernel) RunAttach(ctx context.Context, c *Cred, id string, raw []byte, emit func([]byte) error) error {
	_, err := sysRunAttach.Call(k, ctx, c, attaching{id, emit}, raw)
	return err
}

// attaching is what run.attach takes: the run, and where its records
// go (each already JSON).
type attaching struct {
	run  string
	emit func([]byte) error
}

// runAttach gates itself (lookup): the agent is the run's.
func (k *Kernel) runAttach(ctx context.Context, c *Cred, a attaching, raw []byte) (struct{}, error) {
	r, p, err := k.lookup(c, proto.OpRunAttach, a.run, raw)
	if err != nil {
		return struct{}{}, err
	}
	return struct{}{}, runq.Attach(ctx, r, p, a.emit)
}

// RunWait calls emit with the exit record of each run, in the order they
// exit; a queued run is waited for until it has started and exited (or
// was killed in the queue).
func (k *Kernel) RunWait(ctx context.Context, c *Cred, ids []string, raw []byte, emit func(*proto.ExitRecord) error) error {
	return sysRunWait.Stream(k, ctx, c, proto.RunsArgs{Runs: ids}, raw, emit)
}

// runWait gates itself (lookup): the agent is each run's.
func (k *Kernel) runWait(ctx context.Context, c *Cred, a proto.RunsArgs, raw []byte, emit func(*proto.ExitRecord) error) error {
	ids := a.Runs
	if len(ids) == 0 {
		return proto.Errorf(proto.EINVAL, "no runs to wait for")
	}
	runs := make([]runq.Waited, len(ids))
	for i, id := range ids {
		r, p, err := k.lookup(c, proto.OpRunWait, id, raw)
		if err != nil {
			return err
		}
		runs[i] = runq.Waited{Run: r, Pending: p}
	}
	return runq.Wait(ctx, runs, emit)
}

// RunKill sends a signal to each run's process group; emit gets each
// run's record after it. A queued run that is sent a signal that ends a
// process leaves the queue, its exit recorded (128+N) as if it had run.
func (k *Kernel) RunKill(ctx context.Context, c *Cred, a proto.KillArgs, raw []byte, emit func(*proto.RunRecord) error) error {
	return sysRunKill.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) runKill(ctx context.Context, c *Cred, a proto.KillArgs, raw []byte, emit func(*proto.RunRecord) error) error {
	sig, err := supervisor.ParseSignal(a.Signal)
	if err != nil {
		return proto.Errorf(proto.EINVAL, "%v", err)
	}
	if len(a.Runs) == 0 {
		return proto.Errorf(proto.EINVAL, "no runs to signal")
	}
	for _, id := range a.Runs {
		r, p, err := k.lookup(c, proto.OpRunKill, id, raw)
		if err != nil {
			return err
		}
		rec, err := k.adm.SignalAudited(ctx, c.Actor(), r, p, sig, audit.ArgsDigest(raw))
		if err != nil {
			return err
		}
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

// RunPs calls emit with the record of each run c may see: the live ones
// (of a.Agent, when given), then the queued ones in the order they will
// start, and with a.All the ended ones kept too. The resources of a live
// run are sampled now, summed over its processes.
func (k *Kernel) RunPs(ctx context.Context, c *Cred, a proto.PsArgs, raw []byte, emit func(*proto.RunRecord) error) error {
	return sysRunPs.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) runPs(ctx context.Context, c *Cred, a proto.PsArgs, raw []byte, emit func(*proto.RunRecord) error) error {
	return proto.EmitAll(k.runRecords(c, a), emit)
}

// runRecords are the records RunPs lists.
func (k *Kernel) runRecords(c *Cred, a proto.PsArgs) []proto.RunRecord {
	return k.adm.Ps(a.All, c.Lists(a.Agent))
}

// RunsLive is the number of runs not yet exited (for status and tests).
func (k *Kernel) RunsLive() int { return k.sup.Live() }
