// Command ox-spawn starts a run of an agent: a command, or the LLM runner
// with a task, supervised by oxiosd. See ox-spawn(1).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-spawn", "start a run of an agent: a command, or an LLM agent with a task")
	app.Version = version
	app.ArgsUsage = "[TASK...] | -- COMMAND [ARG...]"
	app.Description = "With -- COMMAND, runs the command as a run of the agent; otherwise runs the LLM runner ox-agent with TASK. The agent is created, with the default policy, if it does not exist. Attaches by default: prints the run's records as they come (JSON lines, or text on a terminal) and exits with the run's status (128+N if a signal N killed it); Ctrl-C sends SIGINT to the run. With -d prints the run record and returns. Beyond the limits of [runs] in oxios.toml the run waits in oxiosd's queue (state queued), higher --priority first. A pipe or file on stdin is the run's input (records from ox-recall become an LLM run's context). With -i the run is a chat: stdin holds its messages, one a line, each answered in one conversation until exit or the end of stdin."
	app.Flags = cliutil.ClientFlags(
		&cli.BoolFlag{Name: "detach", Aliases: []string{"d"}, Usage: "print the run record and return; the run goes on"},
		&cli.StringFlag{Name: "work", Aliases: []string{"w"}, TakesFile: true, Usage: "work on host folder `DIR` at /work through an overlay: the folder does not change, the run's changes wait for ox-work apply (the policy's [work] allow names the folders)"},
		&cli.StringFlag{Name: "node", Usage: "run on fleet node `NAME`, or on 'any' node with room (its own admission decides); records come back with their node"},
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the model of an LLM run (default: the [llm] model of oxios.toml)"},
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "add `NAME=VALUE` to the run's environment (repeatable)"},
		&cli.BoolFlag{Name: "no-stdin", Aliases: []string{"n"}, Usage: "do not read stdin (for scripts whose stdin never ends)"},
		&cli.IntFlag{Name: "priority", Aliases: []string{"p"}, Usage: "the run's place when it waits for admission: higher `P` first (default 0)"},
		&cli.StringFlag{Name: "system", Aliases: []string{"s"}, Usage: "an LLM run's system prompt `TEXT`, after the built-in one (replaces the persona's)"},
		&cli.StringFlag{Name: "persona", Aliases: []string{"P"}, Usage: "an LLM run's persona `NAME` (shipped, or the agent's own: see ox-agent(1))"},
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "chat: one LLM run answers message after message in one conversation, each a line of stdin (on a terminal, after a > prompt; !multi ... !end for several lines; exit, quit or Ctrl-D ends it); TASK, if given, is the first"},
		&cli.BoolFlag{Name: "continue", Aliases: []string{"c"}, Usage: "continue the agent's latest conversation"},
		&cli.StringFlag{Name: "conversation", Usage: "continue the conversation of run `ID`"},
		&cli.Float64Flag{Name: "temperature", Aliases: []string{"t"}, Usage: "an LLM run's sampling temperature `T` (0 to 2)"},
		&cli.IntFlag{Name: "max-tokens", Usage: "cap each answer of an LLM run at `N` tokens"},
		&cli.BoolFlag{Name: "no-recall", Usage: "an LLM run recalls no memories at its start"},
		&cli.BoolFlag{Name: "no-summary", Usage: "an LLM run remembers no summary at its end"},
		&cli.BoolFlag{Name: "no-memory", Usage: "--no-recall and --no-summary"},
		&cli.BoolFlag{Name: "wait-endpoint", Usage: "an LLM run whose model endpoint is down (circuit open) waits for it instead of failing at once"},
		&cli.BoolFlag{Name: "no-keep", Usage: "do not keep the LLM run's conversation in the agent's state"},
		&cli.StringFlag{Name: "schema", TakesFile: true, Usage: "an LLM run's final answer must be JSON matching the JSON Schema in `FILE`: it is asked of the endpoint, checked, and printed as a result record (exit 1 if it does not match)"},
		&cli.StringSliceFlag{Name: "fragment", Aliases: []string{"f"}, TakesFile: true, Usage: "add the text of `FILE` (or an http(s) URL, fetched by the run under its agent's [net] policy) to an LLM run's prompt (repeatable)"},
		&cli.StringSliceFlag{Name: "var", Usage: "fill {{NAME}} in the persona's prompt with VALUE: `NAME=VALUE` (repeatable)"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "on a terminal, show only the answers and the output"},
		&cli.BoolFlag{Name: "verbose", Usage: "on a terminal, show system prompts and recalled memories too; off one, the delta records too"},
	)
	app.Action = spawn
	cliutil.Run(app)
}

