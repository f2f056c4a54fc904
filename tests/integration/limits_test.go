package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/share"
)

// cgroupsOffered reports whether the daemon made cgroups for its runs
// (it logs where at start); without, only rlimits bind, and a fork bomb
// as root is not contained by them.
func cgroupsOffered(t *testing.T, d *daemon) bool {
	// The daemon logs one or the other before it is ready; its stderr
	// reaches the test a moment later.
	var log string
	waitFor(t, "the daemon's word on cgroups", func() bool {
		log = d.stderr.String()
		return strings.Contains(log, "cgroups for runs")
	})
	return !strings.Contains(log, "no cgroups for runs")
}

// limitsPolicy is the default policy with [limits] replaced.
func limitsPolicy(t *testing.T, limits string) string {
	t.Helper()
	def := string(share.DefaultPolicy)
	re := regexp.MustCompile(`(?s)\n\[limits\]\n.*?\n\[`)
	out := re.ReplaceAllString(def, "\n[limits]\n"+limits+"\n\n[")
	if out == def {
		t.Fatal("default policy has no [limits] to replace")
	}
	return writePolicy(t, out)
}

// runProcs lists the live processes of a run (by the OXIOS_RUN its
// processes inherit).
func runProcs(run string) []string {
	want := []byte("OXIOS_RUN=" + run + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(b), string(want)) {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				pids = append(pids, e.Name())
			}
		}
	}
	return pids
}

