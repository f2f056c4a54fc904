package sched

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func mustParse(t *testing.T, expr, tz string) *Spec {
	t.Helper()
	s, err := Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return s
}

func TestParseErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ expr, tz, want string }{
		{"61 * * * *", "", "field 1 (minute)"},
		{"0 25 * * *", "", "field 2 (hour)"},
		{"0 0 32 * *", "", "field 3 (day of month)"},
		{"0 0 * 13 *", "", "field 4 (month)"},
		{"0 0 * * mon-xyz", "", "field 5 (day of week)"},
		{"* * * *", "", "has 4 fields: want 5"},
		{"* * * * * *", "", "has 6 fields"},
		{"@fortnightly", "", "unknown descriptor"},
		{"@every soon", "", "@every DURATION"},
		{"@every 10ms", "", "shortest interval"},
		{"0 0 30 2 *", "", "never fires"},
		{"", "", "empty cron expression"},
		{"CRON_TZ=UTC 0 * * * *", "", "--tz"},
		{"0 * * * *", "Mars/Olympus", "unknown time zone"},
		{"0 * * * *", "Local", "unknown time zone"},
	} {
		_, err := Parse(c.expr, c.tz)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v, want an error with %q", c.expr, c.tz, err, c.want)
		}
	}
	for _, ok := range []string{"@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually", "@midnight", "@every 1s", "@every 1h30m", "*/15 9-17 * * mon-fri", "0 0 1,15 * *"} {
		mustParse(t, ok, "UTC")
	}
}

