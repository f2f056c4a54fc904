// Command ox-ps lists the runs of agents. See ox-ps(1).
package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-ps", "list the runs of agents")
	app.Version = version
	app.Description = "Lists the live runs (of agent -a, or of every agent you may see), oldest first, with their state, pid, start, CPU time, memory (RSS), open files and tokens used, summed over each run's processes and sampled from /proc as ox-ps asks; then the queued runs, in the order they will start; with --all, the ended runs oxiosd keeps too. JSON lines off a terminal, a table on one."
	app.Flags = cliutil.ClientFlags(
		&cli.BoolFlag{Name: "all", Usage: "include the ended runs"},
		&cli.BoolFlag{Name: "fleet", Aliases: []string{"F"}, Usage: "the runs of every node of the fleet, each with its node"},
	)
	app.Action = ps
	cliutil.Run(app)
}

func ps(c *cli.Context) error {
	agent := c.String("agent")
	if agent != "" {
		if err := proto.CheckAgent(agent); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
	}
	if c.NArg() > 0 {
		return cliutil.Usagef("ox-ps takes no arguments (got %q)", c.Args().First())
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	cols := []string{"RUN", "AGENT", "STATE", "PID", "STARTED", "CPU", "RSS", "FDS", "TOKENS", "WHAT"}
	fleet := c.Bool("fleet")
	if fleet {
		cols = append([]string{"NODE"}, cols...)
	}
	p := cliutil.NewPrinter(c, cols...)
	args := proto.PsArgs{Agent: agent, All: c.Bool("all")}
	row := func(r proto.RunRecord) error {
		state := r.State
		if r.Status != nil && r.State == proto.RunExited {
			state = fmt.Sprintf("exit %d", *r.Status)
			if r.Signal != "" {
				state = "SIG" + r.Signal
			}
		}
		what := r.Task
		if len(r.Command) > 0 {
			what = strings.Join(r.Command, " ")
		}
		if len(what) > 60 {
			what = what[:57] + "..."
		}
		pid, started := fmt.Sprint(r.PID), r.Started.Local().Format(time.DateTime)
		if r.State == proto.RunQueued {
			pid, started = "-", fmt.Sprintf("(prio %d)", r.Priority)
		} else if r.PID == 0 {
			pid, started = "-", "-"
		}
		cells := []string{r.ID, r.Agent, state, pid, started,
			fmt.Sprintf("%.2fs", r.CPU), cliutil.HumanSize(r.RSS), fmt.Sprint(r.FDs), fmt.Sprint(r.Tokens), what}
		if fleet {
			cells = append([]string{r.Node}, cells...)
		}
		return p.Print(r, cells...)
	}
	if fleet {
		err = cliutil.FleetStream(c.Context, cl, proto.OpRunPs, args, func(rec json.RawMessage) error {
			var r proto.RunRecord
			if err := json.Unmarshal(rec, &r); err != nil {
				return err
			}
			return row(r)
		})
	} else {
		err = cl.Ps(c.Context, args, row)
	}
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}