// runPidsCurrent is the pids.current file of run's cgroup (v1 or v2),
// or "" when it has none.
func runPidsCurrent(run string) string {
	for _, pat := range []string{"/sys/fs/cgroup/pids/*/", "/sys/fs/cgroup/pids/*/*/", "/sys/fs/cgroup/*/", "/sys/fs/cgroup/*/*/", "/sys/fs/cgroup/*/*/*/"} {
		if m, _ := filepath.Glob(pat + run + "/pids.current"); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// forkBomb runs a fork bomb as agent bomb under a 32-process limit. It
// reports whether the bomb was contained (never more than the limit, and
// nothing of it left once the run is killed) and whether the refused forks
// are on the audit log.
func forkBomb(t *testing.T, d *daemon) (denied, audited bool) {
	t.Helper()
	d.mustOx(t, "", "ox-policy", "set", "-a", "bomb", limitsPolicy(t, "memory = \"0\"\ncpu = \"0\"\nprocesses = 32\nopen_files = 1024"))
	var rec struct{ ID string }
	// The bomb starts again whenever it collapses (its forks fail at the
	// limit, so its processes end): it keeps the group at the limit
	// until killed, rather than for the moment a loaded machine's first
	// look at /proc could miss.
	out := d.mustOx(t, "", "ox-spawn", "-a", "bomb", "-d", "--", "/bin/sh", "-c", `f() { f & f & wait; }; (while :; do f; done) & exec sleep 30`)
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.ID == "" {
		t.Fatalf("spawn: %q", out)
	}
	// The run's processes, counted by its cgroup where it has one (one
	// read; a walk of /proc on a loaded machine took long enough to see
	// only the leader), else by their environment in /proc.
	current := runPidsCurrent(rec.ID)
	peak := 0
	for deadline := time.Now().Add(1500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if current != "" {
			if b, err := os.ReadFile(current); err == nil {
				n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				peak = max(peak, n)
				continue
			}
		}
		peak = max(peak, len(runProcs(rec.ID)))
	}
	t.Logf("fork bomb: at most %d processes seen (limit 32)", peak)
	// The leader sleeps (exec: it needs no fork) while the bomb fills the
	// run's group; it may still have ended if its one fork failed: then
	// the run is over, and what was left of it killed with it.
	if k := d.ox("", "ox-kill", "-s", "KILL", rec.ID); k.code != 0 && !strings.Contains(k.stderr, "ESRCH") {
		t.Fatalf("ox-kill: %+v", k)
	}
	w := d.ox("", "ox-wait", rec.ID)
	var left []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left = runProcs(rec.ID); len(left) == 0 {
			break
		}
	}
	denied = peak > 1 && peak <= 32 && len(left) == 0 && strings.Contains(w.stdout, "forks refused at the process limit")
	if !denied {
		t.Errorf("fork bomb not contained: peak %d, left %v, wait %q", peak, left, w.stdout)
	}
	log := d.mustOx(t, "", "ox-audit", "log", "--op", "run.limit")
	audited = strings.Contains(log, "bomb:"+rec.ID) && strings.Contains(log, `"result":"EAGAIN"`)
	if !audited {
		t.Errorf("refused forks not audited:\n%s", log)
	}
	return denied, audited
}

// memoryBomb runs a process growing past a 64 MiB memory limit as agent
// hog: it must fail, and the limit it hit must be on the audit log.
func memoryBomb(t *testing.T, d *daemon) (denied, audited bool) {
	t.Helper()
	d.mustOx(t, "", "ox-policy", "set", "-a", "hog", limitsPolicy(t, "memory = \"64MiB\"\ncpu = \"0\"\nprocesses = 0\nopen_files = 1024"))
	r := d.ox("", "ox-spawn", "-a", "hog", "--", "/bin/sh", "-c", `x=$(head -c 300000000 /dev/zero | tr '\0' x); echo got ${#x}`)
	denied = r.code != 0 && !strings.Contains(r.stdout, "got 300000000")
	if !denied {
		t.Errorf("memory bomb not stopped: exit %d %q", r.code, r.stdout)
	}
	log := d.mustOx(t, "", "ox-audit", "log", "--op", "run.limit")
	audited = strings.Contains(log, "hog:") && strings.Contains(log, `"result":"ENOMEM"`)
	if !audited {
		t.Errorf("memory limit not audited (exit %d):\n%s", r.code, log)
	}
	return denied, audited
}

// TestLimitsFromTheStart: a sandboxed exec or run has its policy's
// rlimits from its first instruction, and never fails to get them. They
// were set from outside with prlimit once the sandbox's shim had started:
// a daemon without CAP_SYS_RESOURCE (root in a container) got EPERM
// whenever the shim had already changed to the agent's uid, which failed
// the exec ("operation not permitted") and left a run without limits;
// and a command could run before its limits were set.
func TestLimitsFromTheStart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "lim", "x", "1")
	d.mustOx(t, "", "ox-policy", "set", "-a", "lim", limitsPolicy(t, "memory = \"0\"\ncpu = \"0\"\nprocesses = 0\nopen_files = 123"))
	want := regexp.MustCompile(`Max open files\s+123\s+123\s`)
	for i := range 8 {
		out := d.mustOx(t, "", "ox-exec", "-a", "lim", "--", "cat", "/proc/self/limits")
		if !want.MatchString(out) {
			t.Fatalf("exec %d: the command's limits are not the policy's open_files = 123:\n%s", i, out)
		}
		out = d.mustOx(t, "", "ox-spawn", "-a", "lim", "--", "cat", "/proc/self/limits")
		if !want.MatchString(out) {
			t.Fatalf("run %d: the command's limits are not the policy's open_files = 123:\n%s", i, out)
		}
	}
	// From inside, the run cannot raise them (soft and hard alike, and
	// no privilege left to raise a hard limit).
	if out := d.mustOx(t, "", "ox-spawn", "-a", "lim", "--", "/bin/sh", "-c", "ulimit -n 4096 && echo raised; ulimit -n"); strings.Contains(out, `"text":"raised"`) || !strings.Contains(out, `"text":"123"`) {
		t.Fatalf("a run raised its open_files limit:\n%s", out)
	}
	if strings.Contains(d.stderr.String(), "run limits") {
		t.Fatalf("a run's limits were not set:\n%s", d.stderr.String())
	}
}
