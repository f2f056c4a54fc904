package cliutil

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"
)

var helpOnce sync.Once

// showCommandFlags makes the help of an app (or of a command with
// subcommands) list, after its own options, the options of its commands:
// Args lets them come before the command, so they apply there too.
func showCommandFlags() {
	helpOnce.Do(func() {
		print := cli.HelpPrinter
		cli.HelpPrinter = func(w io.Writer, templ string, data any) {
			var cmds []*cli.Command
			var own []cli.Flag
			switch d := data.(type) {
			case *cli.App:
				cmds, own = d.Commands, d.Flags
			case *cli.Command:
				cmds, own = d.Subcommands, d.Flags
			}
			if s := commandFlags(own, cmds); s != "" {
				templ += s
			}
			print(w, templ, data)
		}
	})
}

// commandFlags returns the help section (template text) of the flags of
// cmds that own does not show, each with the commands that take it when
// not all do; "" when there are none.
func commandFlags(own []cli.Flag, cmds []*cli.Command) string {
	shown := map[string]bool{}
	for _, f := range own {
		shown[f.Names()[0]] = true
	}
	type entry struct {
		flag cli.Flag
		by   []string
	}
	var order []string
	byName := map[string]*entry{}
	visible := 0
	for _, c := range cmds {
		if c.Hidden || c.Name == "help" {
			continue
		}
		visible++
		for _, f := range c.VisibleFlags() {
			n := f.Names()[0]
			if n == "help" {
				continue
			}
			e := byName[n]
			if e == nil {
				e = &entry{flag: f}
				byName[n] = e
				order = append(order, n)
			}
			if !slices.Contains(e.by, c.Name) {
				e.by = append(e.by, c.Name)
			}
		}
	}
	var b strings.Builder
	for _, n := range order {
		e := byName[n]
		if shown[n] {
			continue
		}
		line := e.flag.String()
		if len(e.by) < visible {
			line += " (" + strings.Join(e.by, ", ") + ")"
		}
		fmt.Fprintf(&b, "   %s\n", strings.ReplaceAll(line, "{{", `{{"{{"}}`))
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nOPTIONS OF THE COMMANDS (before or after the command):\n" + b.String()
}
