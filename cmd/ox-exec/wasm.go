package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

// runTool runs the WASM tool --wasm names, with the args as its args and
// stdin (a pipe or file) as its input: the tool.run syscall.
func runTool(c *cli.Context, agent, tool string) error {
	if c.String("command") != "" {
		return cliutil.Usagef("give --wasm TOOL or -c LINE, not both")
	}
	a := proto.ToolRunArgs{Agent: agent, Tool: tool, Args: c.Args().Slice()}
	if d := c.Duration("timeout"); d > 0 {
		a.Timeout = d.String()
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	if a.Input, err = cliutil.ReadInput(cl.Hello().MaxValue); err != nil {
		return err
	}
	rec, err := cl.ToolRun(c.Context, a)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		p := cliutil.NewPrinter(c)
		p.Print(rec)
		if err := p.Flush(); err != nil {
			return err
		}
	} else {
		os.Stdout.WriteString(rec.Stdout)
		os.Stderr.WriteString(rec.Stderr)
		if rec.Truncated {
			os.Stderr.WriteString("ox-exec: output cut off at the policy's exec.output_cap\n")
		}
		if rec.TimedOut {
			os.Stderr.WriteString("ox-exec: timed out and stopped\n")
		}
		if rec.Trap != "" {
			os.Stderr.WriteString("ox-exec: " + tool + " trapped: " + rec.Trap + "\n")
		}
	}
	if rec.Status != 0 {
		return cliutil.Silent(rec.Status)
	}
	return nil
}
