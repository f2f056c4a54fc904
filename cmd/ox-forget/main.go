// Command ox-forget forgets memories of an agent through oxiosd. See
// ox-forget(1).
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-forget", "forget memories of an agent")
	app.Version = version
	app.ArgsUsage = "[ID...]"
	app.Description = "Forgets the memories named by ID, or those with every --tag, or those created before --before (selectors combine). With none of them and stdin not a terminal, reads the ids of memory records from stdin (ox-recall ... | ox-forget). One group commit forgets them all."
	app.Flags = cliutil.ClientFlags(
		&cli.StringSliceFlag{Name: "tag", Aliases: []string{"t"}, Usage: "forget memories with `TAG` (repeatable: all of them)"},
		&cli.StringFlag{Name: "before", Usage: "forget memories created before `TIME` (RFC 3339, a date, or a duration ago: 30d is 720h)"},
	)
	app.Action = forget
	cliutil.Run(app)
}

func forget(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	a := proto.MemForgetArgs{Agent: agent, IDs: c.Args().Slice(), Tags: c.StringSlice("tag")}
	for _, t := range a.Tags {
		if err := memory.CheckTag(t); err != nil {
			return cliutil.Usagef("--tag: %v", err)
		}
	}
	if s := c.String("before"); s != "" {
		t, err := cliutil.ParseTime(s)
		if err != nil {
			return cliutil.Usagef("--before: %v", err)
		}
		a.Before = t
	}
	if len(a.IDs) == 0 && len(a.Tags) == 0 && a.Before.IsZero() {
		if cliutil.IsTerminal(os.Stdin) {
			return cliutil.Usagef("give IDs, --tag or --before (or pipe memory records in)")
		}
		lr := cliutil.NewLineReader(os.Stdin, 1<<20)
		for {
			l, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return cliutil.Failf("stdin: %v", err)
			}
			r := cliutil.ParseRecord(l.Text)
			id := r.String("id")
			if r.Fields == nil {
				id = strings.TrimSpace(r.Text)
			}
			if id != "" {
				a.IDs = append(a.IDs, id)
			}
		}
		if len(a.IDs) == 0 {
			if cliutil.NothingPiped(c) {
				return nil
			}
			return cliutil.Usagef("no memory ids on stdin")
		}
	}
	for _, id := range a.IDs {
		if err := memory.CheckID(id); err != nil {
			return cliutil.Usagef("%v", err)
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "ID", "KIND", "STATUS")
	n := 0
	err = cl.MemForget(c.Context, a, func(r proto.MemoryRecord) error {
		n++
		return p.Print(r, r.ID, r.Kind, "forgotten")
	})
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	if err == nil && n == 0 && cliutil.IsTerminal(os.Stderr) {
		fmt.Fprintln(os.Stderr, "ox-forget: no memory matched")
	}
	return err
}
