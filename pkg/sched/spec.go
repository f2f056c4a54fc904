// Package sched is the scheduler of oxiosd: cron expressions (parsed by
// robfig/cron, evaluated here with cron's rules for daylight saving time)
// and one goroutine that sleeps on one timer until the next job is due.
// It knows nothing of runs, files or the audit log: the kernel gives it
// the jobs and a Fire hook that starts a run (see pkg/sched/jobs, which
// owns the job files and what a firing records).
package sched

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// parser reads the standard five fields (minute hour day-of-month month
// day-of-week) and the descriptors @yearly (@annually), @monthly,
// @weekly, @daily (@midnight), @hourly and @every DURATION.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// fieldNames name the five fields in error messages.
var fieldNames = [5]string{"minute", "hour", "day of month", "month", "day of week"}

// MinEvery is the shortest @every interval.
const MinEvery = time.Second

// Spec is a parsed schedule in a time zone.
type Spec struct {
	expr  string
	loc   *time.Location
	sched cron.Schedule
	// wall: a fixed-time job (its minute and hour fields are not
	// wildcards): it runs once per wall-clock time, as cron(8) does when
	// the clocks change. Other jobs run by elapsed time.
	wall bool
}

// Parse parses a cron expression to run in the time zone tz (an IANA
// name such as "Europe/Paris", "UTC", or "" for the local zone). A bad
// expression's error names the field.
func Parse(expr, tz string) (*Spec, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, errors.New("empty cron expression: want 5 fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly, @every DURATION")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New("give the time zone with --tz (tz), not in the expression")
	}
	loc := time.Local
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as UTC or Europe/Paris", tz)
		}
		loc = l
	}
	if d, ok := strings.CutPrefix(expr, "@every "); ok {
		// robfig/cron rounds a shorter interval up to a second: refuse it.
		if v, err := time.ParseDuration(strings.TrimSpace(d)); err == nil && v < MinEvery {
			return nil, fmt.Errorf("%q: the shortest interval is @every %s", expr, MinEvery)
		}
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, explain(expr, err)
	}
	sp := &Spec{expr: expr, loc: loc, sched: s}
	if cd, ok := s.(cron.ConstantDelaySchedule); ok {
		if cd.Delay < MinEvery {
			return nil, fmt.Errorf("%q: the shortest interval is @every %s", expr, MinEvery)
		}
	} else {
		f := strings.Fields(expr)
		if strings.HasPrefix(expr, "@") {
			f = strings.Fields(map[string]string{
				"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
				"@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
			}[expr])
		}
		sp.wall = len(f) == 5 && !strings.HasPrefix(f[0], "*") && !strings.HasPrefix(f[1], "*")
	}
	// A date that never comes (30 February) would never fire.
	if sp.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("%q never fires (no such date in the next five years)", expr)
	}
	return sp, nil
}

// explain turns robfig/cron's error into one that names the field.
func explain(expr string, err error) error {
	if strings.HasPrefix(expr, "@") {
		if strings.HasPrefix(expr, "@every") {
			return fmt.Errorf("%q: want @every DURATION, such as @every 90s or @every 2h30m", expr)
		}
		return fmt.Errorf("%q: unknown descriptor: want @hourly, @daily, @weekly, @monthly, @yearly or @every DURATION", expr)
	}
	f := strings.Fields(expr)
	if len(f) != 5 {
		return fmt.Errorf("%q has %d fields: want 5 (minute hour day-of-month month day-of-week)", expr, len(f))
	}
	for i := range f {
		probe := []string{"*", "*", "*", "*", "*"}
		probe[i] = f[i]
		if _, perr := parser.Parse(strings.Join(probe, " ")); perr != nil {
			return fmt.Errorf("cron field %d (%s) %q: %v", i+1, fieldNames[i], f[i], perr)
		}
	}
	return fmt.Errorf("%q: %v", expr, err)
}

// String is the expression as given.
func (s *Spec) String() string { return s.expr }

// Location is the time zone the expression is read in.
func (s *Spec) Location() *time.Location { return s.loc }

// Next is the first time after t that the schedule fires (the zero time
// if none within five years).
//
// Daylight saving time follows cron(8): a job whose minute or hour is a
// wildcard (@hourly, */15 * * * *) runs by elapsed time, so an hourly job
// runs at both 01:00 of a night the clocks go back and not at the 02:00
// that a night they go forward skips. A fixed-time job (30 2 * * *) runs
// once per wall-clock time: once on the night the clocks go back, and
// at the moment the clocks go forward when they skip its time.
func (s *Spec) Next(t time.Time) time.Time {
	if !s.wall {
		return s.sched.Next(t.In(s.loc))
	}
	// The schedule is evaluated on wall-clock times (as if in UTC, where
	// no time is skipped or repeated), each mapped back to the zone.
	w := wallOf(t, s.loc)
	for range 1000 {
		w = s.sched.Next(w)
		if w.IsZero() {
			return w
		}
		if r := fromWall(w, s.loc); r.After(t) {
			return r
		}
	}
	return time.Time{}
}

// wallOf is t's wall clock in loc, as a time in UTC.
func wallOf(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
}

// fromWall is the first instant in loc whose wall clock is w; for a time
// the clocks skip, the instant they skip it (the end of the gap).
func fromWall(w time.Time, loc *time.Location) time.Time {
	r := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
	if wallOf(r, loc).Equal(w) {
		// Of a repeated time, the first.
		if e := r.Add(-time.Hour); wallOf(e, loc).Equal(w) {
			return e
		}
		for _, d := range []time.Duration{-30 * time.Minute, -2 * time.Hour} {
			if e := r.Add(d); wallOf(e, loc).Equal(w) {
				return e
			}
		}
		return r
	}
	// In a gap: the first instant whose wall clock is at or past w (the
	// clocks go forward at most a few hours), found by bisection.
	lo, hi := r.Add(-3*time.Hour), r.Add(3*time.Hour)
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2)
		if wallOf(mid, loc).Before(w) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi.Truncate(time.Second)
}
