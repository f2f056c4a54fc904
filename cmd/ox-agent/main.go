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
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/llm"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-agent", "the LLM runner: think through a model endpoint, act through kernel syscalls")
	app.Version = version
	app.ArgsUsage = "[--] TASK..."
	app.Description = "Runs TASK for an agent: the model at the endpoint is given the task, the context read from stdin (JSON lines records or text) and the memories the task recalls, and may call the tools state_read, state_write, state_list, remember, recall, exec and finish, each a syscall of oxiosd checked against the agent's policy. The budget is reserved before each model call and charged with the usage the endpoint reports. Failed model calls are retried with backoff behind a circuit breaker. At the end an episodic summary is remembered. Prints the conversation as JSON lines records (message, tool_call, tool_result, usage, endpoint, error). oxiosd runs it for `ox-spawn -a AGENT TASK` with the environment variables named beside the options set; it can also be run by hand."
	app.Flags = []cli.Flag{
		cliutil.SocketFlag,
		cliutil.AgentFlag,
		cliutil.JSONFlag,
		&cli.StringFlag{Name: "url", Usage: "the endpoint's base `URL` (.../v1)", EnvVars: []string{"OXIOS_LLM_URL"}},
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "the `MODEL` to ask", EnvVars: []string{"OXIOS_LLM_MODEL"}, Value: "gpt-4o-mini"},
		&cli.StringFlag{Name: "run", Usage: "the run `ID` (set by oxiosd)", EnvVars: []string{"OXIOS_RUN"}},
		&cli.IntFlag{Name: "max-turns", Usage: "end the run as failed after `N` model calls", Value: 50},
		&cli.DurationFlag{Name: "timeout", Usage: "give up on one model call after `D`", EnvVars: []string{"OXIOS_LLM_TIMEOUT"}, Value: 2 * time.Minute},
		&cli.IntFlag{Name: "retries", Usage: "try a failed model call `N` more times", EnvVars: []string{"OXIOS_LLM_RETRIES"}, Value: 4},
	}
	app.Action = run
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
	task := ""
	for i, a := range c.Args().Slice() {
		if i > 0 {
			task += " "
		}
		task += a
	}
	if task == "" {
		return cliutil.Usagef("give a TASK")
	}
	url := c.String("url")
	if url == "" {
		return cliutil.Usagef("no model endpoint: set OXIOS_LLM_URL or --url (oxiosd sets it from base_url in the [llm] section of oxios.toml)")
	}
	name, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	input, err := readContext()
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := cliutil.NewRunStream(c.Bool("json"))
	emit := func(rec any) { out.Record(agent.Marshal(rec)) }
	key := os.Getenv("OXIOS_LLM_KEY")
	if key == "" {
		key = os.Getenv("OPENAI_API_KEY")
	}
	cfg := llm.DefaultConfig(url, key, c.String("model"))
	cfg.Timeout, cfg.Retries = c.Duration("timeout"), c.Int("retries")
	var r *agent.Runner
	cfg.Observe = func(e llm.Event) { r.Endpoint(e) }
	r = agent.New(agent.Config{
		Agent: name, Run: c.String("run"), Model: c.String("model"), Task: task,
		Context: agent.FormatContext(input), MaxTurns: c.Int("max-turns"), Emit: emit,
	}, &agent.Client{C: cl, Agent: name}, llm.New(cfg))
	if _, err := r.Run(c.Context); err != nil {
		r.Failed(err)
		return cliutil.Silent(cliutil.ExitFailure)
	}
	return nil
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
