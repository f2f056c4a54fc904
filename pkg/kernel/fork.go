package kernel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// Forks. A fork copies an agent (state, memories, policy, budget limits)
// at a commit as a new agent. In git the copy is one graft: the new
// agent's folder points at the tree object of the old one, so the fork
// commit writes the folders on the path agents/NAME and nothing else,
// whatever the agent holds, and both share the history up to the fork
// point (a trailer of the fork commit names it). The live store copies
// the agent at the state now with one record whatever it holds (see
// state.Fork: the copy shares the values, and its files are linked in the
// background); a fork at an older commit writes the files read from git
// as one batch of changes. The budget used
// starts again at zero; schedules are copied disabled (a fork that woke
// up on its own clock would act twice for one job), each as FORK.JOB (job
// names are unique across agents): ox-schedule enable FORK.JOB once it
// should run.

// Trailers of a fork commit.
const (
	TrailerForkOf    = "Oxios-Fork-Of"
	TrailerForkPoint = "Oxios-Fork-Point"
)

// agentExists reports whether agent has any file, live or committed.
func (k *Kernel) agentExists(agent string) (bool, error) {
	for _, sp := range state.Spaces {
		if recs, err := k.state.List(state.Ref(sp, agent), ""); err == nil && len(recs) > 0 {
			return true, nil
		}
	}
	head, err := k.ver.repo.Head()
	if err != nil || head == "" {
		return false, err
	}
	t, err := k.ver.repo.Folder("HEAD", "agents/"+agent)
	return t != "", err
}

// Fork copies a.Agent at a.Rev (default: its state now, committed first)
// as the new agent a.Name.
func (k *Kernel) Fork(ctx context.Context, c *Cred, a proto.ForkArgs, raw []byte) (proto.ForkRecord, error) {
	tgt := a.Name + ":fork " + a.Agent
	deny := func(err *proto.Error) (proto.ForkRecord, error) {
		k.auditDenied(c, proto.OpAgentFork, strings.ToValidUTF8(tgt, "?"), raw, err.Code)
		return proto.ForkRecord{}, err
	}
	for _, ag := range []string{a.Agent, a.Name} {
		if err := k.gate(call{op: proto.OpAgentFork, c: c, agent: ag, raw: raw, target: tgt}); err != nil {
			return proto.ForkRecord{}, err
		}
	}
	if a.Name == a.Agent {
		return deny(proto.Errorf(proto.EEXIST, "a fork needs a new name, not %q itself", a.Agent))
	}
	return onCommitter(k, ctx, func() (proto.ForkRecord, error) { return k.forkNow(c, a, raw) })
}

