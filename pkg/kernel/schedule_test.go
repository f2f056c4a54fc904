package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
)

func testKernel(t *testing.T, data string, clk sched.Clock) *Kernel {
	t.Helper()
	k := queueKernel(t, data)
	if err := k.StartScheduler(clk); err != nil {
		t.Fatal(err)
	}
	return k
}

func code(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// fired waits for the next schedule.fired event on sub.
func fired(t *testing.T, sub *bus.Sub) *proto.JobRecord {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-sub.Ready():
			evs, _ := sub.Take(nil)
			for _, ev := range evs {
				if ev.Name == proto.EventScheduleFired {
					return ev.Data.(*proto.JobRecord)
				}
			}
		case <-deadline:
			t.Fatal("no schedule.fired event")
		}
	}
}

func noFiring(t *testing.T, sub *bus.Sub) {
	t.Helper()
	select {
	case <-sub.Ready():
		evs, _ := sub.Take(nil)
		for _, ev := range evs {
			if ev.Name == proto.EventScheduleFired || ev.Op == proto.OpScheduleFire {
				t.Fatalf("unexpected firing: %+v", ev)
			}
		}
	case <-time.After(100 * time.Millisecond):
	}
}

func waitRun(t *testing.T, k *Kernel, id string) {
	t.Helper()
	r, ok := k.sup.Get(id)
	if !ok {
		t.Fatalf("no run %s", id)
	}
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("run %s did not end", id)
	}
}

