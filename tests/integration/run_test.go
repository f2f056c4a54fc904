package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// records parses JSON lines of records.
func records(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not a JSON record: %q (%v)", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func ofType(recs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["type"] == typ {
			out = append(out, r)
		}
	}
	return out
}

// spawnDetached starts a run with ox-spawn -d and returns its record.
func spawnDetached(t *testing.T, d *daemon, agent string, argv ...string) proto.RunRecord {
	t.Helper()
	r := d.ox("", "ox-spawn", append([]string{"-a", agent, "-d", "--"}, argv...)...)
	if r.code != 0 {
		t.Fatalf("ox-spawn -d: exit %d: %s", r.code, r.stderr)
	}
	var rec proto.RunRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.Type != "run" || rec.ID == "" || rec.PID == 0 {
		t.Fatalf("ox-spawn -d printed %q (%v)", r.stdout, err)
	}
	return rec
}

// procState is the state letter of pid in /proc ('T' stopped), 0 if gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	return b[i+2]
}

// zombies lists the zombie children of pid.
func zombies(pid int) []int {
	var z []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			z = append(z, n)
		}
	}
	return z
}

func TestRunProcessAttached(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	r := d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", "echo hello; echo oops >&2; exit 3")
	if r.code != 3 {
		t.Fatalf("ox-spawn exit %d, want the run's 3; stderr %s", r.code, r.stderr)
	}
	recs := records(t, r.stdout)
	if recs[0]["type"] != "run" || recs[len(recs)-1]["type"] != "exit" {
		t.Fatalf("records do not start with run and end with exit: %s", r.stdout)
	}
	outs := ofType(recs, "output")
	got := map[string]string{}
	for _, o := range outs {
		got[o["stream"].(string)] += o["text"].(string)
	}
	if got["stdout"] != "hello" || got["stderr"] != "oops" {
		t.Fatalf("output records %v, want stdout hello and stderr oops", outs)
	}
	if ex := recs[len(recs)-1]; ex["status"].(float64) != 3 || ex["run"] != recs[0]["id"] {
		t.Fatalf("exit record %v", ex)
	}
	// The agent was created with the default policy, and the run's start
	// and end are on the audit log.
	log := d.ox("", "ox-audit", "log", "--op", "agent.create")
	if !strings.Contains(log.stdout, `"target":"ops:policy.toml"`) {
		t.Fatalf("no agent.create entry: %s", log.stdout)
	}
	id := recs[0]["id"].(string)
	for _, op := range []string{"run.spawn", "run.exit"} {
		l := d.ox("", "ox-audit", "log", "--op", op)
		if !strings.Contains(l.stdout, "ops:"+id) {
			t.Fatalf("no %s entry for %s: %s", op, id, l.stdout)
		}
	}
	if l := d.ox("", "ox-audit", "log", "--op", "run.exit"); !strings.Contains(l.stdout, id+" exit 3") {
		t.Fatalf("run.exit entry does not hold the status: %s", l.stdout)
	}
	// A command that does not exist fails at once, naming it.
	r = d.ox("", "ox-spawn", "-a", "ops", "--", "no-such-command-xyz")
	if r.code != 1 || !strings.Contains(r.stderr, "no-such-command-xyz: command not found") {
		t.Fatalf("missing command: exit %d, %s", r.code, r.stderr)
	}
	// The run's input is its stdin: records pass through untouched.
	in := `{"type":"memory","id":"m1","text":"disk full on /var"}` + "\n"
	r = d.ox(in, "ox-spawn", "-a", "ops", "--", "cat")
	outs = ofType(records(t, r.stdout), "output")
	if r.code != 0 || len(outs) != 1 || outs[0]["text"] != strings.TrimSpace(in) {
		t.Fatalf("stdin to the run: exit %d, outputs %v", r.code, outs)
	}
	// Without an endpoint, an LLM run is refused at once, saying how to
	// configure one.
	r = d.ox("", "ox-spawn", "-a", "ops", "summarise the logs")
	if r.code == 0 || !strings.Contains(r.stderr, "[llm]") || !strings.Contains(r.stderr, "base_url") {
		t.Fatalf("LLM run without endpoint: exit %d, %s", r.code, r.stderr)
	}
	// Bad input: a task and nothing to run.
	if r = d.ox("", "ox-spawn", "-a", "ops", "--"); r.code != 2 {
		t.Fatalf("ox-spawn -- with no command: exit %d", r.code)
	}
	if r = d.ox("", "ox-spawn", "-a", "ops", "-e", "OXIOS_AGENT=root", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "OXIOS_") {
		t.Fatalf("env override of OXIOS_AGENT: exit %d, %s", r.code, r.stderr)
	}
}