func (k *Kernel) forkNow(c *Cred, a proto.ForkArgs, raw []byte) (proto.ForkRecord, error) {
	tgt := a.Name + ":fork " + a.Agent
	fail := func(err error) (proto.ForkRecord, error) {
		err = versionError(err)
		k.commitAudit(c, proto.OpAgentFork, tgt, raw, errCode(err), "", nil)
		return proto.ForkRecord{}, err
	}
	if exists, err := k.agentExists(a.Name); err != nil {
		return fail(err)
	} else if exists {
		return fail(proto.Errorf(proto.EEXIST, "agent %q exists; pick another name, or remove it first (ox-fork rm %s)", a.Name, a.Name))
	}
	if err := k.rescan(); err != nil {
		return fail(err)
	}
	rev := a.Rev
	if rev == "" {
		// The state now: what is uncommitted of the agent is committed
		// first, so the fork point is a commit like any other (when
		// nothing is, that commit would be empty: it is not made).
		dirty, err := k.ver.paths.Under(agentPrefix(a.Agent))
		if err != nil {
			return fail(err)
		}
		if len(dirty) > 0 {
			if _, err := k.commitNow(c, proto.CommitArgs{Agent: a.Agent, Message: fmt.Sprintf("Commit the state of %s to fork it as %s", a.Agent, a.Name)}, raw); err != nil {
				return fail(err)
			}
		}
		rev = "HEAD"
	}
	point, err := k.ver.repo.Resolve(rev)
	if err != nil {
		return fail(err)
	}
	src := agentPrefix(a.Agent)
	if t, err := k.ver.repo.Folder(point, strings.TrimSuffix(src, "/")); err != nil {
		return fail(err)
	} else if t == "" {
		return fail(proto.Errorf(proto.ENOENT, "agent %q has nothing committed at %s: nothing to fork", a.Agent, rev))
	}
	// At the state now the live store copies the agent (see
	// state.Fork): only the files the fork starts with changed are
	// listed, its budget and its schedules. At an older commit every
	// file is copied from git.
	cow := a.Rev == ""
	list := src
	if cow {
		list = src + state.SpaceSys + "/"
	}
	files, err := k.ver.repo.Files(point, list)
	if err != nil {
		return fail(err)
	}
	now := time.Now().UTC()
	// The live copy, and what the fork's second commit changes against
	// the graft: the budget used reset, the schedules left out.
	short := point[:12]
	fe := &tx{entry: &audit.Entry{Actor: actor(c), Op: proto.OpAgentFork, Target: tgt + " at " + point, Args: audit.ArgsDigest(raw)},
		event: EventAgentForked, agent: a.Name, data: map[string]string{"from": a.Agent, "point": point}}
	if cow {
		fe.fork = &state.Fork{From: a.Agent, To: a.Name, Skip: map[string][]string{state.SpaceSys: {sysSchedules + "/"}}}
	}
	batch := []*tx{fe}
	var after []version.PathChange
	type item struct{ space, key, blob string }
	var items []item
	for p, blob := range files {
		space, _, key, ok := splitSpacePath(p)
		if !ok {
			continue
		}
		job := space == state.SpaceSys && strings.HasPrefix(key, sysSchedules+"/")
		if job {
			after = append(after, version.PathChange{Path: spacePath(space, a.Name, key), Action: version.Deleted})
		}
		if cow && !job && (space != state.SpaceSys || key != sysBudget) {
			continue
		}
		items = append(items, item{space, key, blob})
	}
	// The values: at the state now, from the store (the agent was just
	// committed, so its values are HEAD's, most of them in memory); at an
	// older commit, from git, read in parallel.
	vals := make([][]byte, len(items))
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(items); i += workers {
				it := items[i]
				if cow {
					if v, _, err := k.state.Load(state.Ref(it.space, a.Agent), it.key); err == nil {
						vals[i] = v
						continue
					}
				}
				vals[i], errs[i] = k.ver.repo.ReadBlob(it.blob)
			}
		}()
	}
	wg.Wait()
	var jobs []*jobFile
	for i, it := range items {
		if errs[i] != nil {
			return fail(errs[i])
		}
		val := vals[i]
		if it.space == state.SpaceSys && strings.HasPrefix(it.key, sysSchedules+"/") {
			j := k.forkJob(val, a.Name)
			if j == nil {
				continue
			}
			ch := j.change()
			after = append(after, version.PathChange{Path: spacePath(it.space, a.Name, ch.Key), Action: version.Modified, To: string(ch.Value)})
			batch = append(batch, &tx{change: ch})
			jobs = append(jobs, j)
			continue
		}
		if it.space == state.SpaceSys && it.key == sysBudget {
			var b budgetFile
			if json.Unmarshal(val, &b) == nil {
				b.Used, b.Since = proto.Budget{}, now
				if nv, err := json.Marshal(&b); err == nil {
					val = nv
					after = append(after, version.PathChange{Path: spacePath(it.space, a.Name, it.key), Action: version.Modified, To: string(nv)})
				}
			}
		}
		batch = append(batch, &tx{change: &state.Change{Agent: a.Name, Space: it.space, Key: it.key, Value: val}})
	}
	// The graft and the live copy are made side by side: both sync to
	// disk, neither needs the other. The commits' trailers name the audit
	// log as it is before the fork's own entry, as a commit's do (all it
	// holds was recorded up to there). A crash between the two leaves
	// either the live copy without its commit (the fork's entry, replayed,
	// has the next commit compare everything with HEAD) or the commit
	// without the live copy (NAME exists with no files: ox-fork rm NAME).
	if err := k.audit.Sync(); err != nil {
		return fail(err)
	}
	seq, hash := k.audit.Head()
	trailers := []version.Trailer{
		{Key: TrailerForkOf, Value: a.Agent},
		{Key: TrailerForkPoint, Value: point},
		{Key: TrailerAuditSeq, Value: strconv.FormatUint(seq, 10)},
		{Key: TrailerAuditHash, Value: hash},
	}
	type gitResult struct {
		cm  version.Commit
		err error
	}
	gitDone := make(chan gitResult, 1)
	go func() {
		cm, err := k.forkCommits(c, a, point, src, after, trailers, now)
		gitDone <- gitResult{cm, err}
	}()
	k.commit(batch)
	g := <-gitDone
	for _, t := range batch {
		if t.err != nil {
			if g.err == nil {
				// The graft stands alone: taken back, so that the name is
				// free again.
				if err := k.unfork(c, a.Name, trailers[2:], now); err != nil {
					k.log.Error("fork: taking back the graft of a fork whose live copy failed", "fork", a.Name, "err", err)
				}
			}
			return proto.ForkRecord{}, versionError(fmt.Errorf("forking %s: %w", a.Agent, t.err))
		}
	}
	if cow {
		k.forkMemories(a.Name)
	}
	k.policyChanged(a.Name)
	k.sched.mu.Lock()
	for _, j := range jobs {
		if _, dup := k.sched.jobs[j.Name]; !dup && k.sched.jobs != nil {
			k.sched.jobs[j.Name] = j
		}
	}
	k.sched.mu.Unlock()
	if g.err != nil {
		// The live copy stands without its commit: the next commit
		// compares everything with HEAD and records it.
		k.ver.paths.Lost()
		return proto.ForkRecord{}, versionError(g.err)
	}
	cm := g.cm
	// The live state of the fork and its tree in HEAD are equal now.
	if dirty, err := k.ver.paths.Under(agentPrefix(a.Name)); err == nil {
		k.ver.paths.Clean(dirty)
	}
	n := 0
	for _, sp := range agentSpaces {
		m, _ := k.state.Keys(state.Ref(sp, a.Name))
		n += m
	}
	rec := proto.ForkRecord{
		Type: proto.RecordFork, Agent: a.Name, From: a.Agent, Point: point, Commit: cm.Hash, Files: n,
		AuditSeq: fe.entry.Seq, Time: now.Format(time.RFC3339),
		Text: fmt.Sprintf("forked %s at %s as %s (%d files)", a.Agent, short, a.Name, n),
	}
	return rec, nil
}

