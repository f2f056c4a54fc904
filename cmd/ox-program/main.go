// Command ox-program installs, lists, shows, runs, upgrades and removes
// an agent's programs: workflows that run through the kernel's syscalls
// only. See ox-program(1).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/program"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/skill"
	"github.com/oxios/oxios/share"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-program", "install, list, show, run, upgrade and remove an agent's programs")
	app.Version = version
	app.Description = "A program is a folder with a program.toml (name, version, description, the agent it runs as, the policy it asks as a fragment of a policy, its entry command or LLM task, an optional schedule and [args]), a SKILL.md and its scripts. It is installed into the agent's state under programs/NAME/ (so ox-commit versions it and ox-fork carries it) after the operator agrees to the policy it asks; a program asking more than its agent's policy grants is refused, at install and at every run. It runs sandboxed as a run of the agent and reaches Oxios only through the ox-* commands inside its run."
	shared := &cli.BoolFlag{Name: "shared", Usage: "the programs shipped with Oxios, not an agent's"}
	yes := &cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "agree to the policy the program asks without being asked"}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{Name: "install", Usage: "install a program from a folder, a git repository or a shipped one by name", ArgsUsage: "DIR|GIT-URL|NAME", Flags: cliutil.ClientFlags(yes), Action: install},
		{Name: "ls", Usage: "list the agent's programs (or the shipped ones with --shared)", Flags: cliutil.ClientFlags(shared), Action: ls},
		{Name: "show", Usage: "print a program's program.toml and SKILL.md", ArgsUsage: "NAME", Flags: cliutil.ClientFlags(shared), Action: show},
		{Name: "run", Usage: "run an installed program as a run of its agent (NAME=VALUE sets an argument)", ArgsUsage: "NAME [ARG=VALUE...] [WORD...]",
			Flags: cliutil.ClientFlags(
				&cli.StringFlag{Name: "work", Aliases: []string{"w"}, TakesFile: true, Usage: "the run works on host folder `DIR` at /work through an overlay (ox-work applies its changes)"},
				&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "print the run record and return; the run goes on"},
				&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the model of an LLM program's run"},
				&cli.BoolFlag{Name: "no-stdin", Aliases: []string{"n"}, Usage: "do not pass stdin to the run"},
				&cli.BoolFlag{Name: "schedule", Usage: "do not run now: add (or replace) a job that runs the program on its schedule"},
				&cli.StringFlag{Name: "cron", Usage: "with --schedule, the schedule `EXPR` instead of the program's"},
			), Action: run},
		{Name: "upgrade", Usage: "install a program again from where it came from, when it changed", ArgsUsage: "NAME...", Flags: cliutil.ClientFlags(yes), Action: upgrade},
		{Name: "rm", Usage: "remove programs (and their jobs) from the agent", ArgsUsage: "NAME...", Flags: cliutil.ClientFlags(), Action: rm},
		{Name: "start", Usage: "(inside a run) fetch the program from the agent's state and run its entry", ArgsUsage: "NAME [ARG=VALUE...] [WORD...]", Hidden: true,
			Flags: cliutil.ClientFlags(), SkipFlagParsing: true, Action: start},
	})
	cliutil.Run(app)
}

// record is the "program" record.
type record struct {
	Type        string            `json:"type"` // always "program"
	Agent       string            `json:"agent,omitempty"`
	Name        string            `json:"name"`
	Version     string            `json:"version,omitempty"`
	Description string            `json:"description,omitempty"`
	Entry       string            `json:"entry,omitempty"` // "command" or "task"
	Schedule    string            `json:"schedule,omitempty"`
	Policy      string            `json:"policy,omitempty"` // the fragment asked, TOML
	Args        map[string]string `json:"args,omitempty"`   // name: description
	Source      string            `json:"source,omitempty"`
	Commit      string            `json:"commit,omitempty"`
	Files       []string          `json:"files,omitempty"`
	Size        int64             `json:"size,omitempty"`
	Job         string            `json:"job,omitempty"`
	Error       string            `json:"error,omitempty"`
	Deleted     bool              `json:"deleted,omitempty"`
	Text        string            `json:"text"`
}