func TestNext(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		expr, tz, from string
		want           []string
	}{
		{"0 * * * *", "UTC", "2026-11-21T10:59:30Z", []string{"2026-11-21T11:00:00Z", "2026-11-21T12:00:00Z"}},
		{"*/15 * * * *", "UTC", "2026-11-21T10:00:00Z", []string{"2026-11-21T10:15:00Z", "2026-11-21T10:30:00Z"}},
		{"0 9 * * mon", "UTC", "2026-11-21T10:00:00Z", []string{"2026-11-23T09:00:00Z", "2026-11-30T09:00:00Z"}},
		{"@every 90s", "UTC", "2026-11-21T10:00:00Z", []string{"2026-11-21T10:01:30Z", "2026-11-21T10:03:00Z"}},
		// A time zone: 09:00 in Paris is 08:00 UTC in winter.
		{"0 9 * * *", "Europe/Paris", "2026-11-21T10:00:00Z", []string{"2026-11-22T08:00:00Z"}},
		// The clocks go forward in New York on 2026-03-08 at 02:00 (to
		// 03:00 EDT): a fixed-time job at 02:30 runs at the change (07:00
		// UTC), then at 02:30 EDT the next day.
		{"30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", []string{"2026-03-08T02:30:00-05:00", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}[1:]},
		// ... and hourly runs by elapsed time: no 02:00 that day.
		{"0 * * * *", "America/New_York", "2026-03-08T05:30:00Z", []string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		// They go back on 2026-11-01 at 02:00 EDT (to 01:00 EST): 01:30
		// happens twice, a fixed-time job runs once (the first)...
		{"30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		// ... and hourly runs at both 01:00.
		{"0 * * * *", "America/New_York", "2026-11-01T04:30:00Z", []string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		// Lord Howe Island moves by 30 minutes (02:00 -> 02:30 on 2026-10-04).
		{"15 2 * * *", "Australia/Lord_Howe", "2026-10-03T12:00:00Z", []string{"2026-10-03T15:30:00Z"}},
	} {
		s := mustParse(t, c.expr, c.tz)
		from := at(c.from)
		for _, w := range c.want {
			got := s.Next(from)
			if !got.Equal(at(w)) {
				t.Errorf("%q in %s: Next(%s) = %s, want %s", c.expr, c.tz, from.UTC().Format(time.RFC3339), got.UTC().Format(time.RFC3339), at(w).UTC().Format(time.RFC3339))
				break
			}
			from = got
		}
	}
}

// fakeRun is a run that ends when told.
type fakeRun struct {
	id   string
	done chan struct{}
}

func (r *fakeRun) ID() string            { return r.id }
func (r *fakeRun) Done() <-chan struct{} { return r.done }
func (r *fakeRun) end()                  { close(r.done) }

type recorder struct {
	mu     sync.Mutex
	fired  chan Firing
	skips  chan Firing
	runs   []*fakeRun
	failed bool
}

func newRecorder() *recorder {
	return &recorder{fired: make(chan Firing, 100), skips: make(chan Firing, 100)}
}

func (r *recorder) hooks() Hooks {
	return Hooks{
		Fire: func(f Firing) (Run, error) {
			r.mu.Lock()
			run := &fakeRun{id: "r" + string(rune('a'+len(r.runs))), done: make(chan struct{})}
			r.runs = append(r.runs, run)
			r.mu.Unlock()
			r.fired <- f
			return run, nil
		},
		Skip: func(f Firing, busy Run) { r.skips <- f },
	}
}

func (r *recorder) run(i int) *fakeRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[i]
}

func expect(t *testing.T, ch chan Firing, what string) Firing {
	t.Helper()
	select {
	case f := <-ch:
		return f
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s", what)
	}
	return Firing{}
}

func expectNone(t *testing.T, ch chan Firing, what string) {
	t.Helper()
	select {
	case f := <-ch:
		t.Fatalf("unexpected %s: %+v", what, f)
	case <-time.After(50 * time.Millisecond):
	}
}

func start(t *testing.T, now time.Time, r *recorder) (*Scheduler, *ManualClock) {
	clk := NewManualClock(now)
	s := New(clk, r.hooks())
	s.Start()
	t.Cleanup(s.Stop)
	// Wait until the loop has set its first timer: set after a test
	// moved the clock, it would look like a pass that saw the move.
	deadline := time.After(5 * time.Second)
	for {
		if _, ok := clk.Next(); ok {
			return s, clk
		}
		select {
		case <-clk.Armed():
		case <-deadline:
			t.Fatal("the scheduler's loop did not start")
		}
	}
}

func TestFiresAtTheMinute(t *testing.T) {
	r := newRecorder()
	s, clk := start(t, time.Date(2026, 11, 21, 10, 58, 30, 0, time.UTC), r)
	if err := s.Add(Job{Name: "hourly", Spec: mustParse(t, "0 * * * *", "UTC"), Overlap: OverlapAllow}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(Job{Name: "hourly", Spec: mustParse(t, "0 * * * *", "UTC"), Overlap: OverlapAllow}); !errors.Is(err, ErrExists) {
		t.Fatalf("second Add: %v, want ErrExists", err)
	}
	if st, _ := s.Status("hourly"); !st.Next.Equal(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)) {
		t.Fatalf("next = %s", st.Next)
	}
	clk.Set(time.Date(2026, 11, 21, 10, 59, 59, 0, time.UTC))
	expectNone(t, r.fired, "firing before 11:00")
	clk.Set(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC))
	f := expect(t, r.fired, "firing at 11:00")
	if !f.Due.Equal(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)) || f.Manual || f.CatchUp {
		t.Fatalf("firing %+v", f)
	}
	expectNone(t, r.fired, "second firing at 11:00")
	// Hours later (a late wake): it fires once, not once per hour missed.
	clk.Set(time.Date(2026, 11, 21, 14, 0, 30, 0, time.UTC))
	f = expect(t, r.fired, "late firing")
	if !f.Due.Equal(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("late firing due %s", f.Due)
	}
	expectNone(t, r.fired, "a firing per missed hour")
	if st, _ := s.Status("hourly"); !st.Next.Equal(time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("next after a late wake = %s", st.Next)
	}
	// Removed: never again.
	if err := s.Remove("hourly"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	expectNone(t, r.fired, "firing of a removed job")
	if err := s.Remove("hourly"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Remove twice: %v", err)
	}
}

func TestTimeZone(t *testing.T) {
	r := newRecorder()
	s, clk := start(t, time.Date(2026, 11, 21, 8, 30, 0, 0, time.UTC), r)
	s.Add(Job{Name: "tokyo", Spec: mustParse(t, "0 9 * * *", "Asia/Tokyo"), Overlap: OverlapSkip})
	s.Add(Job{Name: "paris", Spec: mustParse(t, "0 9 * * *", "Europe/Paris"), Overlap: OverlapSkip})
	clk.Set(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)) // 09:00 in Tokyo
	if f := expect(t, r.fired, "tokyo"); f.Job != "tokyo" {
		t.Fatalf("fired %s", f.Job)
	}
	expectNone(t, r.fired, "paris at midnight UTC")
	clk.Set(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)) // 09:00 in Paris
	if f := expect(t, r.fired, "paris"); f.Job != "paris" {
		t.Fatalf("fired %s", f.Job)
	}
}

func TestOverlap(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 10, 0, 30, 0, time.UTC)
	// minute moves the clock to the next minute and waits until the
	// scheduler handled it: its timer is set again, after the move, for
	// a time after the new one. (A timer set before the move, for a
	// later time, shows nothing: the scheduler slept through it, its
	// loop's first timer (MaxSleep) among them. A pass woken by
	// something else may have read the clock before it moved, and then
	// sets the timer for a time not after the new one.)
	minute := func(clk *ManualClock) {
		now := clk.Now().Truncate(time.Minute).Add(time.Minute)
		arms := clk.Arms()
		clk.Set(now)
		deadline := time.After(5 * time.Second)
		for {
			if next, ok := clk.Next(); ok && next.After(now) && clk.Arms() > arms {
				return
			}
			select {
			case <-clk.Armed():
			case <-deadline:
				t.Fatal("the scheduler did not wake")
			}
		}
	}
	t.Run("skip", func(t *testing.T) {
		r := newRecorder()
		s, clk := start(t, t0, r)
		s.Add(Job{Name: "j", Spec: mustParse(t, "* * * * *", "UTC"), Overlap: OverlapSkip})
		minute(clk)
		expect(t, r.fired, "first firing")
		minute(clk)
		expect(t, r.skips, "skip while the run runs")
		expectNone(t, r.fired, "a second run")
		if st, _ := s.Status("j"); st.Running != "ra" {
			t.Fatalf("status %+v", st)
		}
		if _, err := s.RunNow("j"); err == nil {
			t.Fatal("a manual run while the last runs: want a BusyError")
		}
		r.run(0).end()
		minute(clk)
		expect(t, r.fired, "firing once the run ended")
	})
	t.Run("queue", func(t *testing.T) {
		r := newRecorder()
		s, clk := start(t, t0, r)
		s.Add(Job{Name: "j", Spec: mustParse(t, "* * * * *", "UTC"), Overlap: OverlapQueue})
		minute(clk)
		expect(t, r.fired, "first firing")
		minute(clk) // queued
		minute(clk) // one is waiting already: skipped
		expect(t, r.skips, "skip of a second waiting firing")
		expectNone(t, r.fired, "firing while the run runs")
		if st, _ := s.Status("j"); !st.Pending {
			t.Fatalf("status %+v, want pending", st)
		}
		r.run(0).end()
		f := expect(t, r.fired, "the queued firing when the run ended")
		if !f.Queued || !f.Due.Equal(time.Date(2026, 11, 21, 10, 2, 0, 0, time.UTC)) {
			t.Fatalf("queued firing %+v", f)
		}
		expectNone(t, r.fired, "more than one queued firing")
	})
	t.Run("allow", func(t *testing.T) {
		r := newRecorder()
		s, clk := start(t, t0, r)
		s.Add(Job{Name: "j", Spec: mustParse(t, "* * * * *", "UTC"), Overlap: OverlapAllow})
		for i := range 3 {
			minute(clk)
			expect(t, r.fired, "firing "+string(rune('1'+i)))
		}
		if _, err := s.RunNow("j"); err != nil {
			t.Fatal(err)
		}
		if f := expect(t, r.fired, "manual firing"); !f.Manual {
			t.Fatalf("%+v", f)
		}
		expectNone(t, r.skips, "skip")
	})
}

func TestCatchUp(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 30, 0, 0, time.UTC)
	last := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC) // 09:00 and 10:00 were missed
	r := newRecorder()
	s, clk := start(t, now, r)
	s.Add(Job{Name: "catch", Spec: mustParse(t, "0 * * * *", "UTC"), Overlap: OverlapSkip, CatchUp: true, LastDue: last})
	s.Add(Job{Name: "nocatch", Spec: mustParse(t, "0 * * * *", "UTC"), Overlap: OverlapSkip, LastDue: last})
	s.Add(Job{Name: "new", Spec: mustParse(t, "0 * * * *", "UTC"), Overlap: OverlapSkip, CatchUp: true})
	f := expect(t, r.fired, "the catch-up")
	if f.Job != "catch" || !f.CatchUp || !f.Due.Equal(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("catch-up firing %+v", f)
	}
	expectNone(t, r.fired, "more than one catch-up")
	r.run(0).end()
	clk.Set(time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC))
	got := map[string]bool{}
	for range 3 {
		got[expect(t, r.fired, "11:00").Job] = true
	}
	if len(got) != 3 {
		t.Fatalf("at 11:00 fired %v", got)
	}
}
