package cliutil

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
	"github.com/oxios/oxios/share"
)

// CompleteFlag is the hidden entry point the shell completions call:
// `ox-state --complete WORD... CURRENT` prints what CURRENT may become
// after the words before it, one a line ("value<TAB>what it is"), read
// off the command's own cli.App (subcommands, flags, the kinds of its
// arguments) and, for agents, keys, runs, jobs, revisions, skills and personas, asked of the daemon.
// A line ":files" asks the shell to complete file names. So the scripts
// of pkg/completion are the same few lines for every command, and what
// they offer is always what the binary on PATH takes.
const CompleteFlag = "--complete"

// Value kinds the daemon is asked for, and files, which the shell lists.
const (
	kindAgents   = "agents"
	kindKeys     = "keys"
	kindRuns     = "runs"
	kindJobs     = "jobs"
	kindRevs     = "revisions"
	kindSkills   = "skills"
	kindPrograms = "programs"
	kindPersonas = "personas"
	kindFiles    = "files"
)

// wordKind returns what completes the word of a command's ArgsUsage
// (a switch, not a map: nothing to build at every command's start).
func wordKind(app, w string) string {
	switch w {
	case "AGENT", "OTHER", "TO":
		return kindAgents
	case "KEY", "PREFIX":
		return kindKeys
	case "RUN":
		return kindRuns
	case "REV", "REV2":
		return kindRevs
	case "FILE", "DIR":
		return kindFiles
	case "NAME": // it names different things
		switch app {
		case "ox-agents":
			return kindAgents
		case "ox-schedule":
			return kindJobs
		case "ox-skill":
			return kindSkills
		case "ox-program":
			return kindPrograms
		}
	}
	return ""
}

// CompleteIfAsked answers `PROG --complete WORD...` and exits; Run calls
// it first, and so must a command that runs its app itself.
func CompleteIfAsked(app *cli.App) {
	if len(os.Args) > 1 && os.Args[1] == CompleteFlag {
		Complete(context.Background(), os.Stdout, app, os.Args[2:])
		os.Exit(ExitOK)
	}
}

// Complete writes to w the completions of the last of words (those after
// the program's name) for app.
func Complete(ctx context.Context, w io.Writer, app *cli.App, words []string) {
	if len(words) == 0 {
		words = []string{""}
	}
	words = joinEquals(words)
	cur := words[len(words)-1]
	lvl := newLevel(app.Flags, app.Commands, !app.HideHelp, !app.HideVersion && app.Version != "")
	var path []*cli.Command
	lvlFlags := [][]cli.Flag{app.Flags}
	seen := map[string]string{} // flag values given, by every name of the flag
	var pos []string
	dash := false
	var pending cli.Flag // a flag whose value is cur
	for i := 0; i < len(words)-1; i++ {
		a := words[i]
		switch {
		case dash:
			pos = append(pos, a)
		case a == "--":
			dash = true
		case len(a) > 1 && a[0] == '-':
			name, val, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
			f := findFlag(lvlFlags, lvl, name)
			if f == nil || !takesValue(f) || eq {
				if f != nil && eq {
					for _, n := range f.Names() {
						seen[n] = val
					}
				}
				continue
			}
			if i+1 == len(words)-1 {
				pending = f
				break
			}
			i++
			for _, n := range f.Names() {
				seen[n] = words[i]
			}
		case len(pos) == 0 && lvl.command(a) != nil:
			c := lvl.command(a)
			path = append(path, c)
			lvlFlags = append(lvlFlags, c.Flags)
			lvl = newLevel(c.Flags, c.Subcommands, !c.HideHelp, false)
		default:
			pos = append(pos, a)
		}
	}
	out := &completer{ctx: ctx, w: w, app: app, seen: seen, cur: cur}
	switch {
	case pending != nil:
		out.value(pending, cur, "")
	case !dash && strings.HasPrefix(cur, "-") && strings.Contains(cur, "="):
		name, val, _ := strings.Cut(cur, "=")
		if f := findFlag(lvlFlags, lvl, strings.TrimLeft(name, "-")); f != nil && takesValue(f) {
			out.value(f, val, name+"=")
		}
	case !dash && strings.HasPrefix(cur, "-"):
		flags := append(slices.Clone(lvlFlags[len(lvlFlags)-1]), cli.HelpFlag)
		if len(path) == 0 && !app.HideVersion && app.Version != "" {
			flags = append(flags, cli.VersionFlag)
		}
		// The flags of the commands below may come first too.
		var walk func([]*cli.Command)
		walk = func(cmds []*cli.Command) {
			for _, c := range cmds {
				if !c.Hidden {
					flags = append(flags, c.Flags...)
					walk(c.Subcommands)
				}
			}
		}
		walk(lvl.cmds)
		done := map[string]bool{}
		for _, f := range flags {
			if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
				continue
			}
			usage := ""
			if df, ok := f.(cli.DocGenerationFlag); ok {
				usage = df.GetUsage()
			}
			for _, n := range f.Names() {
				d := "--" + n
				if len(n) == 1 {
					d = "-" + n
				}
				if !done[d] {
					done[d] = true
					out.add(d, usage)
				}
			}
		}
	default:
		if len(pos) == 0 && !dash {
			for _, c := range lvl.cmds {
				if !c.Hidden {
					for _, n := range c.Names() {
						out.add(n, c.Usage)
					}
				}
			}
		}
		usage, text := app.ArgsUsage, app.UsageText
		if len(path) > 0 {
			usage, text = path[len(path)-1].ArgsUsage, path[len(path)-1].UsageText
		}
		if kind := argKind(app.Name, usage, text, len(pos)); kind != "" {
			out.kind(kind, cur, "")
		}
	}
}

