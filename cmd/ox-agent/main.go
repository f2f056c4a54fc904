// Command ox-agent is the LLM runner: oxiosd starts it for `ox-spawn -a
// AGENT TASK`, and it thinks through an OpenAI-compatible endpoint and
// acts only through kernel syscalls. See ox-agent(1).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-agent", "the LLM runner: think through a model endpoint, act through kernel syscalls")
	app.Version = version
	app.ArgsUsage = "[-i] [--] TASK... | logs [-q WORDS]"
	app.Description = "Runs TASK for an agent: the model at the endpoint is given the task, the context read from stdin (JSON lines records or text) and the memories the task recalls, and may call the tools state_read, state_write, state_list, remember, recall, exec and finish, each a syscall of oxiosd checked against the agent's policy. The budget is reserved before each model call and charged with the usage the endpoint reports. Failed model calls are retried with backoff behind a circuit breaker. At the end an episodic summary is remembered. Prints the conversation as JSON lines records (message, tool_call, tool_result, usage, endpoint, turn, error). With -i the run is a chat: after each answer it reads the next message from stdin (a line, or a JSON message record) until exit, quit or the end of stdin. `ox-agent logs` prints the prompts and answers of the agent's kept conversations, the newest first; -q WORDS only those holding every word. oxiosd runs it for `ox-spawn -a AGENT TASK` with the environment variables named beside the options set; it can also be run by hand."
	app.Flags = []cli.Flag{
		cliutil.SocketFlag,
		cliutil.AgentFlag,
		cliutil.JSONFlag,
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the `MODEL` to ask", EnvVars: []string{"OXIOS_LLM_MODEL"}, Value: "gpt-4o-mini"},
		&cli.StringFlag{Name: "run", Usage: "the run `ID` (set by oxiosd; by hand: one made of the time)", EnvVars: []string{"OXIOS_RUN"}},
		&cli.StringFlag{Name: "system", Aliases: []string{"s"}, Usage: "a system prompt `TEXT` for the run, after the built-in one (replaces the persona's)"},
		&cli.StringFlag{Name: "persona", Aliases: []string{"P"}, Usage: "the persona `NAME`: the agent's own (state key personas/NAME) or a shipped one", EnvVars: []string{"OXIOS_LLM_PERSONA"}},
		&cli.BoolFlag{Name: "personas", Usage: "list the personas the agent may use, and exit"},
		&cli.BoolFlag{Name: "models", Usage: "list the models oxiosd offers (-m NAME) with the health of their endpoints (with -a, whether the agent's policy lets it ask for each), and exit"},
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "chat: after the answer, read the next message from stdin (a line each; exit, quit or end of file ends the chat) and answer it in the same conversation"},
		&cli.BoolFlag{Name: "continue", Aliases: []string{"c"}, Usage: "continue the agent's latest conversation"},
		&cli.StringFlag{Name: "conversation", Usage: "continue the conversation of run `ID`"},
		&cli.BoolFlag{Name: "no-keep", Usage: "do not keep the run's conversation in the agent's state"},
		&cli.BoolFlag{Name: "no-recall", Usage: "recall no memories at the start"},
		&cli.BoolFlag{Name: "no-summary", Usage: "remember no summary at the end"},
		&cli.BoolFlag{Name: "no-memory", Usage: "--no-recall and --no-summary"},
		&cli.Float64Flag{Name: "temperature", Aliases: []string{"t"}, Usage: "the sampling temperature `T` (0 to 2)", EnvVars: []string{"OXIOS_LLM_TEMPERATURE"}},
		&cli.IntFlag{Name: "max-tokens", Usage: "cap each answer at `N` tokens (budgets cap it too)", EnvVars: []string{"OXIOS_LLM_MAX_TOKENS"}},
		&cli.IntFlag{Name: "max-turns", Usage: "end the run as failed after `N` model calls", Value: 50},
		&cli.BoolFlag{Name: "wait-endpoint", Usage: "when the endpoint's circuit is open, wait for it to be tried again instead of failing at once", EnvVars: []string{"OXIOS_LLM_WAIT"}},
		&cli.StringFlag{Name: "schema", TakesFile: true, Usage: "the final answer must be JSON matching the JSON Schema in `FILE` (or given inline as JSON): asked of the endpoint, checked, and printed as a result record (exit 1 if it does not match after two more tries)"},
		&cli.StringSliceFlag{Name: "fragment", Aliases: []string{"f"}, Usage: "fetch `URL` (net.fetch, under the agent's [net] policy) and add its text to the prompt (repeatable); ox-spawn -f FILE hands a file's text in the context"},
		&cli.StringSliceFlag{Name: "var", Usage: "fill {{NAME}} in the persona's prompt with VALUE: `NAME=VALUE` (repeatable)"},
		&cli.BoolFlag{Name: "quiet", Usage: "on a terminal, show only the answers"},
		// The flags of logs, which may come before it as every
		// subcommand's may (cliutil.Args); -q is logs' query, as in
		// llm logs -q, so --quiet has no short name here.
		&cli.StringFlag{Name: "query", Aliases: []string{"q"}, Usage: "logs: only the exchanges holding every word of `WORDS`"},
		&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 10, Usage: "logs: at most `N` exchanges (0: all)"},
		&cli.BoolFlag{Name: "verbose", Usage: "on a terminal, show the system prompts and recalled memories too; off one, the delta records too"},
		&cli.StringFlag{Name: "replay", TakesFile: true, Usage: "replay the run whose records are in `FILE` (- : stdin): serve its model's answers back instead of asking a model, compare each tool call and result with the recording's, end with a replay record (exit 1 if they differ); ox-replay runs it"},
		&cli.BoolFlag{Name: "afresh", Usage: "with --replay: ask the model (-m) afresh from the recording's start instead of serving its answers, and report the first answer or tool call that differs (the model's calls are budgeted as any)"},
	}
	app.Action = run
	if !noLogs(os.Args) {
		app.Commands = cliutil.SubcommandUsage([]*cli.Command{logsCommand})
	}
	cliutil.CompleteIfAsked(app)
	// Its own signal handling: a signal ends the run with an error
	// record, then ox-agent dies of that signal so its status says so.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	ctx, cancel := context.WithCancelCause(context.Background())
	var got os.Signal
	go func() {
		got = <-sigs
		cancel(fmt.Errorf("signal %v", got))
	}()
	err := app.RunContext(ctx, cliutil.Args(app, os.Args))
	if s, ok := got.(syscall.Signal); ok && ctx.Err() != nil {
		signal.Reset(s)
		syscall.Kill(os.Getpid(), s)
		time.Sleep(time.Second)
	}
	os.Exit(cliutil.Report("ox-agent", err))
}

