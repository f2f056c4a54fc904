// Command ox-attach follows a run's records. See ox-attach(1).
package main

import (
	"context"
	"encoding/json"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-attach", "follow a run's records until it exits")
	app.Version = version
	app.ArgsUsage = "RUN"
	app.Description = "Prints the records of RUN from its first (its run record) and goes on as they come until its exit record, then exits with the run's status. A run that ended is replayed from its log. Ctrl-C detaches; the run goes on."
	app.Flags = cliutil.ClientFlags(
		&cli.StringFlag{Name: "node", Usage: "the run is on fleet node `NAME` (ox-spawn --node placed it there); its records come back with their node"},
	)
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
	each := func(rec json.RawMessage) error { return out.Record(rec) }
	if node := c.String("node"); node != "" {
		_, err = cl.FleetCall(c.Context, node, proto.OpRunAttach, proto.AttachArgs{Run: c.Args().First()}, each)
	} else {
		err = cl.Attach(c.Context, c.Args().First(), each)
	}
	if err == context.Canceled {
		return cliutil.Silent(130)
	}
	if err != nil {
		return err
	}
	return out.ExitCode()
}
