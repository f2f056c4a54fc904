package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched/jobs"
)

var schedIdle = flag.Duration("sched-idle", 60*time.Second, "schedules: how long to watch oxiosd holding 1,000 jobs none of which is due (the issue's target is 0 ticks over 150s)")

// benchSchedules adds 1,000 jobs none of which comes due during the
// window (each at a minute and hour of 1 January) and counts oxiosd's CPU
// ticks while it waits: its scheduler should sleep on one timer.
func benchSchedules(d *daemon, n int) {
	c := dial(d.sock)
	defer c.Close()
	ctx := context.Background()
	// Spread over enough agents that none passes jobs.MaxPerAgent (1,000
	// jobs: 16 agents of 62 or 63).
	agents := max(10, (n+jobs.MaxPerAgent-1)/jobs.MaxPerAgent)
	t0 := time.Now()
	for i := range n {
		_, err := c.ScheduleAdd(ctx, proto.ScheduleAddArgs{
			Agent: fmt.Sprintf("sched%d", i%agents), Name: fmt.Sprintf("job%04d", i),
			Schedule: fmt.Sprintf("%d %d 1 1 *", i%60, (i/60)%24), TZ: "UTC", Command: []string{"true"},
		})
		check(err)
	}
	add := time.Since(t0)
	report(fmt.Sprintf("schedule.add, %d jobs (/s)", n), float64(n)/add.Seconds(), 0, "(no target)")
	listed := 0
	t0 = time.Now()
	check(c.ScheduleList(ctx, "", func(proto.JobRecord) error { listed++; return nil }))
	fmt.Printf("%-46s %14.2f %14s %8s  %s\n", fmt.Sprintf("schedule.list of %d jobs (ms)", listed), float64(time.Since(t0).Microseconds())/1000, "", "", "(no target)")
	if *schedIdle <= 0 {
		return
	}
	// Let it settle: 1,000 adds leave the work tree's files to write, a
	// checkpoint and a collection behind them, about 12 s here (watched in
	// 5 s steps: 37 ticks, 2, then 0).
	time.Sleep(20 * time.Second)
	pid := d.cmd.Process.Pid
	k0 := ticks(pid)
	fmt.Printf("\nwatching oxiosd with %d schedules, none due (pid %d), for %s...\n", n, pid, *schedIdle)
	time.Sleep(*schedIdle)
	k1 := ticks(pid)
	fmt.Printf("%-46s %14d %14s %8s  %s\n", fmt.Sprintf("%d schedules: CPU ticks over %s", n, *schedIdle), k1-k0, "", "", "0 (over 150s)")
	fmt.Printf("%-46s %14.1f %14s %8s  %s\n", fmt.Sprintf("%d schedules: RSS (MiB)", n), float64(rssKiB(pid))/1024, "", "", "(no target)")
}