// joinEquals undoes bash's splitting of --flag=value at its '=' (one of
// COMP_WORDBREAKS): "--agent" "=" "we" is "--agent=we".
func joinEquals(words []string) []string {
	var out []string
	for i := 0; i < len(words); i++ {
		if words[i] == "=" && len(out) > 0 && strings.HasPrefix(out[len(out)-1], "-") && !strings.Contains(out[len(out)-1], "=") {
			out[len(out)-1] += "="
			if i+1 < len(words) {
				i++
				out[len(out)-1] += words[i]
			}
			continue
		}
		out = append(out, words[i])
	}
	return out
}

func takesValue(f cli.Flag) bool {
	if tv, ok := f.(interface{ TakesValue() bool }); ok {
		return tv.TakesValue()
	}
	return true
}

// findFlag finds the flag name among the flags of the line's commands
// (the last first) and those of the commands below the last.
func findFlag(levels [][]cli.Flag, lvl *level, name string) cli.Flag {
	for i := len(levels) - 1; i >= 0; i-- {
		for _, f := range levels[i] {
			if slices.Contains(f.Names(), name) {
				return f
			}
		}
	}
	var found cli.Flag
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				if found == nil && slices.Contains(f.Names(), name) {
					found = f
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(lvl.cmds)
	return found
}

// argKind returns what the n-th argument of a command is, read from its
// ArgsUsage ("KEY [VALUE]", "RUN...") or else from its UsageText's first
// line ("ox-fork [-r REV] AGENT NEW").
func argKind(app, usage, text string, n int) string {
	if strings.TrimSpace(usage) == "" && text != "" {
		line, _, _ := strings.Cut(text, "\n")
		// Compiled here, when asked: a regexp at package level would be
		// compiled at every command's start.
		flagGroupRe := regexp.MustCompile(`\[-[^\]]*\]`)
		fields := strings.Fields(flagGroupRe.ReplaceAllString(line, ""))
		if len(fields) > 0 {
			usage = strings.Join(fields[1:], " ")
		}
	}
	if strings.HasPrefix(strings.TrimSpace(usage), "--") || strings.Contains(usage, "| --") {
		return "" // a command line of its own, or TASK text
	}
	alt, _, _ := strings.Cut(usage, " | ")
	var words []string
	for _, w := range strings.Fields(alt) {
		if w == "[--]" {
			continue
		}
		words = append(words, w)
	}
	if len(words) == 0 {
		return ""
	}
	w := words[min(n, len(words)-1)]
	if n >= len(words) && !strings.Contains(w, "...") {
		return ""
	}
	w = strings.Trim(w, "[].")
	if i := strings.IndexByte(w, '|'); i >= 0 {
		w = w[:i]
	}
	return wordKind(app, w)
}

// completer writes the candidates that begin with what is typed.
type completer struct {
	ctx  context.Context
	w    io.Writer
	app  *cli.App
	seen map[string]string
	cur  string
}

func (c *completer) add(value, usage string) {
	if !strings.HasPrefix(value, c.cur) {
		return
	}
	if usage != "" {
		usage = "\t" + strings.ReplaceAll(strings.ReplaceAll(usage, "`", ""), "\n", " ")
	}
	fmt.Fprintf(c.w, "%s%s\n", value, usage)
}

// value completes the value of flag f typed as typed, each candidate
// prefixed with prefix (--agent= when the value is in the same word).
func (c *completer) value(f cli.Flag, typed, prefix string) {
	switch {
	case slices.Contains(f.Names(), "agent"):
		c.kind(kindAgents, typed, prefix)
	case slices.Contains(f.Names(), "rev"):
		c.kind(kindRevs, typed, prefix)
	case slices.Contains(f.Names(), "persona"):
		c.kind(kindPersonas, typed, prefix)
	case isFileFlag(f):
		fmt.Fprintln(c.w, ":files")
	}
}

func isFileFlag(f cli.Flag) bool {
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.TakesFile
	case *cli.PathFlag:
		return f.TakesFile
	case *cli.StringSliceFlag:
		return f.TakesFile
	}
	return false
}