// TestScheduleFireAndCatchUp fires a job at its minute with an injected
// clock, then restarts the kernel on the same data with the clock past two
// of its times: the job asking for catch-up runs once, the other not.
func TestScheduleFireAndCatchUp(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	ctx := context.Background()
	clk := sched.NewManualClock(time.Date(2026, 11, 21, 10, 58, 30, 0, time.UTC))
	k := testKernel(t, data, clk)
	for _, a := range []proto.ScheduleAddArgs{
		{Agent: "ops", Name: "tick", Schedule: "0 * * * *", TZ: "UTC", CatchUp: true, Command: []string{"true"}},
		{Agent: "ops", Name: "plain", Schedule: "0 * * * *", TZ: "UTC", Command: []string{"true"}},
	} {
		rec, err := k.ScheduleAdd(ctx, admin, a, nil)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Next == nil || !rec.Next.Equal(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)) || rec.Overlap != "skip" {
			t.Fatalf("added %+v", rec)
		}
	}
	sub := k.bus.Subscribe(100, nil)
	clk.Set(time.Date(2026, 11, 21, 10, 59, 59, 0, time.UTC))
	noFiring(t, sub)
	clk.Set(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC))
	got := map[string]*proto.JobRecord{}
	for range 2 {
		r := fired(t, sub)
		got[r.Name] = r
	}
	for _, name := range []string{"tick", "plain"} {
		r := got[name]
		if r == nil || r.Run == "" || r.Fired != "schedule" || !r.Due.Equal(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)) {
			t.Fatalf("%s fired %+v", name, r)
		}
		waitRun(t, k, r.Run)
	}
	sub.Close()
	// The file keeps the firing.
	b, _, err := k.state.Load(state.Ref(state.SpaceSys, "ops"), jobs.Key("tick"))
	if err != nil {
		t.Fatal(err)
	}
	var jf jobs.File
	if err := json.Unmarshal(b, &jf); err != nil || jf.LastDue == nil || !jf.LastDue.Equal(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)) || jf.LastRun != got["tick"].Run {
		t.Fatalf("job file %s (%v)", b, err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}

	// oxiosd was down at 12:00 and 13:00.
	clk = sched.NewManualClock(time.Date(2026, 11, 21, 13, 30, 0, 0, time.UTC))
	cfg := config.Default()
	cfg.Data, cfg.NoMount = data, true
	k, err = New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	sub = k.bus.Subscribe(100, nil)
	defer sub.Close()
	if err := k.StartScheduler(clk); err != nil {
		t.Fatal(err)
	}
	r := fired(t, sub)
	if r.Name != "tick" || r.Fired != "catch-up" || !r.Due.Equal(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("catch-up %+v", r)
	}
	waitRun(t, k, r.Run)
	noFiring(t, sub)
	var names []string
	k.ScheduleList(ctx, admin, proto.ScheduleListArgs{}, nil, func(j *proto.JobRecord) error {
		names = append(names, j.Name)
		if !j.Next.Equal(time.Date(2026, 11, 21, 14, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: next %s after the restart", j.Name, j.Next)
		}
		return nil
	})
	if strings.Join(names, ",") != "plain,tick" {
		t.Fatalf("jobs after the restart: %v", names)
	}
}

func TestScheduleRefusals(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	other := &Cred{UID: 4242, Agent: "other", Run: "rother"}
	ctx := context.Background()
	k := testKernel(t, data, sched.NewManualClock(time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)))
	defer k.Close()
	ok := proto.ScheduleAddArgs{Agent: "ops", Name: "job", Schedule: "@daily", Command: []string{"true"}}
	if _, err := k.ScheduleAdd(ctx, admin, ok, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*proto.ScheduleAddArgs)
		cred *Cred
		code string
		msg  string
	}{
		{func(a *proto.ScheduleAddArgs) {}, admin, proto.EEXIST, "exists"},
		{func(a *proto.ScheduleAddArgs) { a.Agent = "dev" }, admin, proto.EEXIST, "of agent ops"},
		{func(a *proto.ScheduleAddArgs) { a.Name, a.Schedule = "b", "0 25 * * *" }, admin, proto.EINVAL, "field 2 (hour)"},
		{func(a *proto.ScheduleAddArgs) { a.Name, a.Schedule = "b", "*/5 * * * sun-funday" }, admin, proto.EINVAL, "field 5 (day of week)"},
		{func(a *proto.ScheduleAddArgs) { a.Name, a.TZ = "b", "Atlantis/Capital" }, admin, proto.EINVAL, "unknown time zone"},
		{func(a *proto.ScheduleAddArgs) { a.Name, a.Overlap = "b", "sometimes" }, admin, proto.EINVAL, "overlap"},
		{func(a *proto.ScheduleAddArgs) { a.Name = "B!" }, admin, proto.EINVAL, "job name"},
		{func(a *proto.ScheduleAddArgs) { a.Name, a.Command = "b", nil }, admin, proto.EINVAL, "nothing to run"},
		{func(a *proto.ScheduleAddArgs) { a.Name, a.Command = "b", []string{"no-such-command-here"} }, admin, proto.ENOENT, "not found"},
		{func(a *proto.ScheduleAddArgs) { a.Name = "b" }, other, proto.EPERM, "may not act on agent"},
	} {
		a := ok
		c.edit(&a)
		_, err := k.ScheduleAdd(ctx, c.cred, a, nil)
		if code(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("add %+v: %v, want %s with %q", a, err, c.code, c.msg)
		}
	}
	if _, err := k.ScheduleRm(ctx, admin, proto.ScheduleArgs{Name: "nope"}, nil); code(err) != proto.ENOENT {
		t.Errorf("rm of an unknown job: %v", err)
	}
	if _, err := k.ScheduleRun(ctx, admin, proto.ScheduleArgs{Name: "nope"}, nil); code(err) != proto.ENOENT {
		t.Errorf("run of an unknown job: %v", err)
	}
	if _, err := k.ScheduleRm(ctx, admin, proto.ScheduleArgs{Name: "job", Agent: "dev"}, nil); code(err) != proto.ENOENT {
		t.Errorf("rm naming another agent: %v", err)
	}
	if _, err := k.ScheduleRm(ctx, other, proto.ScheduleArgs{Name: "job"}, nil); code(err) != proto.EPERM {
		t.Errorf("rm by a run of another agent: %v", err)
	}
	n := 0
	k.ScheduleList(ctx, other, proto.ScheduleListArgs{}, nil, func(*proto.JobRecord) error { n++; return nil })
	if n != 0 {
		t.Errorf("a run of another agent lists %d jobs of ops", n)
	}
	// The agent's own run may manage its own jobs.
	self := &Cred{UID: 4242, Agent: "ops", Run: "rself"}
	if _, err := k.ScheduleRm(ctx, self, proto.ScheduleArgs{Name: "job"}, nil); err != nil {
		t.Errorf("rm by a run of the job's agent: %v", err)
	}
	if _, err := k.ScheduleRm(ctx, admin, proto.ScheduleArgs{Name: "job"}, nil); code(err) != proto.ENOENT {
		t.Errorf("rm twice: %v", err)
	}
}

