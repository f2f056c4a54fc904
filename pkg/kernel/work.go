package kernel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/supervisor"
	"github.com/oxios/oxios/pkg/work"
)

// The syscalls of runs' work on host folders (issue 48): a run spawned
// with a folder (ox-spawn --work) sees it at /work through an overlay,
// its changes are harvested when it exits (package work), and an
// operator reviews them (work.diff), applies them to the folder
// (work.apply, refused on conflicts unless forced) or discards them
// (work.discard), audited with the patch's digest.

// openWork opens the store of pending work, DATA/work-pending: what was
// running when oxiosd stopped is lost, what expired is removed.
func (k *Kernel) openWork() {
	k.works = work.Store{Root: filepath.Join(k.cfg.Data, "work-pending")}
	if err := k.works.Recover(); err != nil {
		k.log.Warn("pending work", "err", err)
	}
	k.expireWork()
	k.sup.Harvest = k.harvestWork
}

func (k *Kernel) expireWork() {
	gone, err := k.works.Expire(time.Now(), k.cfg.Runs.WorkTTL())
	if err != nil {
		k.log.Warn("expiring pending work", "err", err)
	}
	for _, run := range gone {
		k.log.Info("pending work expired", "run", run)
	}
}

// workFolder is the folder a spawn asks to work on, resolved
// (runspec.WorkFolder); "" when it asks none.
func (k *Kernel) workFolder(dir string) (string, *proto.Error) {
	if dir == "" {
		return "", nil
	}
	return runspec.WorkFolder(k.box, dir)
}

// beginWork records that run id of agent starts on dir.
func (k *Kernel) beginWork(id, agent, dir string) error {
	if dir == "" {
		return nil
	}
	if err := k.works.Begin(id, agent, dir, time.Now()); err != nil {
		return proto.Errorf(proto.EIO, "recording the work of %s: %v", id, err)
	}
	return nil
}

// harvestWork reads what run r changed in its folder out of its upper
// layer, before its workspace is removed (supervisor.Harvest).
func (k *Kernel) harvestWork(r *supervisor.Run) {
	spec := r.Spec()
	if spec.Sandbox == nil || spec.Sandbox.Overlay == nil {
		return
	}
	upper := r.Upper()
	if upper == "" {
		k.log.Warn("the run's work was not kept: its shim never sent the folder of its upper layer", "run", spec.ID)
		return
	}
	m, err := k.works.Harvest(spec.ID, upper, time.Now())
	if err != nil {
		k.log.Warn("the run's work was not kept", "run", spec.ID, "err", err)
		return
	}
	k.log.Info("run's work kept", "run", spec.ID, "changes", len(m.Changes), "patch", m.Digest)
}

// workRecord is the record of m.
func workRecord(m *work.Meta) proto.WorkRecord {
	rec := proto.WorkRecord{Type: proto.RecordWork, Run: m.Run, Agent: m.Agent, Dir: m.Dir, State: m.State,
		Started: m.Started, Ended: m.Ended, Done: m.Done, Changes: len(m.Changes), Digest: m.Digest}
	n := 0
	for _, c := range m.Changes {
		if c.Op != work.OpMkdir && c.Op != work.OpRmdir {
			n++
		}
	}
	rec.Changes = n
	rec.Text = fmt.Sprintf("%s %s %s %s, %d files", m.Run, m.Agent, m.State, m.Dir, n)
	return rec
}

// workOf is run's work, which c may act on under op.
func (k *Kernel) workOf(c *Cred, op, run string, raw []byte) (*work.Meta, error) {
	m, err := k.works.Load(run)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, proto.Errorf(proto.ENOENT, "run %q has no work on a folder (ox-work ls lists those that have)", run)
	}
	if err != nil {
		return nil, proto.Errorf(proto.EIO, "%v", err)
	}
	if err := k.gate(call{op: op, c: c, agent: m.Agent, key: run, raw: raw}); err != nil {
		return nil, err
	}
	return m, nil
}

// WorkList calls emit with the work of each run c may see (of a.Agent,
// when given), oldest first.
func (k *Kernel) WorkList(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte, emit func(*proto.WorkRecord) error) error {
	return sysWorkList.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) workList(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte, emit func(*proto.WorkRecord) error) error {
	k.expireWork()
	all, err := k.works.List()
	if err != nil {
		return proto.Errorf(proto.EIO, "%v", err)
	}
	sees := c.Lists(a.Agent)
	for _, m := range all {
		if !sees(m.Agent) {
			continue
		}
		rec := workRecord(m)
		if err := emit(&rec); err != nil {
			return err
		}
	}
	return nil
}

// WorkDiff is run a.Run's work with its patch (a.Stat: its diffstat).
func (k *Kernel) WorkDiff(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	return sysWorkDiff.Call(k, ctx, c, a, raw)
}

