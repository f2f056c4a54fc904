// Command ox-kill sends a signal to runs. See ox-kill(1).
package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-kill", "send a signal to runs")
	app.Version = version
	app.ArgsUsage = "RUN..."
	app.Description = "Sends SIGNAL (default TERM) to the process group of each RUN: STOP pauses a run, CONT resumes it, INT, TERM and KILL end it. Each signal is audited. Prints each run's record after the signal."
	app.Flags = cliutil.ClientFlags(
		&cli.StringFlag{Name: "signal", Aliases: []string{"s"}, Value: "TERM", Usage: "the `SIGNAL` to send: a name (STOP, CONT, INT, TERM, KILL, HUP, USR1...) or a number"},
	)
	app.Action = kill
	cliutil.Run(app)
}

func kill(c *cli.Context) error {
	runs := c.Args().Slice()
	if len(runs) == 0 {
		return cliutil.Usagef("give the RUN ids to signal (ox-ps lists them)")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "RUN", "AGENT", "PID", "STATE")
	err = cl.Kill(c.Context, proto.KillArgs{Runs: runs, Signal: c.String("signal")}, func(r proto.RunRecord) error {
		return p.Print(r, r.ID, r.Agent, fmt.Sprint(r.PID), r.State)
	})
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}