func run(c *cli.Context) error {
	task := strings.Join(c.Args().Slice(), " ")
	for _, f := range []string{"query", "count"} {
		if c.IsSet(f) {
			return cliutil.Usagef("--%s is an option of ox-agent logs, not of a run", f)
		}
	}
	if c.Bool("models") {
		return listModels(c)
	}
	name, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.IsSet("replay") {
		return replay(c, name)
	}
	if c.Bool("afresh") {
		return cliutil.Usagef("--afresh is for --replay")
	}
	if c.Bool("personas") {
		return listPersonas(c, name)
	}
	chat := c.Bool("interactive")
	if strings.TrimSpace(task) == "" && !chat {
		return cliutil.Usagef("give a TASK (or -i, a chat whose messages come on stdin)")
	}
	if chat && c.IsSet("schema") {
		return cliutil.Usagef("--schema is for a run with one final answer, not a chat (-i)")
	}
	if c.IsSet("temperature") && (c.Float64("temperature") < 0 || c.Float64("temperature") > 2) {
		return cliutil.Usagef("--temperature %v: want 0 to 2", c.Float64("temperature"))
	}
	if c.Int("max-tokens") < 0 {
		return cliutil.Usagef("--max-tokens %d: want 0 (no cap) or more", c.Int("max-tokens"))
	}
	if c.Bool("continue") && c.IsSet("conversation") {
		return cliutil.Usagef("--continue continues the latest conversation, --conversation a named one: give one")
	}
	var input string
	var turns *agent.TurnReader
	if chat {
		// Stdin is the messages; a context record first is the input.
		turns = agent.NewTurnReader(os.Stdin)
		if cliutil.IsTerminal(os.Stdin) {
			turns.Prompt = func(more bool) {
				if more {
					fmt.Fprint(os.Stderr, "... ")
				} else {
					fmt.Fprint(os.Stderr, "> ")
				}
			}
		} else if err := turns.ReadContext(); err != nil {
			return cliutil.Failf("stdin: %v", err)
		}
		input = turns.Context
	} else if input, err = readContext(); err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	k := &agent.Client{C: cl, Agent: name}

	run := c.String("run")
	if run == "" {
		// By hand: an id of its own, so the records and the kept
		// conversation name the run.
		run = "hand-" + time.Now().UTC().Format("20060102T150405")
	}
	cfg := agent.Config{
		Agent: name, Run: run, Model: c.String("model"), Task: task,
		Context: agent.FormatContext(input), MaxTurns: c.Int("max-turns"),
		System: c.String("system"), MaxTokens: c.Int("max-tokens"),
	}
	if c.IsSet("temperature") {
		t := float32(c.Float64("temperature"))
		cfg.Temperature = &t
	}
	persona := c.String("persona")
	if persona != "" {
		p, err := agent.LoadPersona(c.Context, k, persona)
		if err != nil {
			return err
		}
		// The persona's settings beat the config's (the environment oxiosd
		// sets), not the options of the command line.
		p.Apply(&cfg, func(flag string) bool {
			if flag == "recall" {
				return c.Bool("no-recall") || c.Bool("no-memory")
			}
			return given(flag)
		})
	}
	if vars := c.StringSlice("var"); len(vars) > 0 || persona != "" {
		m := map[string]string{}
		for _, v := range vars {
			name, value, ok := strings.Cut(v, "=")
			if !ok || !proto.VarName(name) {
				return cliutil.Usagef("--var %q: want NAME=VALUE, NAME of letters, digits and _", v)
			}
			m[name] = value
		}
		sys, err := agent.FillVars(persona, cfg.System, m)
		if err != nil {
			return err
		}
		cfg.System = sys
	}
	if f := c.String("schema"); f != "" {
		b := []byte(f)
		if !strings.HasPrefix(strings.TrimSpace(f), "{") {
			if b, err = os.ReadFile(f); err != nil {
				return cliutil.Usagef("--schema: %v", err)
			}
		}
		if cfg.Schema, err = llm.ParseSchema(b); err != nil {
			return cliutil.Usagef("--schema: %v", err)
		}
	}
	for _, u := range c.StringSlice("fragment") {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return cliutil.Usagef("--fragment %q: want an http or https URL (ox-spawn -f FILE hands a file's text in the context)", u)
		}
		cfg.Fragments = append(cfg.Fragments, u)
	}
	if c.Bool("no-recall") || c.Bool("no-memory") {
		cfg.Recall = -1
	}
	if c.Bool("no-summary") || c.Bool("no-memory") {
		cfg.NoSummary = true
	}
	if c.Bool("continue") || c.IsSet("conversation") {
		conv, err := agent.LoadConversation(c.Context, k, c.String("conversation"))
		if err != nil {
			return err
		}
		cfg.History = conv.Messages
	}

	out := cliutil.NewRunStream(c.Bool("json"))
	out.Quiet, out.Verbose = c.Bool("quiet"), c.Bool("verbose")
	// Under oxiosd every record goes to the run's log, deltas too: an
	// attached terminal shows them live.
	out.Deltas = os.Getenv("OXIOS_RUN") != ""
	cfg.Stream = !out.JSON || out.Deltas || out.Verbose
	cfg.Emit = func(rec any) { out.Record(agent.Marshal(rec)) }
	// The model is called by oxiosd (llm.chat): the endpoint and its key
	// are its, never this process's.
	var r *agent.Runner
	m := &agent.KernelModel{C: cl, Agent: name, Model: cfg.Model, Wait: c.Bool("wait-endpoint"),
		Observe: func(e proto.EndpointRecord) { r.EndpointRecord(e) }}
	if !c.IsSet("model") && !given("model") {
		m.Model = "" // the run's, else the [llm] model
	}
	keep := func() {
		if c.Bool("no-keep") || !answered(r.Messages()) {
			return
		}
		conv := &agent.Conversation{Run: run, Agent: name, Model: cfg.Model, Persona: persona, Saved: time.Now().UTC(), Messages: r.Messages()}
		// The conversation is kept even when the run failed: what was
		// paid for may be continued. A signal's context is gone; the
		// save gets a moment of its own.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if serr := agent.SaveConversation(ctx, k, conv); serr != nil {
			fmt.Fprintf(os.Stderr, "ox-agent: the conversation was not kept: %v\n", serr)
		}
		cancel()
	}
	if chat {
		// Each answer is kept before the next message is awaited: a chat
		// killed while it waits loses nothing of what was paid for.
		cfg.Next = chatNext(turns, keep)
	}
	r = agent.New(cfg, k, m)
	_, err = r.Run(c.Context)
	keep()
	if err != nil {
		r.Failed(err)
		return cliutil.Silent(exitStatus(err))
	}
	return nil
}

