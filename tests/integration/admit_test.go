package integration

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// spawnQueued starts a run with ox-spawn -d and returns its record, which
// may be queued.
func spawnRec(t *testing.T, d *daemon, agent string, prio int, argv ...string) proto.RunRecord {
	t.Helper()
	r := d.ox("", "ox-spawn", append([]string{"-a", agent, "-d", "--priority", strconv.Itoa(prio), "--"}, argv...)...)
	if r.code != 0 {
		t.Fatalf("ox-spawn -d: exit %d: %s", r.code, r.stderr)
	}
	var rec proto.RunRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.ID == "" {
		t.Fatalf("ox-spawn -d printed %q (%v)", r.stdout, err)
	}
	return rec
}

func psRecs(t *testing.T, d *daemon, args ...string) []proto.RunRecord {
	t.Helper()
	r := d.ox("", "ox-ps", args...)
	if r.code != 0 {
		t.Fatalf("ox-ps: exit %d: %s", r.code, r.stderr)
	}
	var out []proto.RunRecord
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var rec proto.RunRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("ox-ps printed %q: %v", l, err)
		}
		out = append(out, rec)
	}
	return out
}

// TestAdmissionPriority: with max_concurrent = 1 and a run holding the
// slot, 50 spawns at 5 priorities in a shuffled order all wait; ox-ps
// lists them queued in the order they will start (priority, then first
// come); a killed one leaves the queue with its exit recorded; once the
// slot frees they run one at a time in exactly that order.
func TestAdmissionPriority(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[runs]\nmax_concurrent = 1\n"})
	events := startEvents(t, d, "--type", "run.*")
	hold := spawnRec(t, d, "adm", 0, "sleep", "1000")
	if hold.State != proto.RunRunning {
		t.Fatalf("the first run: %+v", hold)
	}
	const n = 20
	prios := make([]int, n)
	for i := range prios {
		prios[i] = i % 5
	}
	rand.New(rand.NewSource(1)).Shuffle(n, func(i, j int) { prios[i], prios[j] = prios[j], prios[i] })
	type spawned struct {
		id   string
		prio int
		seq  int
	}
	var all []spawned
	for i, p := range prios {
		rec := spawnRec(t, d, "adm", p, "true")
		if rec.State != proto.RunQueued || rec.Priority != p || rec.PID != 0 {
			t.Fatalf("spawn %d: %+v, want queued", i, rec)
		}
		all = append(all, spawned{rec.ID, p, i})
	}
	want := slices.Clone(all)
	slices.SortStableFunc(want, func(a, b spawned) int { return b.prio - a.prio })

	ps := psRecs(t, d, "-a", "adm")
	if len(ps) != n+1 || ps[0].ID != hold.ID {
		t.Fatalf("ox-ps: %d runs, first %+v", len(ps), ps[0])
	}
	for i, w := range want {
		if got := ps[i+1]; got.ID != w.id || got.State != proto.RunQueued {
			t.Fatalf("ox-ps queue position %d: %s (%s, priority %d), want %s (priority %d)", i, got.ID, got.State, got.Priority, w.id, w.prio)
		}
	}

	// Kill one in the middle of the queue: gone from it, its exit recorded.
	victim := want[n/2]
	r := d.ox("", "ox-kill", victim.id)
	if r.code != 0 {
		t.Fatalf("ox-kill of a queued run: exit %d: %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-wait", victim.id)
	if r.code != 143 || !strings.Contains(r.stdout, "killed while queued") {
		t.Fatalf("ox-wait of a run killed in the queue: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	want = slices.DeleteFunc(want, func(s spawned) bool { return s.id == victim.id })
	if len(psRecs(t, d, "-a", "adm")) != n {
		t.Fatal("the killed run is still listed as live")
	}

	// Free the slot; every queued run starts and exits, one at a time.
	d.mustOx(t, "", "ox-kill", "-s", "KILL", hold.ID)
	ids := make([]string, len(want))
	for i, w := range want {
		ids[i] = w.id
	}
	r = d.ox("", "ox-wait", ids...)
	if r.code != 0 {
		t.Fatalf("ox-wait of the queued runs: exit %d: %s", r.code, r.stderr)
	}
	var started []string
	for _, l := range strings.Split(strings.TrimSpace(d.mustOx(t, "", "ox-audit", "log", "--op", "run.spawn")), "\n") {
		var e struct{ Target string }
		json.Unmarshal([]byte(l), &e)
		if _, id, ok := strings.Cut(e.Target, ":"); ok && id != hold.ID {
			started = append(started, id)
		}
	}
	if !slices.Equal(started, ids) {
		t.Fatalf("start order:\n got %v\nwant %v", started, ids)
	}
	// The events of the queue: run.queued for each spawn that waited.
	queued := 0
	for queued < n {
		ev := next(t, events)
		if ev.Event == "run.queued" {
			queued++
		}
	}
}

// TestAdmissionPerAgent: max_per_agent bounds each agent by itself: a
// second run of a busy agent waits while another agent's starts; the
// agent's policy (limits.runs) may bound it lower.
func TestAdmissionPerAgent(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[runs]\nmax_per_agent = 2\n"})
	a1 := spawnRec(t, d, "pa", 0, "sleep", "1000")
	a2 := spawnRec(t, d, "pa", 0, "sleep", "1000")
	a3 := spawnRec(t, d, "pa", 0, "true")
	b1 := spawnRec(t, d, "pb", 0, "sleep", "1000")
	if a1.State != proto.RunRunning || a2.State != proto.RunRunning || a3.State != proto.RunQueued || b1.State != proto.RunRunning {
		t.Fatalf("states: %s %s %s %s", a1.State, a2.State, a3.State, b1.State)
	}
	// The policy's limits.runs = 1 for pb: the next one of pb waits.
	pol := d.mustOx(t, "", "ox-policy", "show", "-a", "pb")
	pol = regexp.MustCompile(`(?m)^runs = \d+$`).ReplaceAllString(pol, "runs = 1")
	if !strings.Contains(pol, "\nruns = 1\n") {
		t.Fatalf("the default policy has no limits.runs:\n%s", pol)
	}
	f := filepath.Join(d.dir, "pb.toml")
	os.WriteFile(f, []byte(pol), 0o600)
	d.mustOx(t, "", "ox-policy", "set", "-a", "pb", f)
	if b2 := spawnRec(t, d, "pb", 0, "true"); b2.State != proto.RunQueued {
		t.Fatalf("pb's second run: %s, want queued", b2.State)
	}
	d.mustOx(t, "", "ox-kill", a1.ID)
	if r := d.ox("", "ox-wait", a3.ID); r.code != 0 {
		t.Fatalf("ox-wait %s: exit %d %s", a3.ID, r.code, r.stderr)
	}
	d.mustOx(t, "", "ox-kill", a2.ID, b1.ID)
}

// TestResourcesBusyRun: a run spinning on a CPU, with a child: ox-ps
// --json and ox-top give CPU time that grows, RSS close to the sum of
// /proc's VmRSS of its processes, and their open fds.
func TestResourcesBusyRun(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	run := spawnRec(t, d, "res", 0, "sh", "-c", "sleep 1000 & while :; do :; done")
	defer d.ox("", "ox-kill", "-s", "KILL", run.ID)
	var first proto.RunRecord
	// Three processes: the init of its sandbox, sh and sleep.
	eventually(t, "the run's three processes", func() bool {
		ps := psRecs(t, d, "-a", "res")
		first = ps[0]
		return len(ps) == 1 && ps[0].Procs == 3
	})
	time.Sleep(1500 * time.Millisecond)
	ps := psRecs(t, d, "-a", "res")
	now := ps[0]
	if now.CPU <= first.CPU || now.CPU < 0.3 {
		t.Fatalf("CPU time did not grow: %.2fs then %.2fs", first.CPU, now.CPU)
	}
	// /proc's view of the same processes: the group of the leader.
	var rss int64
	fds := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if f[2] != strconv.Itoa(run.PID) {
			continue
		}
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				kb, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
				rss += kb << 10
			}
		}
		fd, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		fds += len(fd)
	}
	if rss == 0 || now.RSS < rss*8/10 || now.RSS > rss*12/10 {
		t.Fatalf("RSS %d, /proc's VmRSS sum %d", now.RSS, rss)
	}
	if now.FDs != fds {
		t.Fatalf("fds %d, /proc has %d", now.FDs, fds)
	}
	// ox-top off a terminal: one resources record per sample.
	r := d.ox("", "ox-top", "-a", "res", "-n", "2", "-d", "300ms")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("ox-top -n 2: exit %d, %d lines: %s %s", r.code, len(lines), r.stdout, r.stderr)
	}
	var top proto.ResourcesRecord
	if err := json.Unmarshal([]byte(lines[1]), &top); err != nil || top.Type != "resources" || len(top.Runs) != 1 {
		t.Fatalf("ox-top printed %q: %v", lines[1], err)
	}
	if p := top.Runs[0].CPUPercent; p == nil || *p < 20 || top.Runs[0].CPU < now.CPU || top.Host.Cores < 1 || top.Admission.Running != 1 {
		t.Fatalf("ox-top sample: %+v", top)
	}
	t.Logf("busy run: CPU %.2fs, RSS %d (/proc %d), fds %d, %.0f%% CPU", now.CPU, now.RSS, rss, now.FDs, *top.Runs[0].CPUPercent)
}

