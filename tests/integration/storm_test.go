package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// The crash storm (issue 45): workers drive every mutating operation of
// a real oxiosd through its socket, the daemon is killed with SIGKILL at
// a random point, restarted, and each worker's ledger of what was
// acknowledged is checked against what the daemon serves. It reads and
// writes the store only through the socket and the ox-* commands, never
// its files, so that it holds whatever keeps the values underneath.
//
// Each worker owns its agents (stormW and its forks) and calls one
// operation at a time, so at a kill at most one of its operations is in
// flight: after the restart its agents hold exactly the acknowledged
// state, or that with the operation in flight applied whole.

// stormModel is what one agent holds, as acknowledged.
type stormModel struct {
	state map[string]string // key -> sha256 of the value
	mems  map[string]string // text -> tag (one tag a memory)
	msgs  map[string]bool   // inbox texts
	jobs  map[string]bool   // job names
}

func newStormModel() *stormModel {
	return &stormModel{state: map[string]string{}, mems: map[string]string{}, msgs: map[string]bool{}, jobs: map[string]bool{}}
}

func (m *stormModel) clone() *stormModel {
	return &stormModel{state: maps.Clone(m.state), mems: maps.Clone(m.mems), msgs: maps.Clone(m.msgs), jobs: maps.Clone(m.jobs)}
}

// held reports whether the agent holds what makes it an agent that
// agent.list names: state or memories.
func (m *stormModel) held() bool { return len(m.state) > 0 || len(m.mems) > 0 }

func (m *stormModel) String() string {
	return fmt.Sprintf("%d keys %v, %d memories, %d messages, jobs %v", len(m.state), slices.Sorted(maps.Keys(m.state)), len(m.mems), len(m.msgs), slices.Sorted(maps.Keys(m.jobs)))
}

// diff says how got differs from m, or "".
func (m *stormModel) diff(got *stormModel) string {
	var d []string
	for k, v := range m.state {
		switch g, ok := got.state[k]; {
		case !ok:
			d = append(d, "key "+k+" missing")
		case g != v:
			d = append(d, "key "+k+" holds another value")
		}
	}
	for k := range got.state {
		if _, ok := m.state[k]; !ok {
			d = append(d, "key "+k+" present")
		}
	}
	for t := range m.mems {
		if _, ok := got.mems[t]; !ok {
			d = append(d, "memory "+t+" missing")
		}
	}
	for t := range got.mems {
		if _, ok := m.mems[t]; !ok {
			d = append(d, "memory "+t+" present")
		}
	}
	for t := range m.msgs {
		if !got.msgs[t] {
			d = append(d, "message "+t+" missing")
		}
	}
	for t := range got.msgs {
		if !m.msgs[t] {
			d = append(d, "message "+t+" present")
		}
	}
	for j := range m.jobs {
		if !got.jobs[j] {
			d = append(d, "job "+j+" missing")
		}
	}
	for j := range got.jobs {
		if !m.jobs[j] {
			d = append(d, "job "+j+" present")
		}
	}
	slices.Sort(d)
	return strings.Join(d, "; ")
}

// stormLedger is one worker's record of what was acknowledged.
type stormLedger struct {
	agents  map[string]*stormModel
	removed map[string]bool // removed, not made again: must be absent
	// commits holds the state and memories of the worker's main agent at
	// each of its commits, for restores (which restore both); tags the
	// tags it made.
	commits map[string]*stormModel
	tags    map[string]string
	// pending is the operation in flight when the daemon died, which may
	// or may not have taken effect.
	pending     func(*stormLedger)
	pendingWhat string
}

func (l *stormLedger) clone() *stormLedger {
	c := &stormLedger{agents: map[string]*stormModel{}, removed: maps.Clone(l.removed), commits: maps.Clone(l.commits), tags: maps.Clone(l.tags)}
	for a, m := range l.agents {
		c.agents[a] = m.clone()
	}
	return c
}