// TestScheduleOverlapSkip: a job due while its run still runs is skipped,
// audited with EBUSY naming that run; ox-schedule run is refused.
func TestScheduleOverlapSkip(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	ctx := context.Background()
	clk := sched.NewManualClock(time.Date(2026, 11, 21, 10, 0, 30, 0, time.UTC))
	k := testKernel(t, data, clk)
	defer k.Close()
	if _, err := k.ScheduleAdd(ctx, admin, proto.ScheduleAddArgs{Agent: "ops", Name: "slow", Schedule: "* * * * *", TZ: "UTC", Command: []string{"sleep", "60"}}, nil); err != nil {
		t.Fatal(err)
	}
	sub := k.bus.Subscribe(100, nil)
	defer sub.Close()
	clk.Set(time.Date(2026, 11, 21, 10, 1, 0, 0, time.UTC))
	r := fired(t, sub)
	clk.Set(time.Date(2026, 11, 21, 10, 2, 0, 0, time.UTC))
	deadline := time.After(10 * time.Second)
	for skipped := false; !skipped; {
		select {
		case <-sub.Ready():
			evs, _ := sub.Take(nil)
			for _, ev := range evs {
				if ev.Name == proto.EventScheduleFired {
					t.Fatalf("fired while the run runs: %+v", ev)
				}
				if ev.Op == proto.OpScheduleFire && ev.Result == proto.EBUSY {
					if ev.Key != "slow "+r.Run || ev.Data.(*proto.JobRecord).Running != r.Run {
						t.Fatalf("skip %+v", ev)
					}
					skipped = true
				}
			}
		case <-deadline:
			t.Fatal("no skip")
		}
	}
	if _, err := k.ScheduleRun(ctx, admin, proto.ScheduleArgs{Name: "slow"}, nil); code(err) != proto.EBUSY {
		t.Fatalf("schedule.run while the run runs: %v", err)
	}
	run, _ := k.sup.Get(r.Run)
	run.End("test over")
	<-run.Done()
	rec, err := k.ScheduleRun(ctx, admin, proto.ScheduleArgs{Name: "slow"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := fired(t, sub); m.Fired != "manual" || m.Run != rec.ID {
		t.Fatalf("manual firing %+v", m)
	}
	rr, ok := k.sup.Get(rec.ID)
	if !ok {
		t.Fatalf("run %s of the manual firing not found", rec.ID)
	}
	rr.End("test over")
	<-rr.Done()
}

// Forks of an agent with jobs and schedule changes side by side: a
// schedule add, enable or rm holds the jobs table while its change
// commits, and a fork runs on the committer and looks in that table for
// the names of its copies. Taking the table there left each waiting for
// the other, and every later commit with them.
func TestForkWithScheduleChangesDoesNotDeadlock(t *testing.T) {
	k := testKernel(t, t.TempDir(), nil)
	// Closed before the folder is removed: the forks' commits reach git
	// in the background.
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "src", Key: "k", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		a := proto.ScheduleAddArgs{Agent: "src", Name: fmt.Sprintf("src-job%d", i), Schedule: "@daily", Command: []string{"true"}}
		if _, err := k.ScheduleAdd(ctx, admin, a, nil); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 30
	done := make(chan error, 2)
	go func() {
		for i := range rounds {
			if _, err := k.Fork(ctx, admin, proto.ForkArgs{Agent: "src", Name: fmt.Sprintf("fork%d", i)}, nil); err != nil {
				done <- fmt.Errorf("fork %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	go func() {
		for i := range rounds * 4 {
			name := fmt.Sprintf("other-%d", i)
			a := proto.ScheduleAddArgs{Agent: "other", Name: name, Schedule: "@daily", Command: []string{"true"}}
			if _, err := k.ScheduleAdd(ctx, admin, a, nil); err != nil {
				done <- fmt.Errorf("add %s: %w", name, err)
				return
			}
			if _, err := k.ScheduleRm(ctx, admin, proto.ScheduleArgs{Name: name}, nil); err != nil {
				done <- fmt.Errorf("rm %s: %w", name, err)
				return
			}
		}
		done <- nil
	}()
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("forks and schedule changes deadlocked")
		}
	}
	// Each fork has the copies of src's jobs, disabled.
	var copies int
	k.ScheduleList(ctx, admin, proto.ScheduleListArgs{}, nil, func(j *proto.JobRecord) error {
		if strings.HasPrefix(j.Name, "fork") {
			copies++
			if !j.Disabled {
				t.Errorf("copy %s is enabled", j.Name)
			}
		}
		return nil
	})
	if copies != rounds*3 {
		t.Fatalf("%d copies of jobs, want %d", copies, rounds*3)
	}
}
