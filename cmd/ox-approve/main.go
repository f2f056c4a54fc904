// Command ox-approve lists the requests that policies' ask rules hold for
// an operator, and approves or denies them. See ox-approve(1).
package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

var optAgent = &cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "only requests of agent `NAME`"}

func main() {
	app := cliutil.App("ox-approve", "list, approve and deny what policies' ask rules hold for an operator")
	app.Version = version
	app.UsageText = "ox-approve [ls] [-a AGENT] [--all] [-f]\nox-approve yes|no [-m REASON] ID..."
	app.Flags = listFlags()
	app.Action = lsCmd
	reason := &cli.StringFlag{Name: "reason", Aliases: []string{"m"}, Usage: "why (kept in the audit log) `TEXT`"}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "ls", Usage: "list the pending requests (--all: decided ones too)", Flags: listFlags(), Action: lsCmd},
		{Name: "yes", Usage: "approve requests: the calls that wait go on", ArgsUsage: "ID...",
			Flags: []cli.Flag{reason, cliutil.SocketFlag, cliutil.JSONFlag}, Action: func(c *cli.Context) error { return decide(c, true) }},
		{Name: "no", Usage: "deny requests: the calls that wait fail with EPERM", ArgsUsage: "ID...",
			Flags: []cli.Flag{reason, cliutil.SocketFlag, cliutil.JSONFlag}, Action: func(c *cli.Context) error { return decide(c, false) }},
	})
	cliutil.Run(app)
}

func listFlags() []cli.Flag {
	return []cli.Flag{optAgent,
		&cli.BoolFlag{Name: "all", Usage: "decided requests too (the last 1000)"},
		&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "then print each new request and decision"},
		cliutil.SocketFlag, cliutil.JSONFlag}
}

func lsCmd(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.UnknownCommand(c)
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
	// WHAT is last and printed whole: an operator decides on all of it.
	p := cliutil.NewPrinter(c, "ID", "AGENT", "STATE", "RULE", "EXPIRES", "WHAT")
	p.Whole()
	err = cl.ApproveList(c.Context, proto.ApproveListArgs{Agent: agent, All: c.Bool("all"), Follow: c.Bool("follow")}, func(r proto.ApprovalRecord) error {
		err := p.Print(r, r.ID, r.Agent, r.State, r.Rule, r.Expire.Local().Format(time.TimeOnly), r.Op+" "+r.What)
		if c.Bool("follow") {
			p.Flush()
		}
		return err
	})
	if c.Context.Err() != nil {
		err = nil // interrupted while following
	}
	if ferr := p.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}

func decide(c *cli.Context, yes bool) error {
	if c.NArg() == 0 {
		return cliutil.Usagef("give the request ID(s) (ox-approve ls lists them)")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c)
	for _, id := range c.Args().Slice() {
		rec, err := cl.ApproveDecide(c.Context, proto.ApproveDecideArgs{ID: id, Approve: yes, Reason: c.String("reason")})
		if err != nil {
			p.Flush()
			return err
		}
		if p.JSON {
			p.Print(rec)
		} else {
			fmt.Println(cliutil.Cell(rec.Text))
		}
	}
	return p.Flush()
}
