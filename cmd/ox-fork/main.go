// Command ox-fork copies an agent as a new one, compares agents, and
// removes a fork. See ox-fork(1).
package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-fork", "copy an agent as a new one, compare agents, remove a fork")
	app.Version = version
	app.Description = "ox-fork AGENT NEW copies AGENT (state, memory, policy, budget limits) as NEW, " +
		"at its state now or at commit -r REV; both share the history up to the fork point."
	app.UsageText = "ox-fork [-r REV] AGENT NEW\nox-fork diff [-p] AGENT [OTHER]\nox-fork rm AGENT"
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "rev", Aliases: []string{"r"}, Usage: "fork at commit `REV` (default: the state now)"},
		cliutil.SocketFlag, cliutil.JSONFlag,
	}
	app.Action = forkCmd
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:      "diff",
			Usage:     "list the files that differ from OTHER (default: AGENT's fork point) to AGENT",
			ArgsUsage: "AGENT [OTHER]",
			Flags: []cli.Flag{&cli.BoolFlag{Name: "patch", Aliases: []string{"p"}, Usage: "print a unified diff"},
				cliutil.SocketFlag, cliutil.JSONFlag},
			Action: diffCmd,
		},
		{
			Name:      "rm",
			Usage:     "remove an agent: its state, memory, policy, budget, jobs and inbox (history keeps them; as ox-agents rm)",
			ArgsUsage: "AGENT",
			Flags:     []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    rmCmd,
		},
	})
	cliutil.Run(app)
}

func agentArg(c *cli.Context, i int, what string) (string, error) {
	a := c.Args().Get(i)
	if err := proto.CheckAgent(a); err != nil {
		return "", cliutil.Usagef("%s: %s", what, err.Message)
	}
	return a, nil
}

func printFork(c *cli.Context, rec proto.ForkRecord) error {
	p := cliutil.NewPrinter(c)
	if p.JSON {
		p.Print(rec)
		return p.Flush()
	}
	fmt.Println(rec.Text)
	if rec.Commit != "" {
		fmt.Printf("commit %s\n", rec.Commit)
	}
	return nil
}

func forkCmd(c *cli.Context) error {
	if c.NArg() != 2 {
		return cliutil.Usagef("give the agent to fork and the new agent's name: ox-fork AGENT NEW")
	}
	src, err := agentArg(c, 0, "AGENT")
	if err != nil {
		return err
	}
	dst, err := agentArg(c, 1, "NEW")
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.Fork(c.Context, proto.ForkArgs{Agent: src, Name: dst, Rev: c.String("rev")})
	if err != nil {
		return err
	}
	return printFork(c, rec)
}

func rmCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("rm takes exactly one AGENT")
	}
	agent, err := agentArg(c, 0, "AGENT")
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.AgentRemove(c.Context, agent)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c)
	if p.JSON {
		p.Print(rec)
		return p.Flush()
	}
	fmt.Println(rec.Text)
	return nil
}

func diffCmd(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return cliutil.Usagef("diff takes AGENT and optionally OTHER")
	}
	agent, err := agentArg(c, 0, "AGENT")
	if err != nil {
		return err
	}
	other := ""
	if c.NArg() == 2 {
		if other, err = agentArg(c, 1, "OTHER"); err != nil {
			return err
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	patch := c.Bool("patch")
	p := cliutil.NewPrinter(c, "ACTION", "PATH")
	err = cl.AgentDiff(c.Context, proto.AgentDiffArgs{Agent: agent, Other: other, Patch: patch}, func(d proto.DiffRecord) error {
		if patch && !p.JSON {
			fmt.Print(d.Patch)
			if !strings.HasSuffix(d.Patch, "\n") && d.Patch != "" {
				fmt.Println()
			}
			return nil
		}
		return p.Print(d, d.Action, d.Path)
	})
	if ferr := p.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}