// agent is the model of agent a, made when an operation makes it.
func (l *stormLedger) agent(a string) *stormModel {
	m := l.agents[a]
	if m == nil {
		m = newStormModel()
		l.agents[a] = m
		delete(l.removed, a)
	}
	return m
}

func digest(v []byte) string {
	s := sha256.Sum256(v)
	return hex.EncodeToString(s[:])
}

// stormValue is a value of size n, printable, unique to (w, i).
func stormValue(w, i, n int) []byte {
	head := fmt.Sprintf("w%d-i%d-", w, i)
	if n < len(head) {
		n = len(head)
	}
	b := make([]byte, n)
	copy(b, head)
	for j := len(head); j < n; j++ {
		b[j] = byte('a' + (i+j)%26)
	}
	return b
}

type stormWorker struct {
	t      *testing.T
	w      int
	main   string
	l      *stormLedger
	n      int // operations tried, over all rounds
	forks  int
	killed *atomic.Bool
	ops    map[string]int // acknowledged operations by kind, over all rounds
}

// fail reports an operation's error: expected once the daemon is being
// killed (the operation becomes the ledger's pending one), a failure of
// the test before that.
func (sw *stormWorker) fail(what string, err error, apply func(*stormLedger)) bool {
	if sw.killed.Load() {
		sw.l.pending, sw.l.pendingWhat = apply, what
		return true
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		sw.t.Errorf("worker %d: %s refused while the daemon ran: %v", sw.w, what, err)
	} else {
		sw.t.Errorf("worker %d: %s failed while the daemon ran: %v", sw.w, what, err)
	}
	return true
}

// pick is a random element of a set, "" if it is empty.
func pick[V any](m map[string]V) string {
	if len(m) == 0 {
		return ""
	}
	ks := slices.Sorted(maps.Keys(m))
	return ks[rand.IntN(len(ks))]
}