// dashdash reports whether the command line has "--" before its
// arguments: urfave/cli drops it, and it is what makes them a command.
func dashdash() bool {
	for _, a := range os.Args[1:] {
		if a == "--" {
			return true
		}
	}
	return false
}

func spawn(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	a := proto.SpawnArgs{Agent: agent, Model: c.String("model"), Env: c.StringSlice("env"), Priority: c.Int("priority")}
	if w := c.String("work"); w != "" {
		// The daemon resolves links and checks the folder: a relative
		// path means this command's folder, which it does not know.
		if a.Work, err = filepath.Abs(w); err != nil {
			return cliutil.Usagef("--work %s: %v", w, err)
		}
	}
	args := c.Args().Slice()
	chat := c.Bool("interactive")
	if chat {
		for _, f := range []string{"detach", "node", "no-stdin", "schema"} {
			if c.IsSet(f) {
				return cliutil.Usagef("--%s is not for a chat (-i)", f)
			}
		}
	}
	if dashdash() {
		if len(args) == 0 {
			return cliutil.Usagef("no command after --")
		}
		a.Command = args
		if a.Model != "" {
			return cliutil.Usagef("--model is for LLM runs, not commands")
		}
		for _, f := range llmFlags {
			if c.IsSet(f) {
				return cliutil.Usagef("--%s is for LLM runs, not commands", f)
			}
		}
	} else {
		o, err := llmArgs(c)
		if err != nil {
			return err
		}
		a.LLM = o
		for i, w := range args {
			if i > 0 {
				a.Task += " "
			}
			a.Task += w
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	if !c.Bool("no-stdin") && !chat {
		if a.Input, err = cliutil.ReadInput(cl.Hello().MaxValue); err != nil {
			return err
		}
	}
	if a.Task == "" && len(a.Command) == 0 && !chat {
		return cliutil.Usagef("give a TASK for an LLM run, or -- COMMAND")
	}
	node := c.String("node")
	if node != "" {
		return spawnOn(c, cl, node, a)
	}
	if c.Bool("detach") {
		rec, err := cl.Spawn(c.Context, a)
		if err != nil {
			return err
		}
		p := cliutil.NewPrinter(c, "RUN", "AGENT", "PID", "STATE")
		p.Print(rec, rec.ID, rec.Agent, fmt.Sprint(rec.PID), rec.State)
		return p.Flush()
	}
	// The run, not this command, decides when it ends: signals go to it
	// and the stream goes on until its exit record.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	out := cliutil.NewRunStream(c.Bool("json"))
	out.Quiet, out.Verbose, out.Chat = c.Bool("quiet"), c.Bool("verbose"), chat
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chatting *chatter
	if chat {
		chatting = newChatter(cl)
		go chatting.feed(ctx)
	}
	var run atomic.Value // the run's id, once its record came
	go func() {
		for sig := range sigs {
			id, _ := run.Load().(string)
			if id == "" {
				continue
			}
			name := map[os.Signal]string{os.Interrupt: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP"}[sig]
			if err := cl.Kill(ctx, proto.KillArgs{Runs: []string{id}, Signal: name}, func(proto.RunRecord) error { return nil }); err != nil {
				fmt.Fprintf(os.Stderr, "ox-spawn: forwarding SIG%s: %v\n", name, err)
			}
		}
	}()
	err = cl.SpawnAttach(ctx, a, func(rec json.RawMessage) error {
		err := out.Record(rec)
		if out.Run != "" && run.Load() == nil {
			run.Store(out.Run)
		}
		if chatting != nil {
			chatting.record(out.Run, rec)
		}
		return err
	})
	if err != nil {
		return err
	}
	return out.ExitCode()
}

// spawnOn runs a on fleet node node: the daemon carries the spawn there
// and the run's records back, so the exit status is the run's as if it
// were local. A node lost mid-run is an error that says so (exit 1).
func spawnOn(c *cli.Context, cl *client.Client, node string, a proto.SpawnArgs) error {
	if c.Bool("detach") {
		a.Attach = false
		res, err := cl.FleetCall(c.Context, node, proto.OpRunSpawn, a, func(json.RawMessage) error { return nil })
		if err != nil {
			return err
		}
		var rec proto.RunRecord
		if err := json.Unmarshal(res, &rec); err != nil {
			return cliutil.Failf("the run record from node %s does not decode: %v", node, err)
		}
		p := cliutil.NewPrinter(c, "RUN", "NODE", "AGENT", "PID", "STATE")
		p.Print(rec, rec.ID, rec.Node, rec.Agent, fmt.Sprint(rec.PID), rec.State)
		return p.Flush()
	}
	a.Attach = true
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	out := cliutil.NewRunStream(c.Bool("json"))
	out.Quiet, out.Verbose = c.Bool("quiet"), c.Bool("verbose")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var where atomic.Value // the run's node and id, once its record came
	go func() {
		for sig := range sigs {
			w, _ := where.Load().([2]string)
			if w[1] == "" {
				continue
			}
			name := map[os.Signal]string{os.Interrupt: "INT", syscall.SIGTERM: "TERM", syscall.SIGHUP: "HUP"}[sig]
			_, err := cl.FleetCall(ctx, w[0], proto.OpRunKill, proto.KillArgs{Runs: []string{w[1]}, Signal: name}, func(json.RawMessage) error { return nil })
			if err != nil {
				fmt.Fprintf(os.Stderr, "ox-spawn: forwarding SIG%s to node %s: %v\n", name, w[0], err)
			}
		}
	}()
	_, err := cl.FleetCall(ctx, node, proto.OpRunSpawn, a, func(rec json.RawMessage) error {
		err := out.Record(rec)
		if out.Run != "" && where.Load() == nil {
			var r struct{ Node string }
			json.Unmarshal(rec, &r)
			where.Store([2]string{r.Node, out.Run})
		}
		return err
	})
	if err != nil {
		return err
	}
	return out.ExitCode()
}

// llmFlags are the options of LLM runs only.
var llmFlags = []string{"interactive", "system", "persona", "continue", "conversation", "temperature", "max-tokens", "no-recall", "no-summary", "no-memory", "no-keep", "wait-endpoint", "schema", "fragment", "var"}

// llmArgs are an LLM run's options, or nil when none is given.
func llmArgs(c *cli.Context) (*proto.LLMArgs, error) {
	o := &proto.LLMArgs{
		System: c.String("system"), Persona: c.String("persona"),
		Continue: c.Bool("continue"), Conversation: c.String("conversation"), MaxTokens: c.Int("max-tokens"),
		NoRecall: c.Bool("no-recall") || c.Bool("no-memory"), NoSummary: c.Bool("no-summary") || c.Bool("no-memory"), NoKeep: c.Bool("no-keep"),
		WaitEndpoint: c.Bool("wait-endpoint"), Chat: c.Bool("interactive"),
	}
	if o.Continue && o.Conversation != "" {
		return nil, cliutil.Usagef("--continue continues the latest conversation, --conversation a named one: give one")
	}
	if c.IsSet("temperature") {
		t := c.Float64("temperature")
		if t < 0 || t > 2 {
			return nil, cliutil.Usagef("--temperature %v: want 0 to 2", t)
		}
		o.Temperature = &t
	}
	if o.MaxTokens < 0 {
		return nil, cliutil.Usagef("--max-tokens %d: want 0 (no cap) or more", o.MaxTokens)
	}
	if f := c.String("schema"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, cliutil.Usagef("--schema: %v", err)
		}
		if _, err := llm.ParseSchema(b); err != nil {
			return nil, cliutil.Usagef("--schema %s: %v", f, err)
		}
		o.Schema = json.RawMessage(b)
	}
	for _, f := range c.StringSlice("fragment") {
		if strings.HasPrefix(f, "http://") || strings.HasPrefix(f, "https://") {
			o.Fragments = append(o.Fragments, proto.Fragment{Name: f, URL: true})
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, cliutil.Usagef("--fragment: %v", err)
		}
		if !utf8.Valid(b) {
			return nil, cliutil.Usagef("--fragment %s: not UTF-8 text", f)
		}
		o.Fragments = append(o.Fragments, proto.Fragment{Name: f, Text: string(b)})
	}
	for _, v := range c.StringSlice("var") {
		name, value, ok := strings.Cut(v, "=")
		if !ok || !proto.VarName(name) {
			return nil, cliutil.Usagef("--var %q: want NAME=VALUE, NAME of letters, digits and _", v)
		}
		if o.Vars == nil {
			o.Vars = map[string]string{}
		}
		o.Vars[name] = value
	}
	if reflect.ValueOf(*o).IsZero() {
		return nil, nil // no option of an LLM run given
	}
	return o, nil
}