// TestStatus: ox-status passes against a working daemon, and says what to
// fix (exit 1) for a daemon that is not there and a config that does not
// parse.
func TestStatus(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	good := filepath.Join(d.dir, "good.toml")
	os.WriteFile(good, []byte("[runs]\nmax_concurrent = 4\n"), 0o600)
	r := d.ox("", "ox-status", "--config", good)
	if r.code != 0 {
		t.Fatalf("ox-status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checks := map[string]proto.CheckRecord{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var c proto.CheckRecord
		json.Unmarshal([]byte(l), &c)
		checks[c.Check] = c
	}
	for _, name := range []string{"config", "socket", "mount", "data", "policies", "llm"} {
		if c, ok := checks[name]; !ok || !c.OK {
			t.Errorf("check %s: %+v", name, c)
		}
	}

	bad := filepath.Join(d.dir, "bad.toml")
	os.WriteFile(bad, []byte("[runs]\nmax_concurent = 4\n"), 0o600)
	r = run(t, []string{"OXIOS_SOCKET=" + filepath.Join(d.dir, "nothing.sock")}, "", "ox-status", "--config", bad, "--timeout", "1s")
	if r.code != 69 || !strings.Contains(r.stdout, "max_concurent") || !strings.Contains(r.stdout, `"check":"socket","ok":false`) || !strings.Contains(r.stdout, "start oxiosd") {
		t.Fatalf("ox-status with a bad config and no daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