// step runs one random operation; it reports whether the worker must
// stop (the daemon died, or the test failed).
func (sw *stormWorker) step(ctx context.Context, c *client.Client) bool {
	sw.n++
	i := sw.n
	l := sw.l
	// The agent to act on: mostly the main one, sometimes a fork.
	agent := sw.main
	if rand.IntN(4) == 0 {
		if f := pick(l.agents); f != "" {
			agent = f
		}
	}
	ack := func(kind string, apply func(*stormLedger)) bool {
		apply(l)
		sw.ops[kind]++
		return false
	}
	switch r := rand.IntN(100); {
	case r < 28: // a small save
		key := fmt.Sprintf("k%d", rand.IntN(12))
		v := stormValue(sw.w, i, 1+rand.IntN(600))
		apply := func(l *stormLedger) { l.agent(agent).state[key] = digest(v) }
		if _, err := c.StateSave(ctx, agent, key, v); err != nil {
			return sw.fail("state.save "+agent+":"+key, err, apply)
		}
		return ack("save", apply)
	case r < 31: // a large one, up to 1 MiB
		key := fmt.Sprintf("big%d", rand.IntN(3))
		v := stormValue(sw.w, i, 64<<10+rand.IntN(960<<10))
		apply := func(l *stormLedger) { l.agent(agent).state[key] = digest(v) }
		if _, err := c.StateSave(ctx, agent, key, v); err != nil {
			return sw.fail("state.save "+agent+":"+key+" (large)", err, apply)
		}
		return ack("save large", apply)
	case r < 37: // a delete
		m := l.agents[agent]
		if m == nil || len(m.state) == 0 {
			return false
		}
		key := pick(m.state)
		apply := func(l *stormLedger) { delete(l.agent(agent).state, key) }
		if _, err := c.StateDelete(ctx, agent, key); err != nil {
			return sw.fail("state.delete "+agent+":"+key, err, apply)
		}
		return ack("delete", apply)
	case r < 47: // remember: one, or a bulk of up to 40
		n := 1
		switch {
		case agent != sw.main && rand.IntN(12) == 0:
			// A fork grown past one batch of a removal (512 keys),
			// which then goes in groups.
			n = 600
		case rand.IntN(3) == 0:
			n = 2 + rand.IntN(39)
		}
		var in []proto.MemoryInput
		tags := map[string]string{}
		for j := range n {
			text := fmt.Sprintf("memory w%d i%d j%d", sw.w, i, j)
			tag := fmt.Sprintf("t%d", rand.IntN(3))
			in = append(in, proto.MemoryInput{Text: text, Tags: []string{tag}})
			tags[text] = tag
		}
		apply := func(l *stormLedger) { maps.Copy(l.agent(agent).mems, tags) }
		if _, err := c.MemRemember(ctx, proto.MemRememberArgs{Agent: agent, Memories: in}); err != nil {
			return sw.fail(fmt.Sprintf("mem.remember %s (%d)", agent, n), err, apply)
		}
		return ack("remember", apply)
	case r < 51: // forget some by id, or all of a tag
		m := l.agents[agent]
		if m == nil || len(m.mems) == 0 {
			return false
		}
		var a proto.MemForgetArgs
		a.Agent = agent
		var gone []string
		if rand.IntN(3) == 0 {
			tag := fmt.Sprintf("t%d", rand.IntN(3))
			a.Tags = []string{tag}
			for t, tg := range m.mems {
				if tg == tag {
					gone = append(gone, t)
				}
			}
		} else {
			for range 1 + rand.IntN(3) {
				gone = append(gone, pick(m.mems))
			}
			// Ids are the daemon's: look them up by text.
			ids := map[string]string{}
			if err := c.MemList(ctx, proto.MemListArgs{Agent: agent}, func(r proto.MemoryRecord) error {
				ids[r.Text] = r.ID
				return nil
			}); err != nil {
				return sw.fail("mem.list "+agent, err, nil)
			}
			for _, t := range gone {
				if ids[t] == "" {
					sw.t.Errorf("worker %d: acknowledged memory %q of %s not listed", sw.w, t, agent)
					return true
				}
				a.IDs = append(a.IDs, ids[t])
			}
		}
		if len(gone) == 0 {
			return false
		}
		apply := func(l *stormLedger) {
			for _, t := range gone {
				delete(l.agent(agent).mems, t)
			}
		}
		if err := c.MemForget(ctx, a, func(proto.MemoryRecord) error { return nil }); err != nil {
			return sw.fail(fmt.Sprintf("mem.forget %s (%d)", agent, len(gone)), err, apply)
		}
		return ack("forget", apply)
	case r < 56: // commit the main agent
		m := l.agents[sw.main]
		if m == nil || !m.held() {
			return false
		}
		snap := &stormModel{state: maps.Clone(m.state), mems: maps.Clone(m.mems)}
		rec, err := c.Commit(ctx, proto.CommitArgs{Agent: sw.main, Message: fmt.Sprintf("storm w%d i%d", sw.w, i)})
		if err != nil {
			return sw.fail("commit "+sw.main, err, func(*stormLedger) {})
		}
		return ack("commit", func(l *stormLedger) {
			if rec.Commit != "" {
				l.commits[rec.Commit] = snap
			}
		})
	case r < 58: // tag one of its commits
		cm := pick(l.commits)
		if cm == "" {
			return false
		}
		tag := fmt.Sprintf("storm-w%d-%d", sw.w, i)
		apply := func(l *stormLedger) { l.tags[tag] = cm }
		if _, err := c.CommitTag(ctx, proto.CommitTagArgs{Name: tag, Rev: cm}); err != nil {
			return sw.fail("commit.tag "+tag, err, apply)
		}
		return ack("tag", apply)
	case r < 62: // restore the main agent to one of its commits: its state and memories
		m := l.agents[sw.main]
		cm := pick(l.commits)
		if cm == "" || m == nil || !m.held() {
			return false
		}
		snap := l.commits[cm]
		apply := func(l *stormLedger) {
			m := l.agent(sw.main)
			m.state, m.mems = maps.Clone(snap.state), maps.Clone(snap.mems)
		}
		if _, err := c.CommitRestore(ctx, proto.CommitRestoreArgs{Agent: sw.main, Rev: cm}); err != nil {
			return sw.fail("commit.restore "+sw.main+" "+cm, err, apply)
		}
		return ack("restore", apply)
	case r < 66: // fork the main agent
		m := l.agents[sw.main]
		if m == nil || !m.held() || len(l.agents) > 4 {
			return false
		}
		sw.forks++
		dst := fmt.Sprintf("%sf%d", sw.main, sw.forks)
		apply := func(l *stormLedger) {
			src := l.agents[sw.main]
			f := l.agent(dst)
			f.state, f.mems = maps.Clone(src.state), maps.Clone(src.mems)
			for j := range src.jobs {
				f.jobs[dst+"."+j] = true
			}
		}
		if _, err := c.Fork(ctx, proto.ForkArgs{Agent: sw.main, Name: dst}); err != nil {
			return sw.fail("agent.fork "+sw.main+" "+dst, err, apply)
		}
		return ack("fork", apply)
	case r < 70: // remove a fork; rarely the main agent
		victim := ""
		for a := range l.agents {
			if a != sw.main && (victim == "" || rand.IntN(2) == 0) {
				victim = a
			}
		}
		if rand.IntN(8) == 0 {
			victim = sw.main
		}
		if victim == "" || l.agents[victim] == nil {
			return false
		}
		if v := l.agents[victim]; !v.held() && len(v.jobs) == 0 {
			// Its keys and memories all deleted (a fork's, by this
			// worker), it no longer exists: a removal says so (ENOENT).
			return false
		}
		apply := func(l *stormLedger) {
			delete(l.agents, victim)
			l.removed[victim] = true
		}
		if _, err := c.AgentRemove(ctx, victim); err != nil {
			return sw.fail("agent.remove "+victim, err, apply)
		}
		return ack("remove", apply)
	case r < 76: // a message
		m := l.agents[agent]
		if m == nil || !m.held() {
			return false
		}
		text := fmt.Sprintf("message w%d i%d", sw.w, i)
		apply := func(l *stormLedger) { l.agent(agent).msgs[text] = true }
		if _, err := c.MsgSend(ctx, proto.MsgSendArgs{To: agent, Text: text}); err != nil {
			return sw.fail("msg.send "+agent, err, apply)
		}
		return ack("message", apply)
	case r < 82: // a job added or removed, on the main agent
		m := l.agents[sw.main]
		if m == nil || !m.held() {
			return false
		}
		if j := pick(m.jobs); j != "" && rand.IntN(2) == 0 {
			apply := func(l *stormLedger) { delete(l.agent(sw.main).jobs, j) }
			if _, err := c.ScheduleRm(ctx, proto.ScheduleArgs{Name: j, Agent: sw.main}); err != nil {
				return sw.fail("schedule.rm "+j, err, apply)
			}
			return ack("job rm", apply)
		}
		if len(m.jobs) >= 3 {
			return false
		}
		j := fmt.Sprintf("j%dx%d", sw.w, i)
		apply := func(l *stormLedger) { l.agent(sw.main).jobs[j] = true }
		if _, err := c.ScheduleAdd(ctx, proto.ScheduleAddArgs{Agent: sw.main, Name: j, Schedule: "@yearly", Command: []string{"/bin/true"}}); err != nil {
			return sw.fail("schedule.add "+j, err, apply)
		}
		return ack("job add", apply)
	case r < 84: // a run that saves a key through its own socket
		if l.agents[sw.main] == nil {
			// A spawn makes a missing agent (its policy) before its
			// run saves: cut by a kill in between, it leaves an agent
			// that is neither as acknowledged nor with the save.
			return false
		}
		key := fmt.Sprintf("run/k%d", rand.IntN(3))
		v := fmt.Sprintf("run-w%d-i%d", sw.w, i)
		apply := func(l *stormLedger) { l.agent(sw.main).state[key] = digest([]byte(v)) }
		status := -1
		err := c.SpawnAttach(ctx, proto.SpawnArgs{Agent: sw.main, Command: []string{"/bin/sh", "-c", "exec ox-state save " + key + " " + v}}, func(item json.RawMessage) error {
			var e proto.ExitRecord
			if json.Unmarshal(item, &e) == nil && e.Type == "exit" {
				status = e.Status
			}
			return nil
		})
		if err == nil && status != 0 {
			err = fmt.Errorf("the run exited with status %d", status)
		}
		if err != nil {
			return sw.fail("run.spawn "+sw.main+" (ox-state save "+key+")", err, apply)
		}
		return ack("run", apply)
	default: // a save on the main agent, so that it mostly holds something
		key := fmt.Sprintf("k%d", rand.IntN(12))
		v := stormValue(sw.w, i, 1+rand.IntN(100))
		apply := func(l *stormLedger) { l.agent(sw.main).state[key] = digest(v) }
		if _, err := c.StateSave(ctx, sw.main, key, v); err != nil {
			return sw.fail("state.save "+sw.main+":"+key, err, apply)
		}
		return ack("save", apply)
	}
}

