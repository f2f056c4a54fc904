package cliutil

import (
	"slices"
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
	below map[string]bool // the flags of the commands under it, built when asked
}

func newLevel(flags []cli.Flag, cmds []*cli.Command, help, version bool) *level {
	l := &level{value: map[string]bool{}, cmds: cmds}
	addFlags(l.value, flags)
	if help {
		addFlags(l.value, []cli.Flag{cli.HelpFlag})
	}
	if version {
		addFlags(l.value, []cli.Flag{cli.VersionFlag})
	}
	return l
}

// addFlags records in m each name of flags, with whether it takes a value.
func addFlags(m map[string]bool, flags []cli.Flag) {
	for _, f := range flags {
		takes := true
		if tv, ok := f.(interface{ TakesValue() bool }); ok {
			takes = tv.TakesValue()
		}
		for _, n := range f.Names() {
			m[n] = takes
		}
	}
}

func (l *level) command(name string) *cli.Command {
	for _, c := range l.cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// descendants returns the flags of every command under l. A name that is
// a bool under one command and takes a value under another would make the
// line ambiguous before the command is known; TestFlagsAgree in
// tests/integration keeps the commands free of that.
func (l *level) descendants() map[string]bool {
	if l.below == nil {
		l.below = map[string]bool{}
		var walk func([]*cli.Command)
		walk = func(cmds []*cli.Command) {
			for _, c := range cmds {
				addFlags(l.below, c.Flags)
				walk(c.Subcommands)
			}
		}
		walk(l.cmds)
	}
	return l.below
}

// Args returns the command line args (os.Args: the program first) with
// every flag moved to the command that takes it, after that command's
// name and before the arguments, so that flags may come anywhere:
// `ox-state load notes/today.md -a ops`, `ox-state -a ops load
// notes/today.md` and `ox-state load -a ops notes/today.md` are one line.
//
// urfave/cli v2 stops reading flags at the first argument and gives a
// command only its own flags. Its app-level flags would take the shared
// ones before the command, but then not after it (v2 does not inherit
// flags down), and every Action would read them from two places; this
// one step before parsing gives the order git and kubectl users type to
// every ox-* command, with each command's --help still listing its own
// flags.
//
// A flag given before its command is carried down to the command chosen
// (its value taken if any command below takes one), and so is one the app
// takes too when the command takes it (`ox-commit --json log`: the app's
// --json would be read by nobody). A flag after a command stays with it:
// `ox-commit log -m x` is refused, not taken by the commit log does not
// make. "--" still ends the flags: what follows it is kept as arguments,
// in order, after a "--" of its own (`ox-spawn -a A -- cmd --flag`,
// `ox-state rm -a ops -- -weird-key`). A flag no command of the line knows
// stays where it is, so urfave/cli names it in its usage error.
func Args(app *cli.App, args []string) []string {
	if len(args) == 0 {
		return args
	}
	rest := args[1:]
	complete := false
	if n := len(rest); n > 0 && rest[n-1] == completionFlag {
		complete, rest = true, rest[:n-1]
	}
	levels := []*level{newLevel(app.Flags, app.Commands, !app.HideHelp, !app.HideVersion && app.Version != "")}
	names := []string{args[0]}
	flags := [][]string{nil}
	// carried are flags given before the command that takes them.
	type carried struct {
		name  string
		words []string
		owner int // the level that takes it if no command below does; -1: none
	}
	var carry []carried
	var pos []string
	dash := false
scan:
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		cur := len(levels) - 1
		switch {
		case a == "--":
			dash = true
			pos = append(pos, rest[i+1:]...)
			break scan
		case len(a) > 1 && a[0] == '-':
			name, _, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
			here, known := levels[cur].value[name]
			below, under := levels[cur].descendants()[name]
			takes := here || (!known && below)
			words := []string{a}
			if takes && !eq && i+1 < len(rest) {
				i++
				words = append(words, rest[i])
			}
			if under {
				// A command of the line may take it: the deepest does.
				owner := -1
				if known {
					owner = cur
				}
				carry = append(carry, carried{name, words, owner})
			} else {
				flags[cur] = append(flags[cur], words...)
			}
		case len(pos) == 0 && levels[cur].command(a) != nil:
			c := levels[cur].command(a)
			next := newLevel(c.Flags, c.Subcommands, !c.HideHelp, false)
			levels = append(levels, next)
			names = append(names, a)
			flags = append(flags, nil)
			var still []carried
			for _, cf := range carry {
				if _, ok := next.value[cf.name]; ok {
					flags[cur+1] = append(flags[cur+1], cf.words...)
				} else if _, ok := next.descendants()[cf.name]; ok {
					still = append(still, cf)
				} else if cf.owner >= 0 {
					flags[cf.owner] = append(flags[cf.owner], cf.words...)
				} else {
					still = append(still, cf)
				}
			}
			carry = still
		default:
			pos = append(pos, a)
		}
	}
	// What no command of the line takes is left to the last to refuse,
	// unless the line names a command that is not one (`ox-state -a x
	// lsx`): then that is the error to report, and they follow it.
	last := len(levels) - 1
	var after []string
	for _, cf := range carry {
		switch {
		case cf.owner >= 0:
			flags[cf.owner] = append(flags[cf.owner], cf.words...)
		case len(levels[last].cmds) > 0 && len(pos) > 0 && !dash:
			after = append(after, cf.words...)
		default:
			flags[last] = append(flags[last], cf.words...)
		}
	}
	out := make([]string, 0, len(args)+1)
	for j := range levels {
		out = append(out, names[j])
		out = append(out, flags[j]...)
	}
	// urfave/cli takes the first argument after --help as the command to
	// help with (`ox-state load KEY --help` would answer "unknown command
	// KEY"): asked for help, a command is given no arguments.
	if slices.ContainsFunc(flags[last], func(f string) bool { return f == "-h" || f == "--help" }) && !complete {
		return out
	}
	if dash {
		out = append(out, "--")
	}
	out = append(out, pos...)
	out = append(out, after...)
	if complete {
		out = append(out, completionFlag)
	}
	return out
}
