package main

import (
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
	if c.String("work") != "" {
		return cliutil.Usagef("--work is for commands: a WASM tool sees only its workspace")
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
	var note string
	switch {
	case rec.TimedOut:
		note = "timed out and stopped"
	case rec.Trap != "":
		note = tool + " trapped: " + rec.Trap
	}
	return report(c, &rec, rec.Stdout, rec.Stderr, rec.Truncated, note, rec.Status)
}