// served reads what the daemon holds for agent a, through the socket.
func servedAgent(ctx context.Context, c *client.Client, a string) (*stormModel, error) {
	m := newStormModel()
	if err := c.StateList(ctx, a, "", func(r proto.StateRecord) error {
		v, _, err := c.StateLoad(ctx, a, r.Key)
		if err != nil {
			return fmt.Errorf("loading listed key %s:%s: %w", a, r.Key, err)
		}
		m.state[r.Key] = digest(v)
		return nil
	}); err != nil && !isCode(err, proto.ENOENT) {
		return nil, err
	}
	if err := c.MemList(ctx, proto.MemListArgs{Agent: a}, func(r proto.MemoryRecord) error {
		tag := ""
		if len(r.Tags) > 0 {
			tag = r.Tags[0]
		}
		m.mems[r.Text] = tag
		return nil
	}); err != nil && !isCode(err, proto.ENOENT) {
		return nil, err
	}
	if err := c.MsgList(ctx, proto.MsgListArgs{Agent: a, Peek: true}, func(r proto.MsgRecord) error {
		m.msgs[r.Text] = true
		return nil
	}); err != nil && !isCode(err, proto.ENOENT) {
		return nil, err
	}
	if err := c.ScheduleList(ctx, a, func(r proto.JobRecord) error {
		m.jobs[r.Name] = true
		return nil
	}); err != nil && !isCode(err, proto.ENOENT) {
		return nil, err
	}
	return m, nil
}

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}