func recordOf(agent string, p *program.Program) record {
	r := record{Type: "program", Agent: agent, Name: p.Name, Version: p.Version, Description: p.Description,
		Schedule: p.Schedule, Policy: p.Policy.TOML(), Text: p.Description, Entry: "command"}
	if p.Task != "" {
		r.Entry = "task"
	}
	for n, a := range p.Args {
		if r.Args == nil {
			r.Args = map[string]string{}
		}
		r.Args[n] = a.Description
	}
	return r
}

// store is skill.Store over the daemon, for one agent.
type store = skill.Client

func sharedFS() fs.FS {
	sub, _ := fs.Sub(share.Programs, "programs")
	return sub
}

// agentFor is the agent of a command on program p: -a given on the
// command line, else the program's own agent, else $OXIOS_AGENT (a shell's
// default agent does not move a program from the agent it names).
func agentFor(c *cli.Context, p *program.Program) (string, error) {
	if !agentGiven() && p != nil && p.Agent != "" {
		if err := proto.CheckAgent(p.Agent); err != nil {
			return "", cliutil.Failf("program %s: agent: %s", p.Name, err.Message)
		}
		return p.Agent, nil
	}
	return cliutil.Agent(c)
}

// agentGiven reports whether -a or --agent is on the command line (not
// only in the environment).
func agentGiven() bool {
	for _, a := range os.Args[1:] {
		if a == "--" {
			break
		}
		if a == "-a" || a == "--agent" || strings.HasPrefix(a, "-a=") || strings.HasPrefix(a, "--agent=") {
			return true
		}
	}
	return false
}

func connect(c *cli.Context, agent string) (store, func(), error) {
	cl, err := cliutil.Connect(c)
	if err != nil {
		return store{}, nil, err
	}
	return store{C: cl, Agent: agent}, func() { cl.Close() }, nil
}

// gitURL reports whether arg names a git repository to clone rather than
// a folder to read: a URL, scp-like user@host:path, or a bare repository.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

func gitURL(arg string) bool {
	if strings.Contains(arg, "://") || scpLike.MatchString(arg) {
		return true
	}
	if fi, err := os.Stat(filepath.Join(arg, program.Manifest)); err == nil && fi.Mode().IsRegular() {
		return false
	}
	// A bare repository: HEAD and objects/, no program.toml.
	_, h := os.Stat(filepath.Join(arg, "HEAD"))
	_, o := os.Stat(filepath.Join(arg, "objects"))
	return h == nil && o == nil
}

// source reads what install was given: a folder, a git repository (a URL,
// with #REF for a branch or tag), or the name of a shipped program.
func source(ctx context.Context, arg string) (*program.Program, []skill.FileData, program.Source, error) {
	if gitURL(arg) {
		return clone(ctx, arg)
	}
	if fi, err := os.Stat(arg); err == nil || strings.ContainsRune(arg, '/') {
		if err != nil {
			return nil, nil, program.Source{}, cliutil.Failf("%v", err)
		}
		if !fi.IsDir() {
			return nil, nil, program.Source{}, cliutil.Failf("%s is not a folder: a program is a folder with a %s", arg, program.Manifest)
		}
		abs, _ := filepath.Abs(arg)
		p, files, err := program.Load(os.DirFS(abs), ".")
		if err != nil {
			return nil, nil, program.Source{}, cliutil.Failf("%s: %v", arg, err)
		}
		return p, files, program.Source{From: abs}, nil
	}
	if err := program.CheckName(arg); err != nil {
		return nil, nil, program.Source{}, cliutil.Usagef("%s: not a folder, a git URL, nor the name of a shipped program (%v)", arg, err)
	}
	if _, err := fs.Stat(sharedFS(), arg); err != nil {
		return nil, nil, program.Source{}, cliutil.Failf("%s: no such folder, and no shipped program of that name (ox-program ls --shared lists them)", arg)
	}
	p, files, err := program.Load(sharedFS(), arg)
	if err != nil {
		return nil, nil, program.Source{}, cliutil.Failf("shipped program %s: %v", arg, err)
	}
	return p, files, program.Source{From: "shared"}, nil
}