func TestRunSignals(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	rec := spawnDetached(t, d, "ops", "sleep", "60")
	ps := func() proto.RunRecord {
		t.Helper()
		r := d.ox("", "ox-ps", "-a", "ops")
		for _, m := range records(t, r.stdout) {
			if m["id"] == rec.ID {
				var rr proto.RunRecord
				b, _ := json.Marshal(m)
				json.Unmarshal(b, &rr)
				return rr
			}
		}
		t.Fatalf("run %s not in ox-ps: %s", rec.ID, r.stdout)
		return proto.RunRecord{}
	}
	if got := ps(); got.State != "running" || got.PID != rec.PID || got.RSS == 0 {
		t.Fatalf("ox-ps: %+v", got)
	}
	if r := d.ox("", "ox-kill", "-s", "STOP", rec.ID); r.code != 0 {
		t.Fatalf("ox-kill -s STOP: %d %s", r.code, r.stderr)
	}
	waitFor(t, "the run to stop", func() bool { return procState(rec.PID) == 'T' })
	if got := ps(); got.State != "stopped" {
		t.Fatalf("after STOP ox-ps says %q", got.State)
	}
	if r := d.ox("", "ox-kill", "-s", "CONT", rec.ID); r.code != 0 {
		t.Fatalf("ox-kill -s CONT: %d %s", r.code, r.stderr)
	}
	waitFor(t, "the run to resume", func() bool { return procState(rec.PID) == 'S' })
	if got := ps(); got.State != "running" {
		t.Fatalf("after CONT ox-ps says %q", got.State)
	}
	if r := d.ox("", "ox-kill", rec.ID); r.code != 0 {
		t.Fatalf("ox-kill: %d %s", r.code, r.stderr)
	}
	w := d.ox("", "ox-wait", rec.ID)
	if w.code != 128+int(syscall.SIGTERM) || !strings.Contains(w.stdout, `"signal":"TERM"`) {
		t.Fatalf("ox-wait after TERM: exit %d, %s", w.code, w.stdout)
	}
	// Signalling an ended run, an unknown run, a bad signal.
	if r := d.ox("", "ox-kill", rec.ID); r.code != 1 || !strings.Contains(r.stderr, "ESRCH") {
		t.Fatalf("kill of an exited run: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-kill", "rnope"); r.code != 1 || !strings.Contains(r.stderr, "no run") {
		t.Fatalf("kill of an unknown run: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-kill", "-s", "BOGUS", rec.ID); r.code != 2 || !strings.Contains(r.stderr, "unknown signal") {
		t.Fatalf("bad signal: %d %s", r.code, r.stderr)
	}
	// KILL, to a stopped run too.
	rec2 := spawnDetached(t, d, "ops", "sleep", "60")
	d.ox("", "ox-kill", "-s", "STOP", rec2.ID)
	d.ox("", "ox-kill", "-s", "KILL", rec2.ID)
	if w := d.ox("", "ox-wait", rec2.ID); w.code != 137 {
		t.Fatalf("ox-wait after KILL: %d %s", w.code, w.stdout)
	}
	// Ctrl-C on an attached ox-spawn is SIGINT to the run.
	cmd := exec.Command(bin("ox-spawn"), "-a", "ops", "--", "sleep", "60")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the attached run to start", func() bool { return strings.Contains(out.String(), `"type":"run"`) })
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("ox-spawn after SIGINT: exit %d (%v), want 130; %s", code, err, out.String())
	}
	if !strings.Contains(out.String(), `"signal":"INT"`) {
		t.Fatalf("the run was not ended by SIGINT: %s", out.String())
	}
	if z := zombies(d.cmd.Process.Pid); len(z) > 0 {
		t.Fatalf("zombies left: %v", z)
	}
}

// TestRunSurvivesClient: a run belongs to oxiosd, not to the ox-spawn
// that started it.
func TestRunSurvivesClient(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	cmd := exec.Command(bin("ox-spawn"), "-a", "ops", "--", "/bin/sh", "-c", "sleep 0.5; echo still here")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	var out syncBuffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run record", func() bool { return strings.Contains(out.String(), "\n") })
	var rec proto.RunRecord
	json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &rec)
	cmd.Process.Kill()
	cmd.Wait()
	w := d.ox("", "ox-wait", rec.ID)
	if w.code != 0 {
		t.Fatalf("run %s after its client was killed: ox-wait exit %d %s", rec.ID, w.code, w.stdout)
	}
	a := d.ox("", "ox-attach", rec.ID)
	recs := records(t, a.stdout)
	if a.code != 0 || len(ofType(recs, "output")) != 1 || ofType(recs, "output")[0]["text"] != "still here" || recs[len(recs)-1]["type"] != "exit" {
		t.Fatalf("ox-attach of the ended run: exit %d %s", a.code, a.stdout)
	}
}

