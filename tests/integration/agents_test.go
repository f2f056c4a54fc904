package integration

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// TestAgents lists, shows and removes agents with ox-agents, and checks
// that every command that reads an agent says the same of one that does not
// exist.
func TestAgents(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ok := func(r result, what string) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		return r
	}
	agentRec := func(out string) proto.AgentRecord {
		t.Helper()
		var rec proto.AgentRecord
		if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Type != proto.RecordAgent {
			t.Fatalf("not an agent record: %q (%v)", out, err)
		}
		return rec
	}

	// No agent yet: nothing, and exit 0.
	if r := ok(d.ox("", "ox-agents", "ls"), "ox-agents ls"); r.stdout != "" {
		t.Fatalf("ox-agents ls with no agent printed %q", r.stdout)
	}

	// A nonexistent agent is the same ENOENT for every command that reads
	// one, and none brings it into being.
	want := `no agent "nosuch"`
	for _, args := range [][]string{
		{"ox-agents", "show", "nosuch"},
		{"ox-state", "ls", "-a", "nosuch"},
		{"ox-recall", "-a", "nosuch", "x"},
		{"ox-forget", "-a", "nosuch", "--tag", "x"},
		{"ox-ps", "-a", "nosuch"},
		{"ox-schedule", "ls", "-a", "nosuch"},
		{"ox-budget", "show", "-a", "nosuch"},
		{"ox-policy", "show", "-a", "nosuch"},
	} {
		r := d.ox("", args[0], args[1:]...)
		if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "ENOENT") {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q (ENOENT)", strings.Join(args, " "), r.code, r.stderr, want)
		}
	}
	if r := d.ox("", "ox-agents", "ls"); r.stdout != "" {
		t.Fatalf("reads of nosuch created an agent:\n%s", r.stdout)
	}

	// ops: state (one key uncommitted), a memory, a job, a budget, a run.
	ok(d.ox("", "ox-state", "save", "-a", "ops", "notes/a", "one"), "save")
	ok(d.ox("", "ox-commit", "-a", "ops", "-m", "first"), "commit")
	ok(d.ox("", "ox-state", "save", "-a", "ops", "notes/b", "uncommitted"), "save")
	ok(d.ox("", "ox-remember", "-a", "ops", "the deploy key rotates monthly"), "remember")
	ok(d.ox("", "ox-schedule", "add", "-a", "ops", "--name", "nightly", "--cron", "@daily", "--", "true"), "schedule add")
	ok(d.ox("", "ox-budget", "set", "-a", "ops", "--execs", "100"), "budget set")
	ok(d.ox("", "ox-state", "save", "-a", "web", "x", "1"), "save web")
	run := spawnDetached(t, d, "ops", "sleep", "60")

	r := ok(d.ox("", "ox-agents", "show", "ops"), "ox-agents show ops")
	rec := agentRec(r.stdout)
	if rec.Agent != "ops" || rec.Keys != 2 || rec.Memories != 1 || len(rec.Jobs) != 1 || rec.Jobs[0] != "nightly" || rec.Policy != "own" || !rec.Budget || rec.Runs != 1 {
		t.Fatalf("ox-agents show ops: %+v", rec)
	}
	r = ok(d.ox("", "ox-agents", "ls"), "ox-agents ls")
	if got := jsonLines(t, r.stdout); len(got) != 2 || got[0]["agent"] != "ops" || got[1]["agent"] != "web" {
		t.Fatalf("ox-agents ls:\n%s", r.stdout)
	}

	// Not while it runs, and not by a run (of another agent or its own).
	if r := d.ox("", "ox-agents", "rm", "ops"); r.code != 1 || !strings.Contains(r.stderr, "EBUSY") || !strings.Contains(r.stderr, "live run") {
		t.Fatalf("ox-agents rm of an agent with a live run: exit %d %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-spawn", "-n", "-a", "web", "--", "ox-agents", "rm", "ops")
	if r.code != 77 || !strings.Contains(r.stdout, "EACCES") {
		t.Fatalf("ox-agents rm from a run of web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := ok(d.ox("", "ox-agents", "show", "ops"), "show"); agentRec(r.stdout).Keys != 2 {
		t.Fatalf("a refused removal removed something: %s", r.stdout)
	}
	ok(d.ox("", "ox-kill", "-s", "KILL", run.ID), "kill")
	d.ox("", "ox-wait", run.ID)

	since, _ := c.AuditHead(context.Background())
	r = ok(d.ox("", "ox-agents", "rm", "ops"), "ox-agents rm ops")
	rec = agentRec(r.stdout)
	if !rec.Removed || rec.Keys != 2 || rec.Memories != 1 || len(rec.Jobs) != 1 || rec.Policy != "own" || !rec.Budget || rec.Restore == "" || rec.Commit == "" {
		t.Fatalf("ox-agents rm ops: %+v", rec)
	}
	// Gone everywhere, the other agent untouched.
	for _, args := range [][]string{{"ox-agents", "show", "ops"}, {"ox-state", "ls", "-a", "ops"}, {"ox-recall", "-a", "ops", "deploy"}, {"ox-policy", "show", "-a", "ops"}} {
		if r := d.ox("", args[0], args[1:]...); r.code != 1 || !strings.Contains(r.stderr, `no agent "ops"`) {
			t.Errorf("%s after removal: exit %d %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := d.ox("", "ox-schedule", "ls", "--json"); strings.Contains(r.stdout, "nightly") {
		t.Errorf("the removed agent's job is still listed:\n%s", r.stdout)
	}
	if r := d.ox("", "ox-schedule", "run", "nightly"); r.code == 0 {
		t.Errorf("the removed agent's job still runs:\n%s", r.stdout)
	}
	if r := ok(d.ox("", "ox-agents", "ls"), "ls"); len(jsonLines(t, r.stdout)) != 1 || !strings.Contains(r.stdout, `"web"`) {
		t.Errorf("ox-agents ls after removing ops:\n%s", r.stdout)
	}
	// Audited, key by key, then the removal itself; its event published.
	var ops []string
	c.AuditLog(context.Background(), proto.AuditLogArgs{SinceSeq: since.Seq + 1}, func(line json.RawMessage) error {
		var e struct{ Op, Target, Result string }
		json.Unmarshal(line, &e)
		ops = append(ops, e.Op+" "+e.Target+" "+e.Result)
		return nil
	})
	log := strings.Join(ops, "\n")
	for _, w := range []string{"state.delete ops:notes/a ok", "state.delete ops:notes/b ok", "agent.remove ops:sys/policy.toml ok",
		"agent.remove ops:sys/budget.json ok", "agent.remove ops:sys/schedules/nightly.json ok", "agent.remove ops: ok"} {
		if !strings.Contains(log, w) {
			t.Errorf("the audit log lacks %q:\n%s", w, log)
		}
	}
	if !strings.Contains(log, "mem.forget ops:episodic/") {
		t.Errorf("the audit log lacks the memory's removal:\n%s", log)
	}
	// Live and replayed alike: one per kernel file, then the agent's.
	events := startEvents(t, d, "--type", proto.EventAgentRemoved, "--since", strconv.FormatUint(since.Seq+1, 10))
	for ev := next(t, events); ev.Key != ""; ev = next(t, events) {
		if ev.Agent != "ops" || !strings.HasPrefix(ev.Key, "sys/") {
			t.Fatalf("event of ox-agents rm: %+v", ev)
		}
	}
	if r := ok(d.ox("", "ox-audit", "verify"), "verify"); !strings.Contains(r.stdout, `"ok":true`) {
		t.Errorf("ox-audit verify: %s", r.stdout)
	}

	// The history holds it: the uncommitted key too.
	ok(d.ox("", "ox-commit", "restore", rec.Restore, "-a", "ops"), "ox-commit restore")
	if r := ok(d.ox("", "ox-state", "load", "-a", "ops", "notes/b"), "load"); r.stdout != "uncommitted" {
		t.Errorf("restored notes/b = %q", r.stdout)
	}
	if r := ok(d.ox("", "ox-recall", "-a", "ops", "deploy key"), "recall"); !strings.Contains(r.stdout, "rotates monthly") {
		t.Errorf("restored memory not recalled:\n%s", r.stdout)
	}

	// A usage error, and a name that is not one.
	if r := d.ox("", "ox-agents", "rm"); r.code != 2 {
		t.Errorf("ox-agents rm with no NAME: exit %d", r.code)
	}
	if r := d.ox("", "ox-agents", "rm", "../etc"); r.code != 2 {
		t.Errorf("ox-agents rm ../etc: exit %d", r.code)
	}
	if r := d.ox("", "ox-agents", "rm", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, `no agent "nosuch"`) {
		t.Errorf("ox-agents rm nosuch: exit %d %s", r.code, r.stderr)
	}
}