// clone reads the program at the top of the git repository url (#REF: a
// branch or tag), from a shallow clone made and removed here.
func clone(ctx context.Context, url string) (*program.Program, []skill.FileData, program.Source, error) {
	repo, ref, _ := strings.Cut(url, "#")
	tmp, err := os.MkdirTemp("", "ox-program-")
	if err != nil {
		return nil, nil, program.Source{}, err
	}
	defer os.RemoveAll(tmp)
	args := []string{"clone", "-q", "--depth", "1"}
	if ref != "" {
		args = append(args, "--branch", ref)
	}
	git := exec.CommandContext(ctx, "git", append(args, "--", repo, filepath.Join(tmp, "p"))...)
	git.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := git.CombinedOutput(); err != nil {
		return nil, nil, program.Source{}, cliutil.Failf("git clone %s: %v: %s", repo, err, strings.TrimSpace(string(out)))
	}
	head, err := exec.CommandContext(ctx, "git", "-C", filepath.Join(tmp, "p"), "rev-parse", "HEAD").Output()
	if err != nil {
		return nil, nil, program.Source{}, cliutil.Failf("git rev-parse in the clone of %s: %v", repo, err)
	}
	p, files, err := program.Load(os.DirFS(filepath.Join(tmp, "p")), ".")
	if err != nil {
		return nil, nil, program.Source{}, cliutil.Failf("%s: %v", url, err)
	}
	return p, files, program.Source{From: url, Commit: strings.TrimSpace(string(head))}, nil
}

// policyOf is the agent's policy, parsed (the default one for an agent
// that does not exist yet: what its first run would get).
func policyOf(ctx context.Context, cl *client.Client, agent string) (*policy.Policy, error) {
	rec, err := cl.PolicyShow(ctx, agent)
	if isCode(err, proto.ENOENT) {
		// No such agent yet: its first save or run creates it with the
		// default policy.
		return policy.Default(), nil
	}
	if err != nil {
		return nil, err
	}
	p, err := policy.Parse([]byte(rec.Text))
	if err != nil {
		return nil, cliutil.Failf("agent %s's policy: %v", agent, err)
	}
	return p, nil
}

// permitted refuses (EPERM, exit 77) a program that asks more of its
// agent's policy than it grants, naming each thing.
func permitted(ctx context.Context, cl *client.Client, agent string, p *program.Program) error {
	pol, err := policyOf(ctx, cl, agent)
	if err != nil {
		return err
	}
	if over := p.Policy.Exceeds(pol); len(over) > 0 {
		return proto.Errorf(proto.EPERM, "program %s asks more than agent %s's policy grants: %s (ox-policy show -a %[2]s; an admin may grant it with ox-policy set)", p.Name, agent, strings.Join(over, "; "))
	}
	return nil
}

// describe tells the operator what they agree to.
func describe(p *program.Program, agent, from string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "program %s %s (%s): %s\n", p.Name, p.Version, from, strings.Join(strings.Fields(p.Description), " "))
	if len(p.Command) > 0 {
		fmt.Fprintf(&b, "runs as agent %s: %s\n", agent, policy.Quote(p.Command))
	} else {
		fmt.Fprintf(&b, "runs as agent %s: an LLM run of the task %q\n", agent, oneLine(p.Task, 60))
	}
	if len(p.Needs) > 0 {
		fmt.Fprintf(&b, "needs on this host: %s\n", strings.Join(p.Needs, ", "))
	}
	if p.Schedule != "" {
		fmt.Fprintf(&b, "schedule (with ox-program run --schedule): %s\n", p.Schedule)
	}
	if p.Policy.Empty() {
		fmt.Fprintf(&b, "it asks nothing of agent %s's policy\n", agent)
	} else {
		fmt.Fprintf(&b, "it asks of agent %s's policy (which grants all of it):\n%s", agent, p.Policy.TOML())
	}
	return b.String()
}

// agree asks the operator: --yes, or y on stdin (a terminal or a pipe).
func agree(c *cli.Context, what string) error {
	if c.Bool("yes") {
		return nil
	}
	fmt.Fprintf(os.Stderr, "%s? [y/N] ", what)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(os.Stderr)
		return cliutil.Failf("no answer on stdin: nothing installed (--yes agrees without asking)")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return cliutil.Failf("not agreed: nothing installed")
}

func install(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("install takes one folder, git URL or shipped program name")
	}
	p, files, src, err := source(c.Context, c.Args().First())
	if err != nil {
		return err
	}
	agent, err := agentFor(c, p)
	if err != nil {
		return err
	}
	st, done, err := connect(c, agent)
	if err != nil {
		return err
	}
	defer done()
	if _, _, err := program.Get(c.Context, st, p.Name); err == nil {
		return proto.Errorf(proto.EEXIST, "agent %s has a program %s already (ox-program upgrade %[2]s replaces it)", agent, p.Name)
	}
	if err := permitted(c.Context, st.C, agent, p); err != nil {
		return err
	}
	fmt.Fprint(os.Stderr, describe(p, agent, src.From))
	if err := agree(c, fmt.Sprintf("install %s for agent %s", p.Name, agent)); err != nil {
		return err
	}
	if err := program.Install(c.Context, st, p, files, src, false); err != nil {
		return fmt.Errorf("program %s: %w", p.Name, err)
	}
	rec := recordOf(agent, p)
	rec.Source, rec.Commit = src.From, src.Commit
	for _, f := range files {
		rec.Files = append(rec.Files, f.Path)
		rec.Size += int64(len(f.Data))
	}
	rec.Text = fmt.Sprintf("installed %s %s for agent %s", p.Name, p.Version, agent)
	pr := cliutil.NewPrinter(c, "NAME", "VERSION", "AGENT", "SOURCE")
	pr.Print(rec, rec.Name, rec.Version, agent, rec.Source)
	return pr.Flush()
}

func ls(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("ls takes no arguments")
	}
	pr := cliutil.NewPrinter(c, "NAME", "VERSION", "ENTRY", "DESCRIPTION")
	if c.Bool("shared") {
		ents, _ := fs.ReadDir(sharedFS(), ".")
		for _, e := range ents {
			p, files, err := program.Load(sharedFS(), e.Name())
			if err != nil {
				return cliutil.Failf("shipped program %s: %v", e.Name(), err)
			}
			rec := recordOf("", p)
			rec.Source = "shared"
			for _, f := range files {
				rec.Files = append(rec.Files, f.Path)
				rec.Size += int64(len(f.Data))
			}
			pr.Print(rec, rec.Name, rec.Version, rec.Entry, oneLine(rec.Description, 60))
		}
		return pr.Flush()
	}
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	st, done, err := connect(c, agent)
	if err != nil {
		return err
	}
	defer done()
	list, err := program.List(c.Context, st)
	if err != nil {
		return err
	}
	for _, in := range list {
		rec := record{Type: "program", Agent: agent, Name: in.Name}
		if in.Program != nil {
			rec = recordOf(agent, in.Program)
		}
		rec.Source, rec.Commit, rec.Files, rec.Size = in.Source.From, in.Source.Commit, in.Files, in.Size
		if in.Err != nil {
			rec.Error, rec.Text = in.Err.Error(), in.Err.Error()
		}
		pr.Print(rec, rec.Name, rec.Version, rec.Entry, oneLine(rec.Text, 60))
	}
	return pr.Flush()
}

func show(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("show takes one program NAME")
	}
	name := c.Args().First()
	if err := program.CheckName(name); err != nil {
		return cliutil.Usagef("%v", err)
	}
	var manifest, skillMD []byte
	var rec record
	if c.Bool("shared") {
		p, files, err := program.Load(sharedFS(), name)
		if err != nil {
			return proto.Errorf(proto.ENOENT, "no shipped program %s (ox-program ls --shared lists them)", name)
		}
		rec, rec.Source = recordOf("", p), "shared"
		for _, f := range files {
			switch f.Path {
			case program.Manifest:
				manifest = f.Data
			case skill.File:
				skillMD = f.Data
			}
		}
	} else {
		agent, err := cliutil.Agent(c)
		if err != nil {
			return err
		}
		st, done, err := connect(c, agent)
		if err != nil {
			return err
		}
		defer done()
		p, src, err := program.Get(c.Context, st, name)
		if err != nil {
			return err
		}
		rec = recordOf(agent, p)
		rec.Source, rec.Commit = src.From, src.Commit
		manifest, _ = st.Load(c.Context, program.Key(name, program.Manifest))
		skillMD, _ = st.Load(c.Context, program.Key(name, skill.File))
	}
	if c.Bool("json") || !cliutil.IsTerminal(os.Stdout) {
		if sk, err := skill.Parse(skillMD); err == nil {
			rec.Text = sk.Body
		}
		pr := cliutil.NewPrinter(c)
		pr.Print(rec)
		return pr.Flush()
	}
	fmt.Printf("%s\n%s", manifest, skillMD)
	return nil
}

// jobName is the name of the job that runs program name of agent on its
// schedule.
func jobName(agent, name string) string { return agent + "." + name }

func run(c *cli.Context) error {
	if c.NArg() == 0 {
		return cliutil.Usagef("run takes a program NAME, then its arguments")
	}
	name, words := c.Args().First(), c.Args().Slice()[1:]
	if err := program.CheckName(name); err != nil {
		return cliutil.Usagef("%v", err)
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	agent := c.String("agent")
	if agent == "" {
		return cliutil.Usagef("no agent: give -a AGENT (the agent the program is installed in) or set OXIOS_AGENT")
	}
	st := store{C: cl, Agent: agent}
	p, _, err := program.Get(c.Context, st, name)
	if err != nil {
		return err
	}
	if err := permitted(c.Context, cl, agent, p); err != nil {
		return err
	}
	vals, rest, err := p.Bind(words)
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	a := proto.SpawnArgs{Agent: agent, Model: c.String("model")}
	if w := c.String("work"); w != "" {
		if a.Work, err = filepath.Abs(w); err != nil {
			return cliutil.Usagef("--work %s: %v", w, err)
		}
		// The run sees the folder at /work; a program that starts runs
		// of its own on it (ouroboros) names it by its host path.
		a.Env = append(a.Env, "PROGRAM_WORK="+a.Work)
	}
	if len(p.Command) > 0 {
		if a.Model != "" {
			return cliutil.Usagef("--model is for LLM programs; %s runs a command", name)
		}
		a.Command = append([]string{"ox-program", "start", name}, words...)
	} else {
		a.Task = p.TaskText(vals, rest)
		sys, _ := st.Load(c.Context, program.Key(name, skill.File))
		if sk, err := skill.Parse(sys); err == nil {
			a.LLM = &proto.LLMArgs{System: sk.Body}
		}
	}
	if c.Bool("schedule") {
		return schedule(c, cl, p, a)
	}
	// A program that asks (terminal = true), run from a terminal: its
	// stdin is what the operator types, passed on line by line.
	tty := p.Terminal && len(p.Command) > 0 && !c.Bool("no-stdin") && !c.Bool("detach") && cliutil.IsTerminal(os.Stdin)
	if tty {
		a.OpenStdin = true
		a.Env = append(a.Env, "PROGRAM_TTY=1")
	} else if !c.Bool("no-stdin") {
		if a.Input, err = cliutil.ReadInput(cl.Hello().MaxValue); err != nil {
			return err
		}
	}
	if c.Bool("detach") {
		rec, err := cl.Spawn(c.Context, a)
		if err != nil {
			return err
		}
		pr := cliutil.NewPrinter(c, "RUN", "AGENT", "PID", "STATE")
		pr.Print(rec, rec.ID, rec.Agent, fmt.Sprint(rec.PID), rec.State)
		return pr.Flush()
	}
	return attach(c, cl, a, tty)
}

// schedule adds the job of a command program (replacing one there is).
func schedule(c *cli.Context, cl *client.Client, p *program.Program, a proto.SpawnArgs) error {
	cron := c.String("cron")
	if cron == "" {
		cron = p.Schedule
	}
	if cron == "" {
		return cliutil.Usagef("program %s has no schedule: give --cron EXPR", p.Name)
	}
	if len(a.Command) == 0 {
		return cliutil.Usagef("--schedule is for command programs; schedule an LLM task with ox-schedule add")
	}
	if a.Work != "" {
		return cliutil.Usagef("--schedule with --work: a job has no work folder")
	}
	job := jobName(a.Agent, p.Name)
	if _, err := cl.ScheduleRm(c.Context, proto.ScheduleArgs{Name: job, Agent: a.Agent}); err != nil && !isCode(err, proto.ENOENT) {
		return err
	}
	rec, err := cl.ScheduleAdd(c.Context, proto.ScheduleAddArgs{Agent: a.Agent, Name: job, Schedule: cron, Command: a.Command})
	if err != nil {
		return err
	}
	pr := cliutil.NewPrinter(c, "JOB", "AGENT", "SCHEDULE", "NEXT")
	next := ""
	if rec.Next != nil {
		next = rec.Next.Format(time.RFC3339)
	}
	pr.Print(rec, rec.Name, rec.Agent, rec.Schedule, next)
	return pr.Flush()
}

// attach runs a and streams its records as ox-spawn does, signals going
// to the run, and exits with its status; with tty, the lines typed on
// stdin go to the run's stdin (run.stdin), and its end closes it.
func attach(c *cli.Context, cl *client.Client, a proto.SpawnArgs, tty bool) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	out := cliutil.NewRunStream(c.Bool("json"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var id atomic.Value
	go func() {
		for sig := range sigs {
			run, _ := id.Load().(string)
			if run == "" {
				continue
			}
			name := map[os.Signal]string{os.Interrupt: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP"}[sig]
			if err := cl.Kill(ctx, proto.KillArgs{Runs: []string{run}, Signal: name}, func(proto.RunRecord) error { return nil }); err != nil {
				fmt.Fprintf(os.Stderr, "ox-program: forwarding SIG%s: %v\n", name, err)
			}
		}
	}()
	err := cl.SpawnAttach(ctx, a, func(rec json.RawMessage) error {
		err := out.Record(rec)
		if out.Run != "" && id.Load() == nil {
			id.Store(out.Run)
			if tty {
				go typed(ctx, cl, out.Run)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	return out.ExitCode()
}

// typed passes what the operator types to run's stdin, a line at a time,
// until the end of the terminal's input (Ctrl-D), which closes it. Once
// the run has ended its stdin is gone (ESRCH): nothing more is sent.
func typed(ctx context.Context, cl *client.Client, run string) {
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			if _, serr := cl.Stdin(ctx, run, line, false); serr != nil {
				return
			}
		}
		if err != nil {
			cl.Stdin(ctx, run, nil, true)
			return
		}
	}
}

func upgrade(c *cli.Context) error {
	if c.NArg() == 0 {
		return cliutil.Usagef("upgrade takes one or more program NAMEs")
	}
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	st, done, err := connect(c, agent)
	if err != nil {
		return err
	}
	defer done()
	pr := cliutil.NewPrinter(c, "NAME", "VERSION", "AGENT", "STATUS")
	defer pr.Flush()
	for _, name := range c.Args().Slice() {
		old, src, err := program.Get(c.Context, st, name)
		if err != nil {
			return err
		}
		if src.From == "" {
			return cliutil.Failf("program %s has no record of where it came from: install it again (ox-program rm, then install)", name)
		}
		from := src.From
		if from == "shared" {
			from = name
		}
		p, files, nsrc, err := source(c.Context, from)
		if err != nil {
			return err
		}
		if p.Name != name {
			return cliutil.Failf("%s now holds program %s, not %s: nothing changed", src.From, p.Name, name)
		}
		rec := recordOf(agent, p)
		rec.Source, rec.Commit = nsrc.From, nsrc.Commit
		if program.Digest(files) == src.Digest {
			rec.Text = fmt.Sprintf("%s %s is up to date", name, p.Version)
			pr.Print(rec, name, p.Version, agent, "up to date")
			continue
		}
		if err := permitted(c.Context, st.C, agent, p); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "upgrading %s from %s to %s\n", name, old.Version, p.Version)
		if p.Policy.TOML() != old.Policy.TOML() {
			fmt.Fprintf(os.Stderr, "the policy it asks changed; before:\n%s", orNothing(old.Policy.TOML()))
		}
		fmt.Fprint(os.Stderr, describe(p, agent, nsrc.From))
		// Agreeing again is needed when it asks for something new.
		if p.Policy.TOML() != old.Policy.TOML() {
			if err := agree(c, fmt.Sprintf("upgrade %s for agent %s", name, agent)); err != nil {
				return err
			}
		}
		if err := program.Install(c.Context, st, p, files, nsrc, true); err != nil {
			return fmt.Errorf("program %s: %w", name, err)
		}
		rec.Text = fmt.Sprintf("upgraded %s from %s to %s", name, old.Version, p.Version)
		pr.Print(rec, name, p.Version, agent, "upgraded from "+old.Version)
	}
	return nil
}

func orNothing(s string) string {
	if s == "" {
		return "(nothing)\n"
	}
	return s
}

func rm(c *cli.Context) error {
	if c.NArg() == 0 {
		return cliutil.Usagef("rm takes one or more program NAMEs")
	}
	for _, n := range c.Args().Slice() {
		if err := program.CheckName(n); err != nil {
			return cliutil.Usagef("%v", err)
		}
	}
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	st, done, err := connect(c, agent)
	if err != nil {
		return err
	}
	defer done()
	pr := cliutil.NewPrinter(c, "NAME", "FILES", "STATUS")
	defer pr.Flush()
	var first error
	for _, n := range c.Args().Slice() {
		count, err := program.Remove(c.Context, st, n)
		if err == nil {
			// Its job goes with it.
			_, err = st.C.ScheduleRm(c.Context, proto.ScheduleArgs{Name: jobName(agent, n), Agent: agent})
			if isCode(err, proto.ENOENT) {
				err = nil
			}
		}
		if err != nil {
			pr.Flush()
			fmt.Fprintf(os.Stderr, "ox-program: %v\n", err)
			if first == nil || cliutil.Code(err) > cliutil.Code(first) {
				first = err
			}
			continue
		}
		rec := record{Type: "program", Agent: agent, Name: n, Deleted: true, Text: fmt.Sprintf("removed %s (%d files)", n, count)}
		pr.Print(rec, n, fmt.Sprint(count), "removed")
	}
	if first != nil {
		return cliutil.Silent(cliutil.Code(first))
	}
	return nil
}

// start runs inside a run of the agent (ox-program run spawns it): it
// reads the program from the agent's state, checks its policy against the
// agent's again (a job, a fork or a changed policy may run it long after
// its install), puts its files in a folder of the run's own, and runs its
// entry there with its arguments in the environment.
func start(c *cli.Context) error {
	args := c.Args().Slice()
	if len(args) == 0 {
		return cliutil.Usagef("start takes a program NAME")
	}
	if os.Getenv("OXIOS_RUN") == "" {
		return cliutil.Usagef("start runs inside a run of the agent: use ox-program run")
	}
	agent := os.Getenv("OXIOS_AGENT")
	name := args[0]
	if err := program.CheckName(name); err != nil {
		return cliutil.Usagef("%v", err)
	}
	cl, err := client.Dial(c.Context, os.Getenv("OXIOS_SOCKET"))
	if err != nil {
		return err
	}
	st := store{C: cl, Agent: agent}
	p, _, err := program.Get(c.Context, st, name)
	if err != nil {
		cl.Close()
		return err
	}
	if err := permitted(c.Context, cl, agent, p); err != nil {
		cl.Close()
		return err
	}
	files, err := program.Files(c.Context, st, name)
	cl.Close()
	if err != nil {
		return err
	}
	if len(p.Command) == 0 {
		return cliutil.Failf("program %s is an LLM task: ox-program run starts it", name)
	}
	vals, rest, err := p.Bind(args[1:])
	if err != nil {
		return cliutil.Usagef("%v", err)
	}
	dir, err := os.MkdirTemp("", "oxios-program-"+name+"-")
	if err != nil {
		return cliutil.Failf("a folder for the program: %v", err)
	}
	defer os.RemoveAll(dir)
	for _, f := range files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return cliutil.Failf("%v", err)
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(string(f.Data), "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(dst, f.Data, mode); err != nil {
			return cliutil.Failf("%v", err)
		}
	}
	path := dir + string(os.PathListSeparator) + os.Getenv("PATH")
	for _, need := range p.Needs {
		if _, err := lookIn(path, need); err != nil {
			return cliutil.Failf("program %s needs %s, which its run does not find (in PATH: %s)", name, need, path)
		}
	}
	prog, err := lookIn(path, p.Command[0])
	if err != nil {
		return cliutil.Failf("program %s: its entry %s: %v", name, p.Command[0], err)
	}
	cmd := exec.Command(prog, append(append([]string{}, p.Command[1:]...), rest...)...)
	cmd.Args[0] = p.Command[0]
	env := []string{"PATH=" + path, "PROGRAM_NAME=" + name, "PROGRAM_VERSION=" + p.Version, "PROGRAM_DIR=" + dir}
	for k, v := range vals {
		env = append(env, program.Env(k)+"="+v)
	}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "PATH=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return cliutil.Failf("program %s: %v", name, err)
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return cliutil.Silent(128 + int(ws.Signal()))
		}
		return cliutil.Silent(ee.ExitCode())
	}
	return err
}

// lookIn finds prog as exec would in the PATH path.
func lookIn(path, prog string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found", prog)
}

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max-1] + "…"
	}
	return s
}