// forkCommits makes the fork's commits: the graft of src at point as
// agents/NAME, then the changes after against it (the budget used reset,
// the schedules disabled), if any. It returns the last commit.
func (k *Kernel) forkCommits(c *Cred, a proto.ForkArgs, point, src string, after []version.PathChange, trailers []version.Trailer, now time.Time) (version.Commit, error) {
	gtx, err := k.ver.repo.Begin()
	if err != nil {
		return version.Commit{}, err
	}
	if err := gtx.Graft("agents/"+a.Name, point, strings.TrimSuffix(src, "/")); err != nil {
		gtx.Abort()
		return version.Commit{}, err
	}
	cm, err := gtx.Commit(version.CommitOptions{
		Message:   fmt.Sprintf("Fork %s at %s as %s", a.Agent, point[:12], a.Name),
		Trailers:  trailers,
		Author:    k.signature(c, now),
		Committer: version.Signature{Name: "oxiosd", Email: "oxiosd@localhost", When: now},
	})
	if err != nil || len(after) == 0 {
		return cm, err
	}
	tx2, err := k.ver.repo.Begin()
	if err != nil {
		return cm, err
	}
	for _, ch := range after {
		if ch.Action == version.Deleted {
			err = tx2.Delete(ch.Path)
		} else {
			err = tx2.Put(ch.Path, []byte(ch.To))
		}
		if err != nil {
			tx2.Abort()
			return cm, err
		}
	}
	c2, err := tx2.Commit(version.CommitOptions{
		Message:   fmt.Sprintf("Start %s with no budget used and its schedules disabled", a.Name),
		Trailers:  trailers[2:],
		Author:    k.signature(c, now),
		Committer: version.Signature{Name: "oxiosd", Email: "oxiosd@localhost", When: now},
	})
	switch {
	case errors.Is(err, version.ErrNothingToCommit):
		return cm, nil
	case err != nil:
		return cm, err
	}
	return c2, nil
}

