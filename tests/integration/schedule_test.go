package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// jobs lists the jobs as records.
func jobs(t *testing.T, d *daemon) map[string]proto.JobRecord {
	t.Helper()
	r := d.ox("", "ox-schedule", "ls", "--json")
	if r.code != 0 {
		t.Fatalf("ox-schedule ls: %d %s", r.code, r.stderr)
	}
	m := map[string]proto.JobRecord{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var j proto.JobRecord
		if err := json.Unmarshal([]byte(l), &j); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		m[j.Name] = j
	}
	return m
}

// TestScheduleCommands drives ox-schedule against a real oxiosd: a job
// fires on its own (@every 1s) and by ox-schedule run, each firing is a
// run of the agent, a schedule.fire audit entry and a schedule.fired event
// with the run's id; bad input is refused with the right codes.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	events := make(chan proto.EventRecord, 16)
	go c.Events(ctx, proto.EventsArgs{Types: []string{"schedule.fired"}}, func(b json.RawMessage) error {
		var ev proto.EventRecord
		json.Unmarshal(b, &ev)
		events <- ev
		return nil
	})

	r := d.ox("", "ox-schedule", "add", "-a", "ops", "--name", "hello", "--cron", "@every 1s", "--", "sh", "-c", "echo hi from $OXIOS_SCHEDULE")
	if r.code != 0 {
		t.Fatalf("add: %d %s", r.code, r.stderr)
	}
	var ev proto.EventRecord
	select {
	case ev = <-events:
	case <-ctx.Done():
		t.Fatal("no schedule.fired within 15 s")
	}
	data, _ := json.Marshal(ev.Data)
	var fired proto.JobRecord
	json.Unmarshal(data, &fired)
	if ev.Event != "schedule.fired" || ev.Agent != "ops" || ev.Key != "hello "+fired.Run || fired.Run == "" || fired.Fired != "schedule" {
		t.Fatalf("event %+v", ev)
	}
	w := d.ox("", "ox-attach", fired.Run)
	if w.code != 0 || !strings.Contains(w.stdout, "hi from hello") {
		t.Fatalf("the scheduled run: %d %s %s", w.code, w.stdout, w.stderr)
	}
	if r := d.ox("", "ox-schedule", "rm", "hello"); r.code != 0 {
		t.Fatalf("rm: %d %s", r.code, r.stderr)
	}

	// A job run by hand.
	if r := d.ox("", "ox-schedule", "add", "-a", "ops", "--name", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Paris", "--catch-up", "--", "true"); r.code != 0 {
		t.Fatalf("add: %d %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-schedule", "run", "nightly")
	var run proto.RunRecord
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil || run.Agent != "ops" || run.ID == "" {
		t.Fatalf("run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if w := d.ox("", "ox-wait", run.ID); w.code != 0 {
		t.Fatalf("ox-wait: %d %s", w.code, w.stderr)
	}
	j := jobs(t, d)["nightly"]
	if j.LastRun != run.ID || j.LastStatus == nil || *j.LastStatus != 0 || j.Next == nil || j.TZ != "Europe/Paris" || !j.CatchUp {
		t.Fatalf("job after its run: %+v", j)
	}
	a := d.ox("", "ox-audit", "log", "--op", "schedule.*")
	if !strings.Contains(a.stdout, `"op":"schedule.fire","target":"ops:nightly `+run.ID+`"`) {
		t.Fatalf("no schedule.fire entry for %s:\n%s", run.ID, a.stdout)
	}

	// Refusals: a bad cron expression or zone is a usage error (issue 47).
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"add", "-a", "ops", "--name", "x", "--cron", "0 24 * * *", "--", "true"}, 2, "field 2 (hour)"},
		{[]string{"add", "-a", "ops", "--name", "x", "--cron", "0 * * *", "--", "true"}, 2, "EINVAL"},
		{[]string{"add", "-a", "ops", "--name", "x", "--cron", "@daily", "--tz", "Moon/Base", "--", "true"}, 2, "unknown time zone"},
		{[]string{"add", "-a", "ops", "--name", "nightly", "--cron", "@daily", "--", "true"}, 1, "EEXIST"},
		{[]string{"add", "-a", "ops", "--name", "x", "--cron", "@daily", "--overlap", "never", "--", "true"}, 2, "--overlap"},
		{[]string{"add", "-a", "ops", "--name", "x", "--cron", "@daily"}, 2, "TASK"},
		{[]string{"rm", "nope"}, 1, "ENOENT"},
		{[]string{"run", "nope"}, 1, "ENOENT"},
	} {
		r := d.ox("", "ox-schedule", c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("ox-schedule %v: exit %d, %q; want %d with %q", c.args, r.code, r.stderr, c.code, c.msg)
		}
	}
	// A run of another agent may not touch ops' jobs.
	r = d.ox("", "ox-spawn", "-a", "other", "--", "ox-schedule", "rm", "-a", "ops", "nightly")
	if r.code != 77 {
		t.Errorf("rm from a run of another agent: exit %d %s", r.code, r.stdout)
	}
}

// TestScheduleRestart: jobs survive a restart of oxiosd; a job asking for
// catch-up whose time passed while oxiosd was down runs once at start,
// the others wait for their next time; a removed job stays removed.
func TestScheduleRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, args := range [][]string{
		{"--name", "catchup", "--catch-up", "--cron", "0 3 * * *", "--", "true"},
		{"--name", "plain", "--cron", "0 3 * * *", "--", "true"},
		{"--name", "gone", "--cron", "0 3 * * *", "--", "true"},
	} {
		if r := d.ox("", "ox-schedule", append([]string{"add", "-a", "ops"}, args...)...); r.code != 0 {
			t.Fatalf("add %v: %d %s", args, r.code, r.stderr)
		}
	}
	if r := d.ox("", "ox-schedule", "rm", "gone"); r.code != 0 {
		t.Fatalf("rm: %d %s", r.code, r.stderr)
	}
	d.stop()
	// As if oxiosd had last handled the 03:00 of a week ago: the firings
	// since were missed. (The job file is the daemon's; it is edited here
	// while no daemon runs.)
	week := time.Now().Add(-7 * 24 * time.Hour).UTC().Format(time.RFC3339)
	for _, name := range []string{"catchup", "plain"} {
		p := filepath.Join(d.data, "repo", "agents", "ops", "sys", "schedules", name+".json")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(b, &m)
		m["last_due"] = week
		b, _ = json.Marshal(m)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	var j map[string]proto.JobRecord
	deadline := time.Now().Add(10 * time.Second)
	for {
		j = jobs(t, d)
		if j["catchup"].LastRun != "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, ok := j["gone"]; ok || len(j) != 2 {
		t.Fatalf("jobs after the restart: %v", j)
	}
	if j["catchup"].LastRun == "" {
		t.Fatalf("no catch-up run: %+v", j["catchup"])
	}
	if w := d.ox("", "ox-wait", j["catchup"].LastRun); w.code != 0 {
		t.Fatalf("catch-up run: %d %s", w.code, w.stderr)
	}
	if j["plain"].LastRun != "" || j["plain"].Next == nil {
		t.Fatalf("plain ran or has no next time: %+v", j["plain"])
	}
	ev := d.ox("", "ox-events", "--since", "1", "--type", "schedule.fired", "-n", "1")
	if !strings.Contains(ev.stdout, `"key":"catchup `+j["catchup"].LastRun+`"`) {
		t.Fatalf("replayed event: %s %s", ev.stdout, ev.stderr)
	}
	if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("verify: %d %s", r.code, r.stderr)
	}
}