// TestRunIdentity: a process of a run is that run's agent, over the
// socket, and may act on no other.
func TestRunIdentity(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.ox("", "ox-state", "save", "-a", "bank", "secret", "42")
	script := `ox-state save notes/mine hello && ox-state load notes/mine && ox-state load -a bank secret; echo "other=$?"; ox-state save -a bank secret 0; echo "write=$?"; echo "agent=$OXIOS_AGENT run=$OXIOS_RUN"`
	r := d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", script)
	recs := records(t, r.stdout)
	id := recs[0]["id"].(string)
	var lines []string
	for _, o := range ofType(recs, "output") {
		lines = append(lines, o["text"].(string))
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"hello", "other=77", "write=77", "agent=ops run=" + id} {
		if !strings.Contains(all, want) {
			t.Fatalf("run output lacks %q:\n%s", want, all)
		}
	}
	if l := d.ox("", "ox-state", "load", "-a", "bank", "secret"); l.stdout != "42" {
		t.Fatalf("the other agent's state changed: %q", l.stdout)
	}
	// The refusals are audited as the run's.
	l := d.ox("", "ox-audit", "log", "--op", "state.*")
	denied := 0
	for _, e := range records(t, l.stdout) {
		actor, _ := e["actor"].(map[string]any)
		if e["result"] == "EPERM" && actor["agent"] == "ops" && actor["run"] == id {
			denied++
		}
	}
	if denied != 2 {
		t.Fatalf("want 2 refusals audited as run %s, got %d:\n%s", id, denied, l.stdout)
	}
}

func TestExecPolicy(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	createAgent(t, d, "ops") // an exec does not create one
	r := d.ox("", "ox-exec", "-a", "ops", "--", "echo", "hi", "there")
	if r.code != 0 || r.stdout != "hi there\n" {
		t.Fatalf("allowed exec: %d %q %s", r.code, r.stdout, r.stderr)
	}
	r = d.ox("", "ox-exec", "-a", "ops", "--json", "--", "sh", "-c", "exit 4")
	if r.code != 77 || !strings.Contains(r.stderr, "exec.allow") {
		t.Fatalf("exec of sh: %d %s", r.code, r.stderr)
	}
	refused := []struct{ name, line string }{
		{"semicolon", "echo a; cat /etc/passwd"},
		{"pipe", "cat /etc/passwd | head"},
		{"subst", "echo $(id)"},
		{"backticks", "echo `id`"},
		{"redirect", "echo x > /tmp/owned"},
		{"and", "true && id"},
		{"env", "LD_PRELOAD=/tmp/x.so ls"},
		{"path", "/tmp/ls"},
		{"newline", "echo a\nid"},
	}
	for _, c := range refused {
		r := d.ox("", "ox-exec", "-a", "ops", "-c", c.line)
		if r.code != 77 || !strings.Contains(r.stderr, "policy rule") {
			t.Errorf("%s: %q ran: exit %d %s %s", c.name, c.line, r.code, r.stdout, r.stderr)
		}
	}
	// In argv form a metacharacter argument is refused too.
	if r := d.ox("", "ox-exec", "-a", "ops", "--", "echo", "a;id"); r.code != 77 {
		t.Errorf("argv with ; ran: %d", r.code)
	}
	if _, err := os.Stat("/tmp/owned"); err == nil {
		t.Fatal("a redirection ran")
	}
	// Every refusal is on the audit log with its rule.
	l := d.ox("", "ox-audit", "log", "--op", "exec")
	var eperm int
	for _, e := range records(t, l.stdout) {
		if e["result"] == "EPERM" && strings.Contains(e["target"].(string), "[exec.") {
			eperm++
		}
	}
	if want := len(refused) + 2; eperm != want {
		t.Fatalf("%d refusals audited with their rule, want %d:\n%s", eperm, want, l.stdout)
	}
	// The one that ran: its status and output digest are on the log.
	if !strings.Contains(l.stdout, "exec echo hi there => status 0 output ") {
		t.Fatalf("the exec that ran is not audited with its status: %s", l.stdout)
	}
	// Timeout: killed, reported.
	r = d.ox("", "ox-exec", "-a", "ops", "--json", "--timeout", "200ms", "--", "sleep", "30")
	var rec proto.ExecRecord
	json.Unmarshal([]byte(r.stdout), &rec)
	if !rec.TimedOut || rec.Signal != "KILL" || r.code != 137 {
		t.Fatalf("exec past its timeout: %d %+v", r.code, rec)
	}
	// A run's execs run in its workspace (each in a sandbox of its own,
	// which shows the workspace at /work) and count against its budget.
	r = d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", "echo OXIOS_AGENT=$OXIOS_AGENT > mine && ox-exec -- ls -d \"$PWD\" && ox-exec -- cat mine")
	var out []string
	for _, o := range ofType(records(t, r.stdout), "output") {
		out = append(out, o["text"].(string))
	}
	joined := strings.Join(out, "\n")
	if r.code != 0 || !strings.Contains(joined, "/work") || !strings.Contains(joined, "OXIOS_AGENT=ops") {
		t.Fatalf("exec from a run: %d\n%s", r.code, joined)
	}
	b := d.ox("", "ox-budget", "show", "-a", "ops")
	var br proto.BudgetRecord
	json.Unmarshal([]byte(b.stdout), &br)
	if br.Used.Execs != 4 { // echo, sleep, ls, cat
		t.Fatalf("budget used execs %d, want 4: %s", br.Used.Execs, b.stdout)
	}
}