// kind lists the values of a kind that begin with typed, asking the daemon
// named on the line (or by OXIOS_SOCKET) for about a second at most.
func (c *completer) kind(kind, typed, prefix string) {
	if kind == kindFiles {
		fmt.Fprintln(c.w, ":files")
		return
	}
	if kind == kindPersonas {
		// The shipped ones, even with no daemon; the agent's own after.
		ents, _ := fs.ReadDir(share.Personas, "personas")
		for _, e := range ents {
			c.cur = prefix + typed
			c.add(prefix+strings.TrimSuffix(e.Name(), ".toml"), "shipped")
		}
	}
	socket := c.seen["socket"]
	if socket == "" {
		socket = os.Getenv("OXIOS_SOCKET")
	}
	if socket == "" {
		socket = proto.DefaultPaths().Socket
	}
	agent := c.seen["agent"]
	if agent == "" {
		agent = os.Getenv("OXIOS_AGENT")
	}
	ctx, cancel := context.WithTimeout(c.ctx, time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, socket)
	if err != nil {
		return
	}
	defer cl.Close()
	c.cur = prefix + typed
	add := func(v, usage string) { c.add(prefix+v, usage) }
	switch kind {
	case kindAgents:
		cl.AgentList(ctx, func(r proto.AgentRecord) error { add(r.Agent, ""); return nil })
	case kindKeys:
		if agent != "" {
			cl.StateList(ctx, agent, "", func(r proto.StateRecord) error { add(r.Key, ""); return nil })
		}
	case kindRuns:
		cl.Ps(ctx, proto.PsArgs{Agent: agent}, func(r proto.RunRecord) error {
			add(r.ID, r.Agent+" "+r.State+" "+strings.Join(r.Command, " ")+r.Task)
			return nil
		})
	case kindJobs:
		cl.ScheduleList(ctx, agent, func(r proto.JobRecord) error { add(r.Name, r.Agent+" "+r.Schedule); return nil })
	case kindSkills, kindPrograms:
		if agent != "" {
			// Skills are skills/NAME/..., programs programs/NAME/...
			// (pkg/program, not imported here: every command's start
			// would pay for its TOML and policy packages).
			prefix := skill.Prefix
			if kind == kindPrograms {
				prefix = "programs/"
			}
			seen := map[string]bool{}
			cl.StateList(ctx, agent, prefix, func(r proto.StateRecord) error {
				name, _, _ := strings.Cut(strings.TrimPrefix(r.Key, prefix), "/")
				if !seen[name] {
					seen[name] = true
					add(name, "")
				}
				return nil
			})
		}
	case kindPersonas:
		if agent != "" {
			cl.StateList(ctx, agent, "personas/", func(r proto.StateRecord) error {
				name := strings.TrimPrefix(r.Key, "personas/")
				if _, err := fs.Stat(share.Personas, "personas/"+name+".toml"); err != nil {
					add(name, "the agent's")
				}
				return nil
			})
		}
	case kindRevs:
		// HEAD, and the last commits (of the agent, when one is named)
		// by tag and by short hash.
		add("HEAD", "the last commit")
		cl.CommitLog(ctx, proto.CommitLogArgs{Agent: agent, N: 50}, func(r proto.CommitRecord) error {
			for _, t := range r.Tags {
				add(t, r.Message)
			}
			add(r.Commit[:min(12, len(r.Commit))], r.Message)
			return nil
		})
	}
}