// unfork takes back the graft of a fork whose live copy failed.
func (k *Kernel) unfork(c *Cred, name string, trailers []version.Trailer, now time.Time) error {
	tx, err := k.ver.repo.Begin()
	if err != nil {
		return err
	}
	if err := tx.DeleteTree("agents/" + name); err != nil {
		tx.Abort()
		return err
	}
	_, err = tx.Commit(version.CommitOptions{
		Message:   fmt.Sprintf("Take back the fork %s: its live copy failed", name),
		Trailers:  trailers,
		Author:    k.signature(c, now),
		Committer: version.Signature{Name: "oxiosd", Email: "oxiosd@localhost", When: now},
	})
	return err
}

// forkPoint finds the commit agent was forked at and the agent it was
// forked from, walking agent's history to its fork commit.
func (k *Kernel) forkPoint(agent string) (from, point string, err error) {
	stop := errors.New("found")
	err = k.ver.repo.Log("HEAD", "agents/"+agent, 0, func(cm version.Commit) error {
		var of, at string
		for _, t := range cm.Trailers {
			switch t.Key {
			case TrailerForkOf:
				of = t.Value
			case TrailerForkPoint:
				at = t.Value
			}
		}
		if of != "" && at != "" {
			from, point = of, at
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		return from, point, nil
	}
	if err != nil {
		return "", "", err
	}
	return "", "", proto.Errorf(proto.ENOENT, "agent %q is not a fork; give the agent to compare with (ox-fork diff %s OTHER)", agent, agent)
}

// AgentDiff emits the files that differ between a.Other (or a.Agent's
// fork point) and a.Agent, live state included. The committed trees are
// compared first, skipping what both share, then the uncommitted paths of
// either side are compared by content: the cost is what differs, not the
// size of the agents.
func (k *Kernel) AgentDiff(ctx context.Context, c *Cred, a proto.AgentDiffArgs, raw []byte, emit func(*proto.DiffRecord) error) error {
	if err := k.versionScope(c, proto.OpAgentDiff, a.Agent, raw); err != nil {
		return err
	}
	if a.Other != "" {
		if err := k.versionScope(c, proto.OpAgentDiff, a.Other, raw); err != nil {
			return err
		}
	}
	var out []proto.DiffRecord
	var derr error
	run := func() {
		if derr = k.rescan(); derr != nil {
			return
		}
		head, err := k.ver.repo.Head()
		if err != nil {
			derr = err
			return
		}
		fromAgent, fromRev, live := a.Other, "HEAD", true
		if a.Other == "" {
			if head == "" {
				derr = proto.Errorf(proto.ENOENT, "agent %q is not a fork", a.Agent)
				return
			}
			if fromAgent, fromRev, err = k.forkPoint(a.Agent); err != nil {
				derr = err
				return
			}
			live = false
		}
		changes := map[string]version.PathChange{}
		if head != "" {
			cs, err := k.ver.repo.DiffFolders(fromRev, "agents/"+fromAgent, "HEAD", "agents/"+a.Agent)
			if err != nil {
				derr = err
				return
			}
			for _, ch := range cs {
				changes[ch.Path] = ch
			}
		}
		// The uncommitted paths of either side, compared as they are now.
		rels := map[string]bool{}
		sides := []string{a.Agent}
		if live {
			sides = append(sides, fromAgent)
		}
		for _, ag := range sides {
			ps, err := k.ver.paths.Under(agentPrefix(ag))
			if err != nil {
				derr = err
				return
			}
			for _, p := range ps {
				rels[strings.TrimPrefix(p, agentPrefix(ag))] = true
			}
		}
		for rel := range rels {
			fh, err := k.blobOf(fromRev, fromAgent, rel, live, head != "")
			if err != nil {
				derr = err
				return
			}
			th, err := k.blobOf("HEAD", a.Agent, rel, true, head != "")
			if err != nil {
				derr = err
				return
			}
			ch := version.PathChange{Path: rel, From: fh, To: th, Action: version.Modified}
			switch {
			case fh == th:
				delete(changes, rel)
				continue
			case fh == "":
				ch.Action = version.Added
			case th == "":
				ch.Action = version.Deleted
			}
			changes[rel] = ch
		}
		for _, rel := range sortedKeys(changes) {
			ch := changes[rel]
			d := proto.DiffRecord{Type: proto.RecordDiff, Path: rel, Action: ch.Action}
			if a.Patch {
				if d.Patch, err = k.agentPatch(ch, fromAgent, a.Agent, fromRev, live); err != nil {
					derr = err
					return
				}
			}
			out = append(out, d)
		}
	}
	if err := k.barrier(ctx, run); err != nil {
		return err
	}
	if derr != nil {
		return versionError(derr)
	}
	for i := range out {
		if err := emit(&out[i]); err != nil {
			return err
		}
	}
	return nil
}

// blobOf is the blob hash of agent's file rel ("state/KEY"...): live from
// the store when live and uncommitted, else from rev. "" if none.
func (k *Kernel) blobOf(rev, agent, rel string, live, committed bool) (string, error) {
	v, ok, err := k.contentOf(rev, agent, rel, live, committed)
	if err != nil || !ok {
		return "", err
	}
	return version.BlobHash(v), nil
}

func (k *Kernel) contentOf(rev, agent, rel string, live, committed bool) ([]byte, bool, error) {
	p := agentPrefix(agent) + rel
	if live {
		space, _, key, ok := splitSpacePath(p)
		if !ok {
			return nil, false, nil
		}
		v, _, err := k.state.Load(state.Ref(space, agent), key)
		if err == nil {
			return v, true, nil
		}
		var pe *proto.Error
		if errors.As(err, &pe) && (pe.Code == proto.ENOENT || pe.Code == proto.EISDIR) {
			return nil, false, nil
		}
		return nil, false, err
	}
	if !committed {
		return nil, false, nil
	}
	files, err := k.ver.repo.Files(rev, p)
	if err != nil {
		return nil, false, err
	}
	h, ok := files[p]
	if !ok {
		return nil, false, nil
	}
	v, err := k.ver.repo.ReadBlob(h)
	return v, err == nil, err
}

// agentPatch renders one change between two agents as a unified diff.
func (k *Kernel) agentPatch(ch version.PathChange, fromAgent, toAgent, fromRev string, live bool) (string, error) {
	from, fok, err := k.contentOf(fromRev, fromAgent, ch.Path, live, true)
	if err != nil {
		return "", err
	}
	to, tok, err := k.contentOf("HEAD", toAgent, ch.Path, true, true)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := version.Unified(w, ch.Path, from, to, fok, tok); err != nil {
		return "", err
	}
	w.Flush()
	return b.String(), nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// Events of forks.
const (
	EventAgentForked = "agent.forked"
)

// forkReplayed, called for each audit entry replayed at start: a fork
// whose commit a crash may have cut off leaves the live state ahead of
// HEAD by paths no entry names, so the next commit compares everything
// with HEAD.
func (k *Kernel) forkReplayed(op, result string) {
	if result == "ok" && op == proto.OpAgentFork {
		k.ver.paths.Lost()
	}
}

// forkJob is the disabled copy, for fork, of the job in val: named
// FORK.JOB, its history cleared. nil when the file does not read or the
// name is too long or taken (the copy is then left out).
func (k *Kernel) forkJob(val []byte, fork string) *jobFile {
	var j jobFile
	if json.Unmarshal(val, &j) != nil {
		return nil
	}
	name := fork + "." + j.Name
	if checkJobName(name) != nil {
		return nil
	}
	k.sched.mu.Lock()
	_, taken := k.sched.jobs[name]
	k.sched.mu.Unlock()
	if taken {
		return nil
	}
	j.Name, j.Agent, j.Disabled = name, fork, true
	j.LastDue, j.LastFired, j.LastRun, j.LastMsg = nil, nil, "", ""
	j.Created = time.Now().UTC().Truncate(time.Second)
	return &j
}

// forkMemories builds the recall index of a fork the live store copied
// (see state.Fork), from its memory files, with their expiries.
// Committer only.
func (k *Kernel) forkMemories(agent string) {
	if n, _ := k.state.Keys(state.Ref(state.SpaceMem, agent)); n == 0 {
		return
	}
	es, err := k.mem.Rebuild(agent, k.memSource(), k.auditSeq)
	if err != nil {
		k.log.Error("recall index of a fork not built; it is rebuilt at the next start", "agent", agent, "err", err)
		return
	}
	k.ttl.Add(es...)
}