func (k *Kernel) workDiff(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	m, err := k.workOf(c, proto.OpWorkDiff, a.Run, raw)
	if err != nil {
		return proto.WorkRecord{}, err
	}
	rec := workRecord(m)
	if m.State == work.Running || m.State == work.Lost {
		return rec, proto.Errorf(proto.ESRCH, "the work of %s is %s: no patch yet", m.Run, m.State)
	}
	patch, err := k.works.Patch(m.Run)
	if err != nil {
		return rec, proto.Errorf(proto.EIO, "the patch of %s: %v", m.Run, err)
	}
	if a.Stat {
		st, err := work.Stat(patch)
		if err != nil {
			return rec, proto.Errorf(proto.EIO, "%v", err)
		}
		rec.Stat = string(st)
		return rec, nil
	}
	rec.Patch = string(patch)
	return rec, nil
}

// WorkView is a.Path of the view of run a.Run's pending work: its folder
// as it is, with what the run changed over it (work.View), a folder's
// entries or a file's content. Whoever may diff the work may view it.
func (k *Kernel) WorkView(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkView, error) {
	return sysWorkView.Call(k, ctx, c, a, raw)
}

func (k *Kernel) workView(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkView, error) {
	v := proto.WorkView{Type: proto.RecordWorkView, Run: a.Run, Path: a.Path}
	m, err := k.workOf(c, proto.OpWorkView, a.Run, raw)
	if err != nil {
		return v, err
	}
	if m.State != work.Pending {
		return v, proto.Errorf(proto.ESRCH, "the work of %s is %s: only pending work has a view", m.Run, m.State)
	}
	rel := a.Path
	if rel == "" {
		rel = "."
	}
	ents, data, dir, err := k.works.View(m, rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return v, proto.Errorf(proto.ENOENT, "no %s in the work of %s", a.Path, m.Run)
	case errors.Is(err, work.ErrTooBig):
		return v, proto.Errorf(proto.E2BIG, "%s of the work of %s: %v (%d bytes; ox-work diff %s has it)", a.Path, m.Run, err, work.MaxViewFile, m.Run)
	case err != nil:
		return v, proto.Errorf(proto.EIO, "%s of the work of %s: %v", a.Path, m.Run, err)
	}
	v.Dir, v.Data = dir, data
	for _, e := range ents {
		v.Entries = append(v.Entries, proto.WorkEntry{Name: e.Name, Dir: e.Dir, Size: e.Size, Mode: e.Mode})
	}
	return v, nil
}

// WorkApply writes run a.Run's pending work to its folder, audited with
// its patch's digest. Files of the folder that changed under those the
// run changed refuse it (EEXIST, naming each), unless a.Force.
func (k *Kernel) WorkApply(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	return sysWorkApply.Call(k, ctx, c, a, raw)
}

func (k *Kernel) workApply(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	return k.workDone(ctx, c, proto.OpWorkApply, a, raw)
}

// WorkDiscard throws run a.Run's pending work away, audited with its
// patch's digest.
func (k *Kernel) WorkDiscard(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	return sysWorkDiscard.Call(k, ctx, c, a, raw)
}

func (k *Kernel) workDiscard(ctx context.Context, c *Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	return k.workDone(ctx, c, proto.OpWorkDiscard, a, raw)
}

func (k *Kernel) workDone(ctx context.Context, c *Cred, op string, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error) {
	k.workMu.Lock()
	defer k.workMu.Unlock()
	m, err := k.workOf(c, op, a.Run, raw)
	if err != nil {
		return proto.WorkRecord{}, err
	}
	if m.State != work.Pending {
		return workRecord(m), proto.Errorf(proto.ESRCH, "the work of %s is %s, not pending", m.Run, m.State)
	}
	target := fmt.Sprintf("%s:%s %s patch %s", m.Agent, m.Run, m.Dir, m.Digest)
	now := time.Now()
	if op == proto.OpWorkApply {
		conflicts, err := k.works.Apply(m, a.Force, now)
		if err != nil {
			k.auditWork(ctx, c, op, target+" => "+audit.Clip(err.Error(), 200), raw, proto.EIO)
			return workRecord(m), proto.Errorf(proto.EIO, "%v", err)
		}
		if len(conflicts) > 0 {
			rec := workRecord(m)
			var names []string
			for _, cf := range conflicts {
				rec.Conflicts = append(rec.Conflicts, cf.String())
				names = append(names, cf.Path)
			}
			k.auditWork(ctx, c, op, target+" conflicts "+audit.Clip(strings.Join(names, " "), 200), raw, proto.EEXIST)
			return rec, proto.Errorf(proto.EEXIST, "the work of %s was not applied: the folder changed under what the run changed since it started:\n  %s\n(ox-work diff %s shows the run's patch; ox-work apply --force %s writes over them)",
				m.Run, strings.Join(rec.Conflicts, "\n  "), m.Run, m.Run)
		}
		if a.Force {
			target += " forced"
		}
	} else if err := k.works.Discard(m, now); err != nil {
		return workRecord(m), proto.Errorf(proto.EIO, "%v", err)
	}
	if err := k.auditWork(ctx, c, op, target, raw, "ok"); err != nil {
		return workRecord(m), err
	}
	return workRecord(m), nil
}

// auditWork audits op on a run's work with result.
func (k *Kernel) auditWork(ctx context.Context, c *Cred, op, target string, raw []byte, result string) error {
	e := &audit.Entry{Actor: c.Actor(), Op: op, Target: target, Args: audit.ArgsDigest(raw), Result: result}
	return k.submit(ctx, &tx{entry: e}, true)
}
