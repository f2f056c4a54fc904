// Command ox-agents lists, shows and removes agents. See ox-agents(1).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-agents", "list, show and remove agents")
	app.Version = version
	app.Description = "An agent is a named identity with its own state, memories, policy, budget and jobs; ox-spawn -a NAME (or a first ox-state save or ox-remember) creates it. ls lists the agents you may act on, show describes one, rm removes one (admin only): refused while it has live runs, audited, and recoverable from the version history: what it held is committed first, and the record names that commit (restore)."
	flags := []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "ls", Usage: "list the agents you may act on, with what each holds", Flags: flags, Action: ls},
		{Name: "show", Usage: "describe agent NAME: state, memories, jobs, policy, live runs", ArgsUsage: "NAME", Flags: flags, Action: show},
		{Name: "rm", Usage: "remove agents (admin): their state, memories, policy, budget and jobs", ArgsUsage: "NAME...", Flags: flags, Action: rm},
	})
	cliutil.Run(app)
}

func names(c *cli.Context, min, max int, what string) ([]string, error) {
	args := c.Args().Slice()
	if len(args) < min || (max > 0 && len(args) > max) {
		return nil, cliutil.Usagef("%s", what)
	}
	for _, a := range args {
		if err := proto.CheckAgent(a); err != nil {
			return nil, cliutil.Usagef("%s", err.Message)
		}
	}
	return args, nil
}

func row(p *cliutil.Printer, r proto.AgentRecord) error {
	jobs := "-"
	if len(r.Jobs) > 0 {
		jobs = strings.Join(r.Jobs, ",")
	}
	return p.Print(r, r.Agent, fmt.Sprint(r.Keys), cliutil.HumanSize(r.Size), fmt.Sprint(r.Memories), jobs, r.Policy, fmt.Sprint(r.Runs))
}

var header = []string{"AGENT", "KEYS", "SIZE", "MEMORIES", "JOBS", "POLICY", "RUNS"}

func ls(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("ls takes no arguments (show NAME describes one)")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, header...)
	err = cl.AgentList(c.Context, func(r proto.AgentRecord) error { return row(p, r) })
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}

func show(c *cli.Context) error {
	args, err := names(c, 1, 1, "show takes one NAME")
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.AgentShow(c.Context, args[0])
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, header...)
	row(p, r)
	return p.Flush()
}

func rm(c *cli.Context) error {
	args, err := names(c, 1, 0, "rm takes one or more agent NAMEs")
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "AGENT", "KEYS", "MEMORIES", "JOBS", "POLICY", "RESTORE")
	defer p.Flush()
	// Every agent is tried; the exit status is that of the worst failure.
	var worst error
	for _, name := range args {
		r, err := cl.AgentRemove(c.Context, name)
		if err != nil {
			p.Flush()
			fmt.Fprintf(os.Stderr, "ox-agents: %v\n", err)
			if worst == nil || cliutil.Code(err) > cliutil.Code(worst) {
				worst = err
			}
			continue
		}
		restore := r.Restore
		if len(restore) > 12 {
			restore = restore[:12]
		}
		p.Print(r, r.Agent, fmt.Sprint(r.Keys), fmt.Sprint(r.Memories), fmt.Sprint(len(r.Jobs)), r.Policy, restore)
	}
	if worst != nil {
		return cliutil.Silent(cliutil.Code(worst))
	}
	return nil
}
