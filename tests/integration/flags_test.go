package integration

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// commandBinaries are the built commands that take a command line: every
// one but the sandbox's init, and ox (cmd/ox, which passes it on).
func commandBinaries(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(binDir)
	if err != nil {
		t.Fatal(err)
	}
	var bins []string
	for _, e := range ents {
		// oxios-rtprobe is the red team's probe (tests/rtprobe), no command.
		if n := e.Name(); strings.HasPrefix(n, "ox") && n != "oxios-sandbox-init" && n != "ox" && n != "oxios-rtprobe" {
			bins = append(bins, n)
		}
	}
	if len(bins) < 26 {
		t.Fatalf("only %d commands in %s: %q", len(bins), binDir, bins)
	}
	return bins
}

// helpFlag is one flag as a --help lists it.
type helpFlag struct {
	name  string // "--agent" or "-n"
	value bool   // takes a value
}

var (
	// "   --agent NAME, -a NAME  act on ..." or "   -n N  at most ..."
	helpFlagRe = regexp.MustCompile(`^\s+(--?[a-z][a-z0-9-]*)( [A-Z][A-Z0-9_|.]*)?(?:,|\s\s|$)`)
	commandsRe = regexp.MustCompile(`^\s+([a-z][a-z0-9-]*)(?:, [a-z]+)*\s\s`)
)

// parseHelp returns the flags and the subcommands a --help lists.
func parseHelp(help string) (flags []helpFlag, cmds []string) {
	section := ""
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		if line != "" && !strings.HasPrefix(line, " ") {
			section = line
			continue
		}
		switch {
		case strings.HasPrefix(section, "COMMANDS"):
			if m := commandsRe.FindStringSubmatch(line); m != nil && m[1] != "help" {
				cmds = append(cmds, m[1])
			}
		case strings.Contains(section, "OPTIONS"):
			if m := helpFlagRe.FindStringSubmatch(line); m != nil && m[1] != "--help" && m[1] != "--version" {
				flags = append(flags, helpFlag{m[1], m[2] != ""})
			}
		}
	}
	return flags, cmds
}

// TestFlagsBeforeCommand gives every flag of every subcommand of every
// command before the subcommand, between its arguments and after them
// (ending with --help, so nothing runs): none may be refused. And no
// flag may be a bool under one subcommand and take a value under another
// of the same command, which would make a line ambiguous before its
// subcommand (cliutil.Args reads the value by what the commands take).
func TestFlagsBeforeCommand(t *testing.T) {
	// Several hundred starts of commands, for a check of flag parsing,
	// which no race can break.
	noRace(t)
	t.Parallel()
	env := []string{"OXIOS_SOCKET=/nonexistent/oxiosd.sock", "NO_COLOR=1"}
	checked := 0
	for _, name := range commandBinaries(t) {
		top := run(t, env, "", name, "--help")
		if top.code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", name, top.code, top.stderr)
		}
		appFlags, cmds := parseHelp(top.stdout)
		if len(appFlags) == 0 && name != "ox-mcp" {
			t.Errorf("%s --help lists no flags:\n%s", name, top.stdout)
		}
		takes := map[string]bool{}
		for _, sub := range cmds {
			h := run(t, env, "", name, sub, "--help")
			if h.code != 0 || !strings.Contains(h.stdout, name+" "+sub) {
				t.Errorf("%s %s --help: exit %d\n%s%s", name, sub, h.code, h.stdout, h.stderr)
				continue
			}
			flags, _ := parseHelp(h.stdout)
			for fi, f := range flags {
				if v, ok := takes[f.name]; ok && v != f.value {
					t.Errorf("%s: %s takes a value under one subcommand and not under another", name, f.name)
				}
				takes[f.name] = f.value
				// The app's help lists it too: it applies there.
				if !strings.Contains(top.stdout, f.name+" ") && !strings.Contains(top.stdout, f.name+",") {
					t.Errorf("%s --help does not list %s, a flag of %s %s", name, f.name, name, sub)
				}
				// Every flag before the subcommand (what the reordering
				// is for); between and after the arguments, the first of
				// each subcommand (the same code path for every flag, and
				// each line a process start, slow under -race).
				lines := [][]string{{f.name, "VALUE", sub, "arg", "--help"}}
				if fi == 0 {
					lines = append(lines, []string{sub, "arg", f.name, "VALUE", "arg2", "--help"}, []string{sub, "arg", f.name, "VALUE", "--help"})
				}
				for _, line := range lines {
					checked++
					if r := flagLine(t, env, name, line, f.value); r.code != 0 || !strings.Contains(r.stdout, name+" "+sub) {
						t.Errorf("%s %s: exit %d, not %s's help\n%s%s", name, strings.Join(line, " "), r.code, sub, r.stdout, r.stderr)
					}
				}
			}
		}
	}
	if checked < 150 {
		t.Fatalf("only %d lines checked", checked)
	}
}

// flagLine runs name with line, VALUE replaced by a value the flag
// parses (an int, a duration, a word) or dropped for a bool.
func flagLine(t *testing.T, env []string, name string, line []string, value bool) result {
	t.Helper()
	var r result
	for _, v := range []string{"1", "1s", "x"} {
		args := slices.Clone(line)
		i := slices.Index(args, "VALUE")
		if value {
			args[i] = v
		} else {
			args = slices.Delete(args, i, i+1)
		}
		r = run(t, env, "", name, args...)
		if !strings.Contains(r.stderr, "invalid value") {
			break
		}
	}
	return r
}
