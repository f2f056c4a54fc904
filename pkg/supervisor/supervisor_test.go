package supervisor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func newSup(t *testing.T, dir string) *Supervisor {
	t.Helper()
	s, err := New(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(t *testing.T, s *Supervisor, id string, argv ...string) *Run {
	t.Helper()
	r, err := s.Start(Spec{ID: id, Agent: "a", Argv: argv, Dir: filepath.Join(t.TempDir(), id), Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func follow(t *testing.T, r *Run) []map[string]any {
	t.Helper()
	var recs []map[string]any
	err := r.Follow(context.Background(), func(b []byte) error {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("record %q: %v", b, err)
		}
		recs = append(recs, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestOutputAndExit(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	// A line longer than maxLine is split; a last line without newline
	// is kept; a grandchild holding stdout does not hold the exit.
	r := start(t, s, "r1", "/bin/sh", "-c", "head -c 70000 /dev/zero | tr '\\0' x; echo; printf tail; (sleep 30 &) ; exit 7")
	recs := follow(t, r)
	if recs[0]["type"] != "run" || recs[len(recs)-1]["type"] != "exit" || recs[len(recs)-1]["status"].(float64) != 7 {
		t.Fatalf("records: first %v last %v", recs[0], recs[len(recs)-1])
	}
	var lens []int
	for _, m := range recs {
		if m["type"] == "output" {
			lens = append(lens, len(m["text"].(string)))
		}
	}
	if len(lens) != 3 || lens[0] != maxLine || lens[1] != 70000-maxLine || lens[2] != 4 {
		t.Fatalf("output line lengths %v", lens)
	}
	if _, err := os.Stat(r.Spec().Dir); !os.IsNotExist(err) {
		t.Fatalf("workspace not removed at exit: %v", err)
	}
}

// OnExit has run by the time Done is closed: a waiter finds the exit
// accounted for (the kernel's slot given back, the exit audited).
func TestOnExitBeforeDone(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	var exited atomic.Bool
	s.OnExit = func(r *Run) {
		time.Sleep(50 * time.Millisecond) // a slow audit write
		exited.Store(true)
	}
	r := start(t, s, "r1", "/bin/true")
	<-r.Done()
	if !exited.Load() {
		t.Fatal("Done closed before OnExit returned")
	}
}

// A follower of a run's records is told its end (the exit record) only
// once OnExit has run: what the kernel makes durable of the end (a
// charge owed to the agent's home) is on disk before anyone hears of it.
func TestFollowExitAfterOnExit(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	var exited atomic.Bool
	release := make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	defer let() // before Close, which waits for OnExit
	s.OnExit = func(r *Run) {
		<-release
		time.Sleep(20 * time.Millisecond)
		exited.Store(true)
	}
	r := start(t, s, "r1", "/bin/sh", "-c", "echo hi")
	got := make(chan bool, 1)
	go r.Follow(context.Background(), func(rec []byte) error {
		if strings.Contains(string(rec), `"type":"exit"`) {
			got <- exited.Load()
		}
		return nil
	})
	select {
	case <-got:
		t.Fatal("the exit record was followed while OnExit ran")
	case <-time.After(300 * time.Millisecond):
	}
	let()
	if !<-got {
		t.Fatal("the exit record was followed before OnExit returned")
	}
}

func TestRunOf(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	// A child that leaves the process group is still found by ancestry.
	r := start(t, s, "r1", "/bin/sh", "-c", "setsid sleep 30 & echo $!; wait")
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(s.dir, "r1.jsonl"))
		for _, l := range strings.Split(string(b), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["type"] == "output" {
				child, _ = strconv.Atoi(m["text"].(string))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("no child pid printed")
	}
	for _, pid := range []int{r.rec.PID, child} {
		got, ok := s.RunOf(int32(pid))
		if !ok || got != r {
			t.Fatalf("RunOf(%d) = %v, %v", pid, got, ok)
		}
	}
	if _, ok := s.RunOf(int32(os.Getpid())); ok {
		t.Fatal("the test process is not in a run")
	}
	syscall.Kill(child, syscall.SIGKILL)
	r.Signal(syscall.SIGKILL)
	<-r.Done()
	if _, ok := s.RunOf(int32(r.rec.PID)); ok {
		t.Fatal("an exited run still owns its pid")
	}
}

func TestLostRun(t *testing.T) {
	dir := t.TempDir()
	// A log as a crash leaves it: a run record, output, a torn line.
	rec := proto.RunRecord{Type: "run", ID: "rlost", Agent: "a", State: "running", Started: time.Now().UTC(), Command: []string{"sleep"}}
	b, _ := json.Marshal(&rec)
	log := string(b) + "\n" + `{"type":"output","run":"rlost","stream":"stdout","text":"hi"}` + "\n" + `{"type":"outp`
	os.WriteFile(filepath.Join(dir, "rlost.jsonl"), []byte(log), 0o600)
	s := newSup(t, dir)
	defer s.Close()
	r, ok := s.Get("rlost")
	if !ok {
		t.Fatal("the run is not known after a restart")
	}
	got := r.Record()
	if got.State != proto.RunLost || got.Status == nil || *got.Status != 255 {
		t.Fatalf("lost run record: %+v", got)
	}
	recs := follow(t, r)
	if len(recs) != 3 || recs[1]["text"] != "hi" || recs[2]["type"] != "exit" {
		t.Fatalf("lost run records: %v", recs)
	}
	// And a second restart reads it as ended, not lost again.
	s2 := newSup(t, dir)
	defer s2.Close()
	r2, _ := s2.Get("rlost")
	if n := len(follow(t, r2)); n != 3 {
		t.Fatalf("after a second restart: %d records", n)
	}
}

func TestResolverNamesTheRun(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	r := start(t, s, "r1", "/bin/sleep", "30")
	defer r.End("test over")
	agent, run, err := Resolver{s}.Attribute(uint32(os.Getuid()), int32(r.Record().PID))
	if err != nil || agent != "a" || run != "r1" {
		t.Fatalf("the run's process: %q %q %v", agent, run, err)
	}
	if agent, run, err := (Resolver{s}).Attribute(uint32(os.Getuid()), int32(os.Getpid())); agent != "" || run != "" || err != nil {
		t.Fatalf("a process of no run: %q %q %v", agent, run, err)
	}
}

// A run its wall time budget ends says so in its record's error.
func TestWallEnded(t *testing.T) {
	s := newSup(t, t.TempDir())
	defer s.Close()
	r, err := s.Start(Spec{ID: "wall", Agent: "a", Argv: []string{"/bin/sleep", "30"}, Dir: filepath.Join(t.TempDir(), "wall"), Env: []string{"PATH=/usr/bin:/bin"}, Wall: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	rec := r.Record()
	if !WallEnded(&rec) || !strings.Contains(rec.Error, "exceeded") {
		t.Fatalf("%+v", rec)
	}
	r2 := start(t, s, "quick", "/bin/true")
	<-r2.Done()
	if rec := r2.Record(); WallEnded(&rec) {
		t.Fatalf("%+v", rec)
	}
}

func TestOpenAndStatus(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Open(filepath.Join(t.TempDir(), "runs"), 7, false, log)
	if err != nil || s.Keep != 7 || s.Cgroups != nil {
		t.Fatalf("%+v %v", s, err)
	}
	defer s.Close()
	if s.Status("nope") != nil || s.Has("nope") {
		t.Fatal("the status of no run")
	}
	r, err := s.Start(Spec{ID: "r1", Agent: "a", Argv: []string{"/bin/sh", "-c", "exit 3"}, Dir: filepath.Join(t.TempDir(), "r1"), Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	<-r.Done()
	if st := s.Status("r1"); st == nil || *st != 3 || !s.Has("r1") {
		t.Fatalf("status %v", st)
	}
}

func TestOverBudget(t *testing.T) {
	var none *Run
	none.OverBudget("tokens") // the caller was no run: nothing to end
	s := newSup(t, t.TempDir())
	r := start(t, s, "r1", "/bin/sleep", "30")
	r.OverBudget("tokens 10 of 10")
	select {
	case <-r.Done():
	case <-time.After(3 * Grace):
		t.Fatal("a run over its budget was not ended")
	}
	if rec := r.Record(); !strings.Contains(rec.Error, "over budget: tokens 10 of 10") {
		t.Errorf("%+v", rec)
	}
}