// check compares what the daemon serves with the worker's ledger: as
// acknowledged, or with the pending operation applied. It adopts the
// one that matched and reports a mismatch.
func (sw *stormWorker) check(ctx context.Context, c *client.Client, listed map[string]bool, round int) {
	t := sw.t
	l := sw.l
	cands := []*stormLedger{l}
	if l.pending != nil {
		after := l.clone()
		l.pending(after)
		cands = append(cands, after)
	}
	names := map[string]bool{}
	for _, cd := range cands {
		for a := range cd.agents {
			names[a] = true
		}
		for a := range cd.removed {
			names[a] = true
		}
	}
	got := map[string]*stormModel{}
	for a := range names {
		m, err := servedAgent(ctx, c, a)
		if err != nil {
			t.Fatalf("round %d: reading agent %s: %v", round, a, err)
		}
		got[a] = m
	}
	var problems []string
	for ci, cd := range cands {
		var d []string
		for a := range names {
			want := cd.agents[a]
			if want == nil {
				want = newStormModel() // removed (or never made): nothing
				if listed[a] {
					d = append(d, a+" listed by agent.list")
				}
			} else if want.held() && !listed[a] {
				d = append(d, a+" not listed by agent.list")
			}
			if s := want.diff(got[a]); s != "" {
				d = append(d, a+": "+s)
			}
		}
		if len(d) == 0 {
			// Tags and commits acknowledged are there.
			for tag, cm := range cd.tags {
				rec, err := c.CommitShow(ctx, proto.CommitShowArgs{Rev: tag})
				if err != nil || !strings.HasPrefix(rec.Commit, cm) && !strings.HasPrefix(cm, rec.Commit) {
					t.Errorf("round %d: worker %d: acknowledged tag %s (%s) shows %q: %v", round, sw.w, tag, cm, rec.Commit, err)
				}
			}
			*l = *cd
			l.pending, l.pendingWhat = nil, ""
			return
		}
		label := "as acknowledged"
		if ci == 1 {
			label = "with " + l.pendingWhat + " applied"
		}
		problems = append(problems, label+": "+strings.Join(d, "; "))
	}
	t.Fatalf("round %d: worker %d: what the daemon serves is neither\n  %s", round, sw.w, strings.Join(problems, "\n  "))
}

