// Command ox-commit versions agent state in git through oxiosd: commit,
// log, show, diff, tag and restore. See ox-commit(1).
package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

// optAgent is -a for the commands where no agent means every agent.
var optAgent = &cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "only agent `NAME` (default: $OXIOS_AGENT, else every agent: the admin's)", EnvVars: []string{"OXIOS_AGENT"}}

func main() {
	app := cliutil.App("ox-commit", "version agent state in git: commit, log, show, diff, tag, restore")
	app.Version = version
	app.Description = "With no subcommand, commit what changed since the last commit. " +
		"Each commit carries the audit head in its message and is itself an audit entry."
	app.UsageText = "ox-commit [-a AGENT] [-m MSG] [--tag NAME] [-q]\n" +
		"ox-commit log|show|diff|tag|restore [OPTIONS] ARGS..."
	app.Flags = []cli.Flag{
		optAgent,
		&cli.StringFlag{Name: "message", Aliases: []string{"m"}, Usage: "commit message `MSG`"},
		&cli.StringFlag{Name: "tag", Usage: "also tag the commit `NAME`"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print nothing on success (for cron: only errors are mailed)"},
		cliutil.SocketFlag, cliutil.JSONFlag,
	}
	app.Action = commitCmd
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:      "log",
			Usage:     "list the commits that changed the agent (or anything), newest first",
			ArgsUsage: "[REV] [PREFIX/]",
			Flags:     []cli.Flag{optAgent, &cli.IntFlag{Name: "n", Usage: "at most `N` commits"}, cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    logCmd,
		},
		{
			Name:      "show",
			Usage:     "print one commit and the paths it changed",
			ArgsUsage: "REV",
			Flags:     []cli.Flag{optAgent, cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    showCmd,
		},
		{
			Name:      "diff",
			Usage:     "list the paths that differ from REV to REV2 (default: the current state)",
			ArgsUsage: "REV [REV2]",
			Flags: []cli.Flag{optAgent,
				&cli.BoolFlag{Name: "patch", Aliases: []string{"p"}, Usage: "print a unified diff"},
				cliutil.SocketFlag, cliutil.JSONFlag},
			Action: diffCmd,
		},
		{
			Name:      "tag",
			Usage:     "tag commit REV (default HEAD) as NAME",
			ArgsUsage: "NAME [REV]",
			Flags:     []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    tagCmd,
		},
		{
			Name:      "push",
			Usage:     "push the history of every agent, with its tags, to the git repository REMOTE (a backup)",
			ArgsUsage: "REMOTE",
			Flags:     []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    pushCmd,
		},
		{
			Name:      "restore",
			Usage:     "make the agent's state equal to REV's, as a new commit",
			ArgsUsage: "REV",
			Flags:     []cli.Flag{cliutil.AgentFlag, cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    restoreCmd,
		},
	})
	cliutil.Run(app)
}

func agentOpt(c *cli.Context) (string, error) {
	// -a given before the subcommand (ox-commit -a ops log) counts too.
	a := c.String("agent")
	for _, ctx := range c.Lineage() {
		if ctx.IsSet("agent") {
			a = ctx.String("agent")
			break
		}
	}
	if a == "" {
		return "", nil
	}
	if err := proto.CheckAgent(a); err != nil {
		return "", cliutil.Usagef("%s", err.Message)
	}
	return a, nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func subject(msg string) string {
	s, _, _ := strings.Cut(strings.TrimSpace(msg), "\n")
	return s
}

// printCommit prints a commit record: JSON, or a few readable lines.
func printCommit(c *cli.Context, rec proto.CommitRecord) error {
	p := cliutil.NewPrinter(c)
	if p.JSON {
		p.Print(rec)
		return p.Flush()
	}
	if rec.Commit == "" {
		fmt.Println("nothing committed yet")
		return nil
	}
	tags := ""
	if len(rec.Tags) > 0 {
		tags = " (tag: " + strings.Join(rec.Tags, ", ") + ")"
	}
	fmt.Printf("commit %s%s\n", rec.Commit, tags)
	if rec.Parent != "" {
		fmt.Printf("parent %s\n", rec.Parent)
	}
	if rec.Author != "" {
		fmt.Printf("author %s  %s\n", rec.Author, localTime(rec.Time))
	}
	if rec.AuditHead != nil {
		fmt.Printf("audit  head %d %s\n", rec.AuditHead.Seq, rec.AuditHead.Hash)
	}
	if rec.AuditSeq != 0 {
		fmt.Printf("audit  entry %d\n", rec.AuditSeq)
	}
	fmt.Printf("\n    %s\n\n", strings.ReplaceAll(strings.TrimSpace(rec.Message), "\n", "\n    "))
	for _, ch := range rec.Changed {
		fmt.Printf("  %s %s\n", actionLetter(ch.Action), ch.Path)
	}
	return nil
}

func actionLetter(a string) string {
	switch a {
	case "added":
		return "A"
	case "deleted":
		return "D"
	}
	return "M"
}

func commitCmd(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.UnknownCommand(c)
	}
	agent, err := agentOpt(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.Commit(c.Context, proto.CommitArgs{Agent: agent, Message: c.String("message"), Tag: c.String("tag")})
	if err != nil {
		return err
	}
	if c.Bool("quiet") {
		return nil
	}
	if len(rec.Changed) == 0 && rec.AuditSeq == 0 && !cliutil.NewPrinter(c).JSON {
		// Not an error: a nightly cron job commits whether or not
		// anything changed. Off a terminal, scripts get the record (HEAD,
		// "nothing to commit") and nothing on stderr.
		fmt.Fprintln(os.Stderr, "ox-commit: nothing to commit")
		return nil
	}
	return printCommit(c, rec)
}

func logCmd(c *cli.Context) error {
	// An argument ending in / is a folder of the agent's keys (a ref
	// name cannot end so): only the commits that changed a key in it.
	var rev, prefix string
	for _, a := range c.Args().Slice() {
		switch {
		case strings.HasSuffix(a, "/") && prefix == "":
			prefix = a
		case !strings.HasSuffix(a, "/") && rev == "":
			rev = a
		default:
			return cliutil.Usagef("log takes at most one REV and one PREFIX/")
		}
	}
	agent, err := agentOpt(c)
	if err != nil {
		return err
	}
	if prefix != "" && agent == "" {
		return cliutil.Usagef("log %s: a PREFIX/ is a folder of an agent's keys: give -a AGENT", prefix)
	}
	limit := c.Int("n")
	if c.Int("n") < 0 {
		return cliutil.Usagef("-n must not be negative")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "COMMIT", "TIME", "AUTHOR", "AUDIT", "CHANGED", "MESSAGE")
	n := 0
	args := proto.CommitLogArgs{Agent: agent, Rev: rev, N: limit}
	if prefix != "" {
		args.N = 0 // the filter is here: count after it
	}
	under := "agents/" + agent + "/state/" + prefix
	err = cl.CommitLog(c.Context, args, func(rec proto.CommitRecord) error {
		if prefix != "" {
			if !slices.ContainsFunc(rec.Changed, func(ch proto.PathChange) bool { return strings.HasPrefix(ch.Path, under) }) {
				return nil
			}
			if limit > 0 && n == limit {
				return nil
			}
		}
		n++
		audit := ""
		if rec.AuditHead != nil {
			audit = fmt.Sprint(rec.AuditHead.Seq)
		}
		msg := subject(rec.Message)
		if len(rec.Tags) > 0 {
			msg = "(" + strings.Join(rec.Tags, ", ") + ") " + msg
		}
		return p.Print(rec, short(rec.Commit), localTime(rec.Time), rec.Author, audit, fmt.Sprint(len(rec.Changed)), msg)
	})
	if ferr := p.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	if err == nil && n == 0 && agent != "" {
		// A removed agent still has its history; an agent with neither
		// history nor anything now does not exist, as every command says.
		var pe *proto.Error
		if _, serr := cl.AgentShow(c.Context, agent); errors.As(serr, &pe) && pe.Code == proto.ENOENT {
			return serr
		}
	}
	return err
}

func showCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("show takes exactly one REV")
	}
	agent, err := agentOpt(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.CommitShow(c.Context, proto.CommitShowArgs{Rev: c.Args().First(), Agent: agent})
	if err != nil {
		return err
	}
	return printCommit(c, rec)
}

func diffCmd(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return cliutil.Usagef("diff takes REV [REV2]")
	}
	agent, err := agentOpt(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	patch := c.Bool("patch")
	p := cliutil.NewPrinter(c, "ACTION", "PATH")
	// -p prints the patch itself (for patch(1), git apply, a pager) unless
	// --json asks for records.
	raw := patch && !c.Bool("json")
	err = cl.CommitDiff(c.Context, proto.CommitDiffArgs{Agent: agent, From: c.Args().Get(0), To: c.Args().Get(1), Patch: patch}, func(rec proto.DiffRecord) error {
		if raw {
			_, err := os.Stdout.WriteString(rec.Patch)
			return err
		}
		return p.Print(rec, actionLetter(rec.Action), rec.Path)
	})
	if ferr := p.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}

func tagCmd(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return cliutil.Usagef("tag takes NAME [REV]")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.CommitTag(c.Context, proto.CommitTagArgs{Name: c.Args().Get(0), Rev: c.Args().Get(1)})
	if err != nil {
		return err
	}
	return printCommit(c, rec)
}

func pushCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("push takes REMOTE: a git URL (ssh://host/path, file:///path, user@host:path) or a repository's path")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.VersionPush(c.Context, c.Args().First())
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "REF", "COMMIT", "REMOTE", "WHAT")
	p.Print(rec, rec.Ref, rec.Commit, rec.Remote, rec.Text)
	return p.Flush()
}

func restoreCmd(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.NArg() != 1 {
		return cliutil.Usagef("restore takes exactly one REV")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	rec, err := cl.CommitRestore(c.Context, proto.CommitRestoreArgs{Agent: agent, Rev: c.Args().First()})
	if err != nil {
		return err
	}
	if len(rec.Changed) == 0 && rec.AuditSeq == 0 {
		fmt.Fprintf(os.Stderr, "ox-commit: the state of %s already equals %s\n", agent, c.Args().First())
		if !cliutil.NewPrinter(c).JSON {
			return nil
		}
	}
	return printCommit(c, rec)
}

// localTime shows a record's RFC 3339 time in local time, as every table
// of the toolkit does (the records keep UTC).
func localTime(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.Local().Format("2006-01-02 15:04:05")
}
