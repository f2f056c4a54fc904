// Command ox-wait waits for runs to exit. See ox-wait(1).
package main

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-wait", "wait for runs to exit")
	app.Version = version
	app.ArgsUsage = "RUN..."
	app.Description = "Waits until every RUN has exited and prints its exit record as it does (a run that already exited answers at once). Exits with the status of the last RUN named, like the shell's wait."
	app.Flags = cliutil.ClientFlags(
		&cli.StringFlag{Name: "node", Usage: "the runs are on fleet node `NAME` (ox-spawn --node placed them there)"},
	)
	app.Action = wait
	cliutil.Run(app)
}

func wait(c *cli.Context) error {
	runs, err := cliutil.ArgsOrStdin(c, "", "run", "id")
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		if cliutil.NothingPiped(c) {
			return nil
		}
		return cliutil.Usagef("give the RUN ids to wait for, or run records on stdin (ox-ps lists them)")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "RUN", "AGENT", "STATUS", "SIGNAL", "ERROR")
	status := map[string]int{}
	each := func(r proto.ExitRecord) error {
		status[r.Run] = r.Status
		if err := p.Print(r, r.Run, r.Agent, fmt.Sprint(r.Status), r.Signal, r.Error); err != nil {
			return err
		}
		return p.Flush()
	}
	if node := c.String("node"); node != "" {
		_, err = cl.FleetCall(c.Context, node, proto.OpRunWait, proto.RunsArgs{Runs: runs}, func(raw json.RawMessage) error {
			var r proto.ExitRecord
			if err := json.Unmarshal(raw, &r); err != nil {
				return err
			}
			return each(r)
		})
	} else {
		err = cl.Wait(c.Context, runs, each)
	}
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	if st := status[runs[len(runs)-1]]; st != 0 {
		return cliutil.Silent(st)
	}
	return nil
}