// TestCrashStorm is the crash storm of issue 45: a few rounds in make
// test, OXIOS_STORM_ROUNDS of them in make torture.
func TestCrashStorm(t *testing.T) {
	t.Parallel()
	rounds, workers := 3, 4
	if s := os.Getenv("OXIOS_STORM_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("OXIOS_STORM_ROUNDS=%q: want a number of rounds", s)
		}
		rounds, workers = n, 6
	}
	dir := shortTempDir(t)
	var killed atomic.Bool
	ws := make([]*stormWorker, workers)
	for w := range ws {
		ws[w] = &stormWorker{t: t, w: w, main: fmt.Sprintf("storm%d", w), killed: &killed, ops: map[string]int{},
			l: &stormLedger{agents: map[string]*stormModel{}, removed: map[string]bool{}, commits: map[string]*stormModel{}, tags: map[string]string{}}}
	}
	ctx := context.Background()
	verify := func(d *daemon, round int) {
		t.Helper()
		c := d.client(t)
		listed := map[string]bool{}
		if err := c.AgentList(ctx, func(r proto.AgentRecord) error {
			listed[r.Agent] = true
			return nil
		}); err != nil {
			t.Fatalf("round %d: agent.list: %v", round, err)
		}
		for _, sw := range ws {
			sw.check(ctx, c, listed, round)
		}
		if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
			t.Fatalf("round %d: ox-audit verify: exit %d\n%s%s", round, r.code, r.stdout, r.stderr)
		}
	}
	fsck := func(round int) {
		t.Helper()
		out, err := exec.Command("git", "-C", filepath.Join(dir, "data", "repo"), "fsck", "--strict", "--no-progress").CombinedOutput()
		if err != nil {
			t.Fatalf("round %d: git fsck --strict: %v\n%s", round, err, out)
		}
	}
	acked := 0
	for round := range rounds {
		d := startDaemon(t, daemonOpts{dir: dir})
		verify(d, round)
		killed.Store(false)
		var wg sync.WaitGroup
		before := 0
		for _, sw := range ws {
			for _, n := range sw.ops {
				before += n
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := client.Dial(ctx, d.sock)
				if err != nil {
					t.Errorf("worker %d: %v", sw.w, err)
					return
				}
				defer c.Close()
				for !sw.step(ctx, c) {
				}
			}()
		}
		time.Sleep(time.Duration(400+rand.IntN(1200)) * time.Millisecond)
		killed.Store(true)
		d.kill9()
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		after := 0
		for _, sw := range ws {
			for _, n := range sw.ops {
				after += n
			}
		}
		if after == before {
			t.Fatalf("round %d: nothing acknowledged before the kill", round)
		}
		acked = after
		fsck(round)
	}
	// A last start after the crash, then a clean stop and start: both
	// serve what was acknowledged.
	d := startDaemon(t, daemonOpts{dir: dir})
	verify(d, rounds)
	d.stop()
	fsck(rounds)
	d = startDaemon(t, daemonOpts{dir: dir})
	verify(d, rounds+1)
	d.stop()
	kinds := map[string]int{}
	for _, sw := range ws {
		for k, n := range sw.ops {
			kinds[k] += n
		}
	}
	t.Logf("%d rounds, %d operations acknowledged: %v", rounds, acked, kinds)
}