// chatNext is a chat's Config.Next: it keeps the conversation so far
// (keep), then reads the next message from turns. The read runs on a
// goroutine of its own, one message at a time, so that a signal ends the
// wait.
func chatNext(turns *agent.TurnReader, keep func()) func(ctx context.Context) (string, error) {
	type msg struct {
		text string
		err  error
	}
	ask := make(chan struct{})
	got := make(chan msg)
	go func() {
		for range ask {
			text, err := turns.Next()
			got <- msg{text, err}
		}
	}()
	return func(ctx context.Context) (string, error) {
		keep()
		select {
		case ask <- struct{}{}:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		select {
		case m := <-got:
			return m.text, m.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// answered reports whether the conversation holds an answer of the model:
// one that does not (the budget refused the first call) is not kept.
func answered(msgs []openai.ChatCompletionMessage) bool {
	for _, m := range msgs {
		if m.Role == openai.ChatMessageRoleAssistant {
			return true
		}
	}
	return false
}

// given reports whether option name is on the command line (not only in
// the environment, which urfave/cli's IsSet counts too).
func given(name string) bool {
	f := "--" + name
	for _, a := range os.Args[1:] {
		if a == "--" {
			break
		}
		if a == f || strings.HasPrefix(a, f+"=") || name == "model" && (a == "-m" || strings.HasPrefix(a, "-m=")) ||
			name == "temperature" && a == "-t" || name == "system" && a == "-s" {
			return true
		}
	}
	return false
}

// exitStatus is the status of a failed run: its budget ran out, its
// endpoint failed, or the task failed.
func exitStatus(err error) int {
	var f *agent.Fatal
	if errors.As(err, &f) {
		switch {
		case f.Code == proto.EDQUOT:
			return cliutil.ExitBudget
		case f.Endpoint:
			return cliutil.ExitEndpoint
		case f.Code == proto.EPERM || f.Code == proto.EACCES:
			return cliutil.ExitDenied // the kernel refused the call
		}
	}
	return cliutil.ExitFailure
}

func listPersonas(c *cli.Context, name string) error {
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	k := &agent.Client{C: cl, Agent: name}
	names, err := agent.ListPersonas(c.Context, k)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "PERSONA", "FROM", "DESCRIPTION")
	for _, n := range names {
		ps, err := agent.LoadPersona(c.Context, k, n)
		if err != nil {
			p.Print(map[string]any{"type": "persona", "name": n, "error": err.Error(), "text": err.Error()}, n, "?", err.Error())
			continue
		}
		p.Print(map[string]any{"type": "persona", "name": n, "from": ps.From, "description": ps.Description, "system": ps.System, "text": ps.Description}, n, ps.From, ps.Description)
	}
	return p.Flush()
}

// readContext reads stdin when it is a pipe or a file: oxiosd hands a
// run its input that way.
func readContext() (string, error) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 && !fi.Mode().IsRegular() {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, 4<<20))
	if err != nil && !errors.Is(err, os.ErrClosed) {
		return "", cliutil.Failf("stdin: %v", err)
	}
	return string(b), nil
}

// listModels lists the models oxiosd offers: [llm]'s, then each
// [models.NAME], with the state of its endpoint's circuit breaker.
func listModels(c *cli.Context) error {
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	d, err := cl.Status(c.Context)
	if err != nil {
		return err
	}
	// With an agent: may it ask for each ([llm] models of its policy),
	// as the kernel's dry run answers.
	agent := c.String("agent")
	header := []string{"NAME", "MODEL", "STATE", "PRICES", "ENDPOINT"}
	if agent != "" {
		if err := proto.CheckAgent(agent); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
		header = append(header, "ALLOWED")
	}
	p := cliutil.NewPrinter(c, header...)
	for _, m := range d.Models {
		prices := "-"
		if m.PromptPrice > 0 || m.CompletionPrice > 0 {
			prices = fmt.Sprintf("%g/%g", m.PromptPrice, m.CompletionPrice)
		}
		name := m.Name
		if m.Default {
			name += " (default)"
		}
		text := fmt.Sprintf("%s: %s, circuit %s", m.Name, m.Model, m.State)
		rec := map[string]any{"type": "model", "name": m.Name, "model": m.Model, "endpoint": m.Endpoint, "state": m.State,
			"prompt_price": m.PromptPrice, "completion_price": m.CompletionPrice, "default": m.Default, "text": text}
		row := []string{name, m.Model, m.State, prices, m.Endpoint}
		if agent != "" {
			chk, err := cl.PolicyCheck(c.Context, proto.PolicyCheckArgs{Agent: agent, Op: proto.OpLLMChat, Args: []string{m.Name}})
			if err != nil {
				return err
			}
			rec["agent"], rec["allowed"] = agent, chk.Allowed
			row = append(row, map[bool]string{true: "yes", false: "no (" + chk.Rule + ")"}[chk.Allowed])
			if !chk.Allowed {
				rec["text"] = text + "; " + chk.Text
			}
		}
		p.Print(rec, row...)
	}
	return p.Flush()
}

// replay runs a recorded run again (--replay): its answers served back,
// its tool calls made again as this agent, under its policy now.
func replay(c *cli.Context, name string) error {
	if c.Args().Len() > 0 {
		return cliutil.Usagef("--replay takes its task from the recording: give no TASK")
	}
	f := c.String("replay")
	var in io.Reader = os.Stdin
	if f != "-" {
		fh, err := os.Open(f)
		if err != nil {
			return cliutil.Usagef("--replay: %v", err)
		}
		defer fh.Close()
		in = fh
	}
	rec, err := agent.ReadRecording(in)
	if err != nil {
		return cliutil.Failf("--replay %s: %v", f, err)
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	run := c.String("run")
	if run == "" {
		run = "hand-" + time.Now().UTC().Format("20060102T150405")
	}
	p := &agent.Replay{Rec: rec, Of: rec.Run}
	out := cliutil.NewRunStream(c.Bool("json"))
	out.Quiet, out.Verbose = c.Bool("quiet"), c.Bool("verbose")
	turns := len(rec.Answers) + 1
	var r *agent.Runner
	if c.Bool("afresh") {
		m := &agent.KernelModel{C: cl, Agent: name, Model: c.String("model"), Wait: c.Bool("wait-endpoint"),
			Observe: func(e proto.EndpointRecord) { r.EndpointRecord(e) }}
		if !c.IsSet("model") && !given("model") {
			m.Model = "" // the [llm] model
		}
		p.Ask, turns = m, max(turns, c.Int("max-turns"))
	}
	cfg := agent.Config{Agent: name, Run: run, Task: rec.Task, Start: rec.Opening, Recall: -1, NoSummary: true,
		MaxTurns: turns,
		Emit: func(r any) {
			p.Observe(r)
			out.Record(agent.Marshal(r))
		}}
	r = agent.New(cfg, &agent.Client{C: cl, Agent: name}, p)
	_, err = r.Run(c.Context)
	if err != nil && c.Context.Err() != nil {
		r.Failed(err)
		return cliutil.Silent(exitStatus(err))
	}
	if err != nil {
		r.Failed(err)
	}
	end := p.End(err)
	end.Run, end.Agent, end.Time = run, name, time.Now().UTC()
	out.Record(agent.Marshal(end))
	if !end.Matched {
		return cliutil.Silent(cliutil.ExitFailure)
	}
	return nil
}
