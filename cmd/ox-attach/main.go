// Command ox-attach follows a run's records. See ox-attach(1).
package main

import (
	"context"
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-attach", "follow a run's records until it exits")
	app.Version = version
	app.ArgsUsage = "RUN"
	app.Description = "Prints the records of RUN from its first (its run record) and goes on as they come until its exit record, then exits with the run's status. A run that ended is replayed from its log. Ctrl-C detaches; the run goes on."
	app.Flags = cliutil.ClientFlags()
	app.Action = attach
	cliutil.Run(app)
}

func attach(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("give one RUN id (ox-ps lists them)")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := cliutil.NewRunStream(c.Bool("json"))
	err = cl.Attach(c.Context, c.Args().First(), func(rec json.RawMessage) error { return out.Record(rec) })
	if err == context.Canceled {
		return cliutil.Silent(130)
	}
	if err != nil {
		return err
	}
	return out.ExitCode()
}
