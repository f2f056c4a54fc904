// Command ox-state saves, loads, lists and deletes agent state through
// oxiosd. See ox-state(1).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-state", "save, load, list and delete agent state")
	app.Version = version
	app.Description = "Keys are relative paths (notes/today.md). Values are bytes; a save is atomic and durable once acknowledged."
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:      "save",
			Usage:     "save VALUE (or stdin) under KEY",
			ArgsUsage: "KEY [VALUE]",
			Flags:     cliutil.ClientFlags(),
			Action:    save,
		},
		{
			Name:      "load",
			Usage:     "write the value of KEY to stdout",
			ArgsUsage: "KEY",
			Flags:     cliutil.ClientFlags(),
			Action:    load,
		},
		{
			Name:      "stat",
			Usage:     "print the record of each KEY (its size and time), not its value",
			ArgsUsage: "KEY...",
			Flags:     cliutil.ClientFlags(),
			Action:    stat,
		},
		{
			Name:      "rm",
			Usage:     "delete keys",
			ArgsUsage: "KEY...",
			Flags:     cliutil.ClientFlags(),
			Action:    rm,
		},
		{
			Name:      "ls",
			Usage:     "list keys at or below PREFIX",
			ArgsUsage: "[PREFIX]",
			Flags:     cliutil.ClientFlags(),
			Action:    ls,
		},
	})
	cliutil.Run(app)
}

func keyArg(c *cli.Context, i int) (string, error) {
	k := c.Args().Get(i)
	if err := proto.CheckKey(k); err != nil {
		return "", cliutil.Usagef("%s", err.Message)
	}
	return k, nil
}

func save(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.NArg() < 1 || c.NArg() > 2 {
		return cliutil.Usagef("save takes KEY [VALUE]; with no VALUE it reads stdin")
	}
	key, err := keyArg(c, 0)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	var value []byte
	if c.NArg() == 2 {
		value = []byte(c.Args().Get(1))
	} else {
		if cliutil.IsTerminal(os.Stdin) {
			fmt.Fprintln(os.Stderr, "ox-state: reading the value from stdin; end it with Ctrl-D")
		}
		// Read one byte past the limit to tell "too big" from "just fits"
		// without holding an unbounded stream.
		max := cl.Hello().MaxValue
		value, err = io.ReadAll(io.LimitReader(os.Stdin, int64(max)+1))
		if err != nil {
			return cliutil.Failf("reading stdin: %v", err)
		}
		if len(value) > max {
			return proto.Errorf(proto.E2BIG, "value on stdin is larger than the daemon's limit of %d bytes (limits.max_value)", max)
		}
		// The producer may have taken longer than the daemon gives a
		// silent connection (limits.hello_timeout): the value goes over a
		// connection of its own, opened now.
		cl.Close()
		if cl, err = cliutil.Connect(c); err != nil {
			return err
		}
		defer cl.Close()
	}
	if max := cl.Hello().MaxValue; len(value) > max {
		return proto.Errorf(proto.E2BIG, "value is %d bytes, larger than the daemon's limit of %d (limits.max_value)", len(value), max)
	}
	rec, err := cl.StateSave(c.Context, agent, key, value)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "AGENT", "KEY", "SIZE", "MODIFIED")
	p.Print(rec, rec.Agent, rec.Key, cliutil.HumanSize(rec.Size), stamp(rec.Modified))
	return p.Flush()
}

func load(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return cliutil.Usagef("load takes exactly one KEY")
	}
	key, err := keyArg(c, 0)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	v, rec, err := cl.StateLoad(c.Context, agent, key)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		p := cliutil.NewPrinter(c)
		p.Print(rec)
		return p.Flush()
	}
	// Raw bytes: load is the inverse of save, for pipes and redirections.
	if _, err := os.Stdout.Write(v); err != nil {
		return cliutil.Failf("writing stdout: %v", err)
	}
	return nil
}

// stat prints the record of each key. Every key is tried; one that fails
// (ENOENT: it does not exist) is reported on stderr, and the exit status
// is that of the worst failure.
func stat(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.NArg() == 0 {
		return cliutil.Usagef("stat takes one or more KEYs")
	}
	for i := range c.NArg() {
		if _, err := keyArg(c, i); err != nil {
			return err
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "AGENT", "KEY", "SIZE", "MODIFIED")
	var first error
	for _, key := range c.Args().Slice() {
		rec, err := cl.StateStat(c.Context, agent, key)
		if err != nil {
			p.Flush()
			fmt.Fprintf(os.Stderr, "ox-state: %v\n", err)
			if first == nil || cliutil.Code(err) > cliutil.Code(first) {
				first = err
			}
			continue
		}
		p.Print(rec, rec.Agent, rec.Key, cliutil.HumanSize(rec.Size), stamp(rec.Modified))
	}
	if err := p.Flush(); err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	if first != nil {
		return cliutil.Silent(cliutil.Code(first))
	}
	return nil
}

// rmWindow is how many deletes ox-state rm has in flight at once.
const rmWindow = 256

func rm(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	keys, err := cliutil.ArgsOrStdin(c, agent, "key")
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		if cliutil.NothingPiped(c) {
			return nil
		}
		return cliutil.Usagef("rm takes one or more KEYs, or state records on stdin (ox-state ls prints them)")
	}
	for _, k := range keys {
		if err := proto.CheckKey(k); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "AGENT", "KEY", "SIZE", "STATUS")
	defer p.Flush()
	// Every key is tried; the exit status is that of the worst failure.
	// The deletes are pipelined, rmWindow in flight: many keys cost a few
	// round trips and group commits, not one each.
	var first error
	pl := cl.Pipeline()
	var window []*client.Pending
	for len(keys) > 0 {
		n := min(len(keys), rmWindow)
		for _, key := range keys[:n] {
			window = append(window, pl.StateDelete(agent, key))
		}
		keys = keys[n:]
		pl.Send() // a failure is each Pending's
		for i, pd := range window {
			window[i] = nil
			rec, err := pd.State(c.Context)
			if err != nil {
				p.Flush()
				fmt.Fprintf(os.Stderr, "ox-state: %v\n", err)
				if first == nil || cliutil.Code(err) > cliutil.Code(first) {
					first = err
				}
				continue
			}
			p.Print(rec, rec.Agent, rec.Key, cliutil.HumanSize(rec.Size), "deleted")
		}
		window = window[:0]
	}
	if first != nil {
		return cliutil.Silent(cliutil.Code(first))
	}
	return nil
}

func ls(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.NArg() > 1 {
		return cliutil.Usagef("ls takes at most one PREFIX")
	}
	prefix := c.Args().First()
	if err := proto.CheckPrefix(prefix); err != nil {
		return cliutil.Usagef("%s", err.Message)
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "KEY", "SIZE", "MODIFIED")
	err = cl.StateList(c.Context, agent, prefix, func(rec proto.StateRecord) error {
		return p.Print(rec, rec.Key, cliutil.HumanSize(rec.Size), stamp(rec.Modified))
	})
	if ferr := p.Flush(); err == nil && ferr != nil && !errors.Is(ferr, os.ErrClosed) {
		err = ferr
	}
	return err
}

func stamp(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }
