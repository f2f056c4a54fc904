// Command ox-kill sends a signal to runs. See ox-kill(1).
package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

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
		&cli.StringFlag{Name: "node", Usage: "the runs are on fleet node `NAME` (ox-spawn --node placed them there)"},
	)
	app.Action = kill
	cliutil.Run(app)
}

func kill(c *cli.Context) error {
	runs, err := cliutil.ArgsOrStdin(c, "", "run", "id")
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		if cliutil.NothingPiped(c) {
			return nil
		}
		return cliutil.Usagef("give the RUN ids to signal, or run records on stdin (ox-ps lists them)")
	}
	if err := checkSignal(c.String("signal")); err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "RUN", "AGENT", "PID", "STATE")
	each := func(r proto.RunRecord) error {
		return p.Print(r, r.ID, r.Agent, fmt.Sprint(r.PID), r.State)
	}
	args := proto.KillArgs{Runs: runs, Signal: c.String("signal")}
	if node := c.String("node"); node != "" {
		_, err = cl.FleetCall(c.Context, node, proto.OpRunKill, args, func(raw json.RawMessage) error {
			var r proto.RunRecord
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			return each(r)
		})
	} else {
		err = cl.Kill(c.Context, args, each)
	}
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}

// checkSignal refuses a signal the daemon would not know, as a usage
// error (exit 2) before anything is sent.
func checkSignal(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		if n <= 0 || n > 64 {
			return cliutil.Usagef("--signal %d is out of range (1 to 64)", n)
		}
		return nil
	}
	name := strings.ToUpper(s)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if unix.SignalNum(name) == 0 {
		return cliutil.Usagef("--signal %q: unknown signal (STOP, CONT, INT, TERM, KILL, HUP, USR1... or a number)", s)
	}
	return nil
}
