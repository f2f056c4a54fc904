// Command ox-schedule adds, lists, removes and runs the scheduled jobs of
// agents: runs that oxiosd starts on a cron schedule. See ox-schedule(1).
package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-schedule", "run agents on a schedule: add, list, remove and run jobs")
	app.Version = version
	app.Description = "A job starts a run of an agent on a cron schedule: the command after --, as ox-spawn -a AGENT -- COMMAND would, or else an LLM run of the TASK. Jobs live in the agent's versioned tree (ox-commit versions them) and survive restarts of oxiosd; a job with --catch-up whose time passed while oxiosd was down runs once when it starts. Each firing is audited (schedule.fire) and published as the event schedule.fired with the run's id."
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "add", Usage: "add a job that runs COMMAND (after --) or TASK for the agent on a schedule", ArgsUsage: "-- COMMAND [ARG...] | TASK...",
			Flags: cliutil.ClientFlags(
				&cli.StringFlag{Name: "name", Usage: "the job's `NAME`, unique among all jobs", Required: true},
				&cli.StringFlag{Name: "cron", Usage: "when: 5 cron fields (`EXPR`: minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly, @every DURATION; or @message (a run per message put into the agent's inbox) or @messages (a run per batch, one at a time)", Required: true},
				&cli.StringFlag{Name: "tz", Usage: "read the schedule in time `ZONE` (IANA: UTC, Europe/Paris; default: oxiosd's local time)"},
				&cli.IntFlag{Name: "priority", Usage: "the `P` of the job's runs when runs wait to start (higher first)"},
				&cli.StringFlag{Name: "overlap", Value: "skip", Usage: "when due while the last run still runs: `MODE` skip, queue (run after it, at most one waits) or allow"},
				&cli.BoolFlag{Name: "catch-up", Usage: "run once at start when a due time passed while oxiosd was down"},
			), Action: add},
		{Name: "ls", Usage: "list the jobs (of the agent, with -a), with their next and last runs", Flags: cliutil.ClientFlags(), Action: ls},
		{Name: "rm", Usage: "remove job NAME (a run it started goes on)", ArgsUsage: "NAME", Flags: cliutil.ClientFlags(), Action: rm},
		{Name: "run", Usage: "run job NAME now, once, and print its run record (its schedule stays)", ArgsUsage: "NAME", Flags: cliutil.ClientFlags(), Action: run},
		{Name: "enable", Usage: "enable job NAME (a fork's copies of jobs start disabled)", ArgsUsage: "NAME", Flags: cliutil.ClientFlags(), Action: enable(false)},
		{Name: "disable", Usage: "disable job NAME: it stays and does not fire", ArgsUsage: "NAME", Flags: cliutil.ClientFlags(), Action: enable(true)},
	})
	cliutil.Run(app)
}

// dashdash reports whether the command line has "--": urfave/cli drops
// it, and it is what makes the arguments a command.
func dashdash() bool {
	for _, a := range os.Args[1:] {
		if a == "--" {
			return true
		}
	}
	return false
}

func add(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	a := proto.ScheduleAddArgs{
		Agent: agent, Name: c.String("name"), Schedule: c.String("cron"), TZ: c.String("tz"),
		Priority: c.Int("priority"), Overlap: c.String("overlap"), CatchUp: c.Bool("catch-up"),
	}
	if err := proto.CheckAgent(a.Name); err != nil {
		return cliutil.Usagef("--name: %s", strings.Replace(err.Message, "agent name", "job name", 1))
	}
	switch a.Overlap {
	case "skip", "queue", "allow":
	default:
		return cliutil.Usagef("--overlap %q: want skip, queue or allow", a.Overlap)
	}
	args := c.Args().Slice()
	if dashdash() {
		if len(args) == 0 {
			return cliutil.Usagef("no command after --")
		}
		a.Command = args
	} else {
		a.Task = strings.Join(args, " ")
	}
	if a.Task == "" && len(a.Command) == 0 {
		return cliutil.Usagef("give a TASK for an LLM run, or -- COMMAND")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.ScheduleAdd(c.Context, a)
	var pe *proto.Error
	if errors.As(err, &pe) && pe.Code == proto.EINVAL {
		// A bad --cron or --tz is a usage error, exit 2 (issue 47): the
		// daemon's parser judges it, so that one parser decides what runs.
		return &cliutil.ExitError{Code: cliutil.ExitUsage, Err: err}
	}
	if err != nil {
		return err
	}
	p := newJobPrinter(c)
	printJob(p, rec)
	return p.Flush()
}

func newJobPrinter(c *cli.Context) *cliutil.Printer {
	return cliutil.NewPrinter(c, "NAME", "AGENT", "SCHEDULE", "TZ", "NEXT", "LAST RUN", "STATUS", "WHAT")
}

func printJob(p *cliutil.Printer, rec proto.JobRecord) {
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Local().Format("2006-01-02 15:04")
	}
	tz := rec.TZ
	if tz == "" {
		tz = "local"
	}
	status := "-"
	switch {
	case rec.Running != "":
		status = "running"
		if rec.Pending {
			status = "running, 1 waiting"
		}
	case rec.LastStatus != nil:
		status = fmt.Sprintf("exit %d", *rec.LastStatus)
	}
	last := rec.LastRun
	if last == "" {
		last = "-"
	}
	what := rec.Task
	if len(rec.Command) > 0 {
		what = "-- " + strings.Join(rec.Command, " ")
	}
	if len(what) > 40 {
		what = what[:37] + "..."
	}
	p.Print(rec, rec.Name, rec.Agent, rec.Schedule, tz, when(rec.Next), last, status, what)
}

func ls(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("ls takes no arguments (got %q); -a AGENT lists one agent's jobs", c.Args().First())
	}
	agent := c.String("agent")
	if agent != "" {
		if err := proto.CheckAgent(agent); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := newJobPrinter(c)
	err = cl.ScheduleList(c.Context, agent, func(rec proto.JobRecord) error {
		printJob(p, rec)
		return nil
	})
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}

// jobArgs reads NAME, and -a when given.
func jobArgs(c *cli.Context) (proto.ScheduleArgs, error) {
	if c.NArg() != 1 {
		return proto.ScheduleArgs{}, cliutil.Usagef("give one job NAME (ox-schedule ls lists them)")
	}
	a := proto.ScheduleArgs{Name: c.Args().First(), Agent: c.String("agent")}
	if a.Agent != "" {
		if err := proto.CheckAgent(a.Agent); err != nil {
			return a, cliutil.Usagef("%s", err.Message)
		}
	}
	return a, nil
}

func rm(c *cli.Context) error {
	a, err := jobArgs(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.ScheduleRm(c.Context, a)
	if err != nil {
		return err
	}
	p := newJobPrinter(c)
	printJob(p, rec)
	return p.Flush()
}

func enable(off bool) cli.ActionFunc {
	return func(c *cli.Context) error {
		a, err := jobArgs(c)
		if err != nil {
			return err
		}
		cl, err := cliutil.Connect(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		rec, err := cl.ScheduleEnable(c.Context, proto.ScheduleEnableArgs{Name: a.Name, Agent: a.Agent, Disable: off})
		if err != nil {
			return err
		}
		p := newJobPrinter(c)
		printJob(p, rec)
		return p.Flush()
	}
}

func run(c *cli.Context) error {
	a, err := jobArgs(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.ScheduleRun(c.Context, a)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "RUN", "AGENT", "PID", "STATE")
	p.Print(rec, rec.ID, rec.Agent, fmt.Sprint(rec.PID), rec.State)
	return p.Flush()
}
