// Command ox-exec runs a command for an agent under its policy. See
// ox-exec(1).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-exec", "run a command for an agent under its policy")
	app.Version = version
	app.ArgsUsage = "[--] COMMAND [ARG...] | --wasm TOOL [ARG...]"
	app.Description = "Asks oxiosd to run COMMAND for the agent, as the exec syscall an agent's runner uses: only a program on the policy's exec.allow list runs, shell metacharacters need exec.shell, in the agent's workspace, with the policy's timeout, output cap and limits; every exec is audited. Prints the command's stdout and stderr and exits with its status; --json prints the exec record instead. A pipe or file on stdin is the command's stdin. With --work DIR the command sees the host folder DIR at /work through a copy-on-write overlay, as a run of ox-spawn --work does: DIR does not change, and what the command changed waits as its work, named by the id ox-exec prints, for ox-work diff, apply or discard. With --wasm it runs the WASM tool TOOL instead (policy tools.allow), in a sandbox that sees the workspace and nothing else of the host."
	app.Flags = cliutil.ClientFlags(
		&cli.StringFlag{Name: "command", Aliases: []string{"c"}, Usage: "a command `LINE`, split into words (or run by /bin/sh -c when the policy allows a shell)"},
		&cli.DurationFlag{Name: "timeout", Usage: "kill the command after `D` (at most the policy's exec.timeout)"},
		&cli.StringFlag{Name: "wasm", Usage: "run the WASM tool `TOOL` with the ARGs, stdin as its input"},
		&cli.StringFlag{Name: "work", Aliases: []string{"w"}, TakesFile: true, Usage: "work on host folder `DIR` at /work through an overlay: the folder does not change, the command's changes wait for ox-work apply (the policy's [work] allow names the folders)"},
	)
	app.Action = execute
	cliutil.Run(app)
}

func execute(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if tool := c.String("wasm"); tool != "" {
		return runTool(c, agent, tool)
	}
	a := proto.ExecArgs{Agent: agent, Argv: c.Args().Slice(), Command: c.String("command")}
	if (len(a.Argv) == 0) == (a.Command == "") {
		return cliutil.Usagef("give a COMMAND and its arguments, or -c LINE (one of them)")
	}
	if w := c.String("work"); w != "" {
		// The daemon resolves links and checks the folder: a relative
		// path means this command's folder, which it does not know.
		if a.Work, err = filepath.Abs(w); err != nil {
			return cliutil.Usagef("--work %s: %v", w, err)
		}
	}
	if d := c.Duration("timeout"); d > 0 {
		a.Timeout = d.String()
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	if a.Stdin, err = cliutil.ReadInput(cl.Hello().MaxValue); err != nil {
		return err
	}
	rec, err := cl.Exec(c.Context, a)
	if err != nil && rec.Type == "" {
		return err
	}
	var note string
	if rec.TimedOut {
		note = "timed out and killed"
	}
	if rec.ID != "" {
		if note != "" {
			note += "; "
		}
		if rec.Changes > 0 {
			note += fmt.Sprintf("%d changes to %s wait as work %s (ox-work diff %s)", rec.Changes, rec.Work, rec.ID, rec.ID)
		} else {
			note += "no change to " + rec.Work
		}
	}
	if err != nil {
		// The command ran, but its work was not kept: say both.
		report(c, &rec, rec.Stdout, rec.Stderr, rec.Truncated, note, rec.Status)
		return err
	}
	return report(c, &rec, rec.Stdout, rec.Stderr, rec.Truncated, note, rec.Status)
}

// report prints an exec's or a tool call's record: the record itself with
// --json, else its output on ours, the truncation and note (a timeout...)
// on standard error. The exit status is the command's.
func report(c *cli.Context, rec any, stdout, stderr string, truncated bool, note string, status int) error {
	if c.Bool("json") {
		p := cliutil.NewPrinter(c)
		p.Print(rec)
		if err := p.Flush(); err != nil {
			return err
		}
	} else {
		os.Stdout.WriteString(stdout)
		os.Stderr.WriteString(stderr)
		if truncated {
			os.Stderr.WriteString("ox-exec: output cut off at the policy's exec.output_cap\n")
		}
		if note != "" {
			os.Stderr.WriteString("ox-exec: " + note + "\n")
		}
	}
	if status != 0 {
		return cliutil.Silent(status)
	}
	return nil
}
