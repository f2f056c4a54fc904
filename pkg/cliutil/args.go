package cliutil

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// completionFlag is the flag urfave/cli's shell completion puts last.
const completionFlag = "--generate-bash-completion"

// level is one command of a command line: the flags it takes (by name, with
// whether each takes a value) and the subcommands it has.
type level struct {
	value map[string]bool
	cmds  []*cli.Command
}

func newLevel(flags []cli.Flag, cmds []*cli.Command, help, version bool) level {
	l := level{value: map[string]bool{}, cmds: cmds}
	add := func(f cli.Flag) {
		takes := true
		if tv, ok := f.(interface{ TakesValue() bool }); ok {
			takes = tv.TakesValue()
		}
		for _, n := range f.Names() {
			l.value[n] = takes
		}
	}
	for _, f := range flags {
		add(f)
	}
	if help {
		add(cli.HelpFlag)
	}
	if version {
		add(cli.VersionFlag)
	}
	return l
}

func (l level) command(name string) *cli.Command {
	for _, c := range l.cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// Args returns the command line args (os.Args: the program first) with
// the flags of each command moved before its arguments, so that flags may
// come anywhere: `ox-state load notes/today.md -a ops` is `ox-state load
// -a ops notes/today.md`. urfave/cli v2 stops reading flags at the first
// argument; this is the one place every ox-* command gets the order git and
// kubectl users type. "--" still ends the flags: what follows it is kept as
// arguments, in order, after a "--" of its own (`ox-spawn -a A -- cmd
// --flag`, `ox-state rm -a ops -- -weird-key`). A flag a command does not
// know stays where it is, so urfave/cli names it in its usage error.
func Args(app *cli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	complete := false
	if n := len(rest); n > 0 && rest[n-1] == completionFlag {
		complete, rest = true, rest[:n-1]
	}
	lvl := newLevel(app.Flags, app.Commands, !app.HideHelp, !app.HideVersion && app.Version != "")
	for {
		var flags, pos []string
		var next *cli.Command
		dash := false
	scan:
		for i := 0; i < len(rest); i++ {
			a := rest[i]
			switch {
			case a == "--":
				dash = true
				pos = append(pos, rest[i+1:]...)
				break scan
			case len(a) > 1 && a[0] == '-':
				flags = append(flags, a)
				name, _, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
				if !eq && lvl.value[name] && i+1 < len(rest) {
					i++
					flags = append(flags, rest[i])
				}
			case len(pos) == 0 && lvl.command(a) != nil:
				next = lvl.command(a)
				flags = append(flags, a)
				rest = rest[i+1:]
				break scan
			default:
				pos = append(pos, a)
			}
		}
		out = append(out, flags...)
		if next != nil {
			lvl = newLevel(next.Flags, next.Subcommands, !next.HideHelp, false)
			continue
		}
		if dash {
			out = append(out, "--")
		}
		out = append(out, pos...)
		break
	}
	if complete {
		out = append(out, completionFlag)
	}
	return out
}
