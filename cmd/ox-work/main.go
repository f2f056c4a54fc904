// Command ox-work reviews the work of runs on host folders (ox-spawn
// --work): lists it, shows a run's patch, applies it to the folder or
// discards it. See ox-work(1).
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-work", "review, apply or discard what runs changed in host folders")
	app.Version = version
	app.Description = "A run spawned with --work DIR works on DIR at /work through an overlay: DIR does not change, " +
		"and what the run changed waits here, kept when oxiosd restarts, until applied or discarded (or runs.work_expire of oxios.toml)."
	app.UsageText = "ox-work ls [-a AGENT]\nox-work diff [--stat] RUN\nox-work apply [--force] RUN\nox-work discard RUN"
	app.Flags = []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:   "ls",
			Usage:  "list the runs' work: run, agent, state (running, pending, applied, discarded, lost), files changed, folder",
			Flags:  []cli.Flag{&cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "only agent `NAME`'s"}, cliutil.SocketFlag, cliutil.JSONFlag},
			Action: lsCmd,
		},
		{
			Name:      "diff",
			Usage:     "print the run's patch, which git apply takes in the folder",
			ArgsUsage: "RUN",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "stat", Usage: "print the diffstat instead"}, cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    diffCmd,
		},
		{
			Name:      "apply",
			Usage:     "write the run's changes to its folder; refused, naming the files, when the folder changed under them since the run started",
			ArgsUsage: "RUN",
			Flags:     []cli.Flag{&cli.BoolFlag{Name: "force", Aliases: []string{"f"}, Usage: "write over the conflicts"}, cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    doneCmd(true),
		},
		{
			Name:      "discard",
			Usage:     "throw the run's changes away",
			ArgsUsage: "RUN",
			Flags:     []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    doneCmd(false),
		},
	})
	cliutil.Run(app)
}

func runArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", cliutil.Usagef("give one run: ox-work %s RUN (ox-work ls lists them)", c.Command.Name)
	}
	return c.Args().First(), nil
}

func lsCmd(c *cli.Context) error {
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "RUN", "AGENT", "STATE", "FILES", "ENDED", "DIR")
	err = cl.WorkList(c.Context, c.String("agent"), func(w proto.WorkRecord) error {
		ended := "-"
		if w.Ended != nil {
			ended = w.Ended.Local().Format(time.DateTime)
		}
		return p.Print(w, w.Run, w.Agent, w.State, fmt.Sprint(w.Changes), ended, w.Dir)
	})
	if err != nil {
		return err
	}
	return p.Flush()
}

func diffCmd(c *cli.Context) error {
	run, err := runArg(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	w, err := cl.WorkDiff(c.Context, run, c.Bool("stat"))
	if err != nil {
		return err
	}
	if c.Bool("json") {
		p := cliutil.NewPrinter(c)
		p.Print(w)
		return p.Flush()
	}
	if c.Bool("stat") {
		_, err = os.Stdout.WriteString(w.Stat)
	} else {
		_, err = os.Stdout.WriteString(w.Patch)
	}
	return err
}

func doneCmd(apply bool) cli.ActionFunc {
	return func(c *cli.Context) error {
		run, err := runArg(c)
		if err != nil {
			return err
		}
		cl, err := cliutil.Connect(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		var w proto.WorkRecord
		if apply {
			w, err = cl.WorkApply(c.Context, run, c.Bool("force"))
		} else {
			w, err = cl.WorkDiscard(c.Context, run)
		}
		if err != nil {
			return err
		}
		p := cliutil.NewPrinter(c)
		if p.JSON {
			p.Print(w)
			return p.Flush()
		}
		fmt.Printf("%s: %d files, patch %s\n", w.Text, w.Changes, w.Digest)
		return nil
	}
}