func TestBudget(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	if r := d.ox("", "ox-budget", "set", "-a", "ops", "--run-execs", "2", "--execs", "5"); r.code != 0 {
		t.Fatalf("ox-budget set: %d %s", r.code, r.stderr)
	}
	// A run may exec twice; the third is refused with EDQUOT and the
	// refusal is audited.
	r := d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", "ox-exec -- true; ox-exec -- true; ox-exec -- true; echo third=$?")
	var out []string
	for _, o := range ofType(records(t, r.stdout), "output") {
		out = append(out, o["text"].(string))
	}
	joined := strings.Join(out, "\n")
	if !strings.Contains(joined, "third=1") || !strings.Contains(joined, "EDQUOT") {
		t.Fatalf("third exec of a run with run_execs 2:\n%s", joined)
	}
	// The agent's total: 2 used, 3 more allowed, then refused.
	for i := 0; i < 3; i++ {
		if r := d.ox("", "ox-exec", "-a", "ops", "--", "true"); r.code != 0 {
			t.Fatalf("exec %d within the agent's budget: %d %s", i, r.code, r.stderr)
		}
	}
	if r := d.ox("", "ox-exec", "-a", "ops", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "execs: 5 used + 1 asked of 5") {
		t.Fatalf("exec past the agent's budget: %d %s", r.code, r.stderr)
	}
	// Spawning is refused too once the agent has spent it all.
	if r := d.ox("", "ox-spawn", "-a", "ops", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "EDQUOT") {
		t.Fatalf("spawn of an agent over budget: %d %s", r.code, r.stderr)
	}
	l := d.ox("", "ox-audit", "log", "--op", "exec")
	if n := strings.Count(l.stdout, `"result":"EDQUOT"`); n != 2 {
		t.Fatalf("%d EDQUOT refusals audited, want 2", n)
	}
	// Reset, and it runs again; only the admin may reset or set.
	if r := d.ox("", "ox-budget", "reset", "-a", "ops"); r.code != 0 {
		t.Fatalf("reset: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-exec", "-a", "ops", "--", "true"); r.code != 0 {
		t.Fatalf("exec after reset: %d %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-spawn", "-a", "ops", "--", "ox-budget", "reset")
	if !strings.Contains(r.stdout, "budget.reset is for the admin") {
		t.Fatalf("a run reset its own budget: %s", r.stdout)
	}
	// Budget use survives a restart (it is in the agent's sys/budget.json).
	d.stop()
	d = startDaemon(t, daemonOpts{dir: d.dir})
	b := d.ox("", "ox-budget", "show", "-a", "ops")
	var br proto.BudgetRecord
	json.Unmarshal([]byte(b.stdout), &br)
	if br.Used.Execs != 1 || br.Limit.Execs != 5 || br.RunLimit.Execs != 2 {
		t.Fatalf("budget after restart: %s", b.stdout)
	}
	// Wall time: a run past its run_wall is ended.
	d.ox("", "ox-budget", "set", "-a", "ops", "--run-wall", "300ms")
	start := time.Now()
	r = d.ox("", "ox-spawn", "-a", "ops", "--", "sleep", "30")
	ex := ofType(records(t, r.stdout), "exit")
	if r.code != 143 || len(ex) != 1 || !strings.Contains(ex[0]["error"].(string), "wall time budget") || time.Since(start) > 20*time.Second {
		t.Fatalf("run past its wall budget: exit %d %s", r.code, r.stdout)
	}
}

// TestRunsMany: concurrent process runs, all reaped. Each lives 2 s, so
// that ox-ps sees some still running on a loaded machine (at 0.3 s, 40
// spawns under make test were all over before ox-ps looked).
func TestRunsMany(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx := context.Background()
	const n = 40
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec, err := c.Spawn(ctx, proto.SpawnArgs{Agent: fmt.Sprintf("a%d", i%4), Command: []string{"/bin/sh", "-c", fmt.Sprintf("sleep 2; exit %d", i%7)}})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = rec.ID
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	live := 0
	c.Ps(ctx, proto.PsArgs{}, func(proto.RunRecord) error { live++; return nil })
	if live == 0 {
		t.Fatalf("ox-ps shows none of %d runs started together", n)
	}
	got := map[string]int{}
	if err := c.Wait(ctx, ids, func(r proto.ExitRecord) error { got[r.Run] = r.Status; return nil }); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if st, ok := got[id]; !ok || st != i%7 {
			t.Fatalf("run %d (%s): status %d (%v), want %d", i, id, st, ok, i%7)
		}
	}
	waitFor(t, "no live runs", func() bool {
		live = 0
		c.Ps(ctx, proto.PsArgs{}, func(proto.RunRecord) error { live++; return nil })
		return live == 0
	})
	if z := zombies(d.cmd.Process.Pid); len(z) > 0 {
		t.Fatalf("zombies left: %v", z)
	}
}

// TestRunLost: runs oxiosd did not see end are marked lost by the next
// oxiosd; a clean stop ends the runs it supervises.
func TestRunLost(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	rec := spawnDetached(t, d, "ops", "sleep", "60")
	d.kill9()
	defer syscall.Kill(-rec.PID, syscall.SIGKILL)
	d = startDaemon(t, daemonOpts{dir: d.dir})
	r := d.ox("", "ox-ps", "--all")
	recs := records(t, r.stdout)
	if len(recs) != 1 || recs[0]["state"] != "lost" {
		t.Fatalf("after kill -9 and restart: %s", r.stdout)
	}
	if w := d.ox("", "ox-wait", rec.ID); w.code != 255 || !strings.Contains(w.stdout, "oxiosd stopped") {
		t.Fatalf("ox-wait of a lost run: %d %s", w.code, w.stdout)
	}
	// A clean stop ends (and records) the live runs.
	rec2 := spawnDetached(t, d, "ops", "sleep", "60")
	d.stop()
	if procState(rec2.PID) != 0 {
		t.Fatalf("run %d still alive after oxiosd stopped", rec2.PID)
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	r = d.ox("", "ox-wait", rec2.ID)
	if r.code != 143 || !strings.Contains(r.stdout, "oxiosd stopped") {
		t.Fatalf("run ended by a clean stop: %d %s", r.code, r.stdout)
	}
}

// TestRunIdentityMount: through the mount too, a run's processes are its
// agent: they see and change their own agent's files and no other's.
func TestRunIdentityMount(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	m.ox("", "ox-state", "save", "-a", "bank", "secret", "42")
	m.ox("", "ox-state", "save", "-a", "ops", "notes/a", "mine")
	script := `cd "$OXIOS_MNT/agent" && ls; cat ops/state/notes/a; echo; echo new > ops/state/notes/b && echo "own-write=$?";
cat bank/state/secret; echo "other-read=$?"; echo 0 > bank/state/secret; echo "other-write=$?"; ls bank; echo "other-ls=$?"`
	r := m.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", script)
	var lines []string
	for _, o := range ofType(records(t, r.stdout), "output") {
		lines = append(lines, o["text"].(string))
	}
	all := strings.Join(lines, "\n")
	for _, want := range []string{"mine", "own-write=0", "other-read=1", "other-write=", "other-ls=2"} {
		if !strings.Contains(all, want) {
			t.Fatalf("run output lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "other-write=0") || strings.Contains(all, "42") {
		t.Fatalf("the run reached another agent's state through the mount:\n%s", all)
	}
	// Its listing of /agent shows its own agent only.
	if lines[0] != "ops" {
		t.Errorf("ls /agent from the run: %q", lines[0])
	}
	if l := m.ox("", "ox-state", "load", "-a", "ops", "notes/b"); l.stdout != "new\n" {
		t.Errorf("the run's write through the mount: %q", l.stdout)
	}
	if l := m.ox("", "ox-state", "load", "-a", "bank", "secret"); l.stdout != "42" {
		t.Errorf("the other agent's state changed: %q", l.stdout)
	}
}
