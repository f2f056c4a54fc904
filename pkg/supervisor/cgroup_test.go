package supervisor

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseProcCgroup(t *testing.T) {
	got := parseProcCgroup("12:pids:/user.slice\n4:memory:/process_api/b3\n3:cpu,cpuacct:/\n1:name=systemd:/init.scope\n0::/system.slice/oxiosd.service\n")
	want := map[string]string{"pids": "/user.slice", "memory": "/process_api/b3", "cpu": "/", "cpuacct": "/", "name=systemd": "/init.scope", "": "/system.slice/oxiosd.service"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: got %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v", got)
	}
}

// cgroupsOrSkip opens the machine's cgroups; a machine without a
// writable hierarchy has only rlimits, and these tests do not apply.
func cgroupsOrSkip(t *testing.T) *Cgroups {
	cg, err := OpenCgroups()
	if err != nil {
		t.Skipf("no cgroups here: %v", err)
	}
	t.Cleanup(cg.Close)
	return cg
}

// alive reports the processes whose command line is argv.
func alive(argv ...string) []int {
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		// A zombie's command line is empty: it is dead.
		if err == nil && bytes.Equal(b, want) {
			var pid int
			for _, c := range e.Name() {
				pid = pid*10 + int(c-'0')
			}
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestCgroupProcessLimit: a run that forks past [limits] processes is
// refused the forks (root too: pids.max binds it where RLIMIT_NPROC does
// not), and what it leaves behind when its leader exits, even a process
// that left its process group, ends with the run.
func TestCgroupProcessLimit(t *testing.T) {
	cg := cgroupsOrSkip(t)
	s := newSup(t, t.TempDir())
	s.Cgroups = cg
	defer s.Close()
	const limit = 8
	// The bomb is a child shell (a shell dies of the fork refused it);
	// the leader then waits, with builtins only, for the test to have
	// looked at the group: a leader that exited at once could end the
	// run before the first look.
	dir := filepath.Join(t.TempDir(), "w")
	r, err := s.Start(Spec{ID: "bomb", Agent: "a", Dir: dir, Env: []string{"PATH=/usr/bin:/bin"},
		Limits: Limits{Processes: limit},
		Argv: []string{"/bin/sh", "-c", `setsid sleep 31.7 &
/bin/sh -c 'for i in $(seq 40); do sleep 31.7 & done'
while [ ! -e go ]; do :; done
exit 0`}})
	if err != nil {
		t.Fatal(err)
	}
	peak := uint64(0)
	deadline := time.Now().Add(10 * time.Second)
	for r.group.Hits().Forks == 0 && time.Now().Before(deadline) {
		if p := procsNow(r.group); p > peak {
			peak = p
		}
		time.Sleep(2 * time.Millisecond)
	}
	// A few more looks: the group must stay at its limit.
	for i := 0; i < 20; i++ {
		if p := procsNow(r.group); p > peak {
			peak = p
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	if peak == 0 || peak > limit {
		t.Fatalf("processes in the run's group peaked at %d, limit %d", peak, limit)
	}
	if n := len(alive("sleep", "31.7")); n != 0 {
		t.Fatalf("%d sleeps outlived their run", n)
	}
	if !strings.Contains(r.Record().Limits, "forks refused at the process limit") {
		t.Fatalf("exit record limits %q", r.Record().Limits)
	}
	recs := follow(t, r)
	var errText string
	for _, m := range recs {
		if m["type"] == "output" && m["stream"] == "stderr" {
			errText += m["text"].(string) + "\n"
		}
	}
	if !strings.Contains(strings.ToLower(errText), "fork") && !strings.Contains(errText, "Resource temporarily unavailable") {
		t.Fatalf("no fork refused on stderr: %q", errText)
	}
	if _, err := os.Stat(cg.v1dirOrV2("bomb")); !os.IsNotExist(err) {
		t.Fatalf("the run's group is still there: %v", err)
	}
}

// TestCgroupSignalReachesEscapee: a signal to a run reaches its processes
// that left the process group.
func TestCgroupSignalReachesEscapee(t *testing.T) {
	cg := cgroupsOrSkip(t)
	s := newSup(t, t.TempDir())
	s.Cgroups = cg
	defer s.Close()
	r := startSpec(t, s, Spec{ID: "esc", Argv: []string{"/bin/sh", "-c", "setsid sleep 32.9 & wait"}})
	deadline := time.Now().Add(5 * time.Second)
	for len(alive("sleep", "32.9")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	esc := alive("sleep", "32.9")
	if len(esc) != 1 || pgidOf(esc[0]) == r.rec.PID {
		t.Fatalf("escapee %v (pgid %d, run's %d)", esc, pgidOf(esc[0]), r.rec.PID)
	}
	if err := r.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	if len(alive("sleep", "32.9")) != 0 {
		t.Fatalf("the escapee %d lives on", esc[0])
	}
}

func startSpec(t *testing.T, s *Supervisor, spec Spec) *Run {
	t.Helper()
	spec.Agent = "a"
	spec.Dir = filepath.Join(t.TempDir(), spec.ID)
	spec.Env = []string{"PATH=/usr/bin:/bin"}
	r, err := s.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// v1dirOrV2 is where the group id is (its first controller on v1).
func (c *Cgroups) v1dirOrV2(id string) string {
	if c.v2 != "" {
		return filepath.Join(c.v2, id)
	}
	return filepath.Join(c.v1[0].parent, id)
}

// TestExecCgroupMemory: an exec past its memory limit fails, and leaves
// nothing behind.
func TestExecCgroupMemory(t *testing.T) {
	cg := cgroupsOrSkip(t)
	res, err := Exec(t.Context(), ExecSpec{
		Argv: []string{"/bin/sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' x); echo ${#x}`},
		Env:  []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Cap: 1 << 16, Timeout: 20 * time.Second,
		Limits: Limits{Memory: 64 << 20}, Cgroups: cg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == 0 || bytes.Contains(res.Stdout, []byte("200000000")) {
		t.Fatalf("a 200 MB string under a 64 MiB limit: status %d, stdout %q", res.Status, res.Stdout)
	}
	if !strings.Contains(res.Limits, "memory limit") {
		t.Fatalf("status %d, limits %q: the memory limit not seen", res.Status, res.Limits)
	}
	ents, _ := os.ReadDir(filepath.Dir(cg.v1dirOrV2("x")))
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "exec-") {
			t.Fatalf("exec group %s left behind", e.Name())
		}
	}
}

// procsNow is the count of processes (tasks) in the group now.
func procsNow(g *Group) uint64 {
	if g.v2 != "" {
		return readInt(filepath.Join(g.v2, "pids.current"))
	}
	for _, j := range g.v1 {
		if j.ctl.name == "pids" {
			return readInt(filepath.Join(j.dir, "pids.current"))
		}
	}
	return 0
}

// TestAttributeQuiet: a run's process that left its tree is found by its
// group while the run lives; once no run or exec is left, Attribute
// reads nothing of /proc (the mount asks on every request) and a process
// is nobody's run. Execs leave the count as they found it.
func TestAttributeQuiet(t *testing.T) {
	cg := cgroupsOrSkip(t)
	s := newSup(t, t.TempDir())
	s.Cgroups = cg
	defer s.Close()
	if !cg.quiet() {
		t.Fatal("held before any run")
	}
	res, err := Exec(t.Context(), ExecSpec{Cgroups: cg, Argv: []string{"/bin/true"}, Env: []string{"PATH=/usr/bin:/bin"}, Dir: t.TempDir(), Cap: 1 << 10, Timeout: 10 * time.Second})
	if err != nil || res.Status != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := Exec(t.Context(), ExecSpec{Cgroups: cg, Argv: []string{"/nonexistent"}, Dir: t.TempDir(), Cap: 1 << 10}); err == nil {
		t.Fatal("exec of /nonexistent succeeded")
	}
	if !cg.quiet() {
		t.Fatalf("execs left %d held", cg.held.Load())
	}
	// A double fork: the escapee's parent is gone, so no walk of its
	// ancestry finds the run.
	r := startSpec(t, s, Spec{ID: "quiet", Argv: []string{"/bin/sh", "-c", "(setsid sleep 33.7 &) ; sleep 60"}})
	deadline := time.Now().Add(5 * time.Second)
	for len(alive("sleep", "33.7")) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	esc := alive("sleep", "33.7")
	if len(esc) != 1 {
		t.Fatalf("escapee: %v", esc)
	}
	if cg.quiet() {
		t.Fatal("quiet while a run lives")
	}
	got, err := s.Attribute(0, int32(esc[0]))
	if err != nil || got != r {
		t.Fatalf("escapee %d attributed to %v, %v; want run %s", esc[0], got, err, r.rec.ID)
	}
	if err := r.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	for !cg.quiet() && time.Now().Before(deadline.Add(5*time.Second)) {
		time.Sleep(5 * time.Millisecond)
	}
	if !cg.quiet() {
		t.Fatalf("still %d held after the run ended", cg.held.Load())
	}
	if got, err := s.Attribute(0, int32(os.Getpid())); got != nil || err != nil {
		t.Fatalf("a process outside any run: %v, %v", got, err)
	}
}

// UseCgroups gives the runs cgroups when the machine has them, and says
// either way.
func TestUseCgroups(t *testing.T) {
	var buf bytes.Buffer
	s, err := New(t.TempDir(), slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.UseCgroups()
	out := buf.String()
	if s.Cgroups != nil {
		if !strings.Contains(out, "cgroups for runs") || !strings.Contains(out, s.Cgroups.String()) {
			t.Fatalf("log:\n%s", out)
		}
	} else if !strings.Contains(out, "no cgroups for runs: the rlimits of [limits] only") {
		t.Fatalf("log:\n%s", out)
	}
}
