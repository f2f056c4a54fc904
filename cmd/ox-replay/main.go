// Command ox-replay runs an LLM run again with the model's recorded
// answers served back, in a fork of its agent, and reports where today's
// code, policy or state makes it differ. See ox-replay(1).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-replay", "run an LLM run again with its recorded answers, and report where it diverges")
	app.Version = version
	app.ArgsUsage = "RUN"
	app.Description = "Reads the records of RUN (run.attach), forks its agent (agent.fork), and runs `ox-agent --replay` as a run of the fork: the model's answers are served back from the records in their order, so no model is asked and no budget is spent, and each tool call is made again, sandboxed, under the fork's policy (the agent's, now). Each tool call and result is compared with the recorded one; the first that differs, or an end that differs, is reported. The fork is removed afterwards (--keep keeps it), so the agent's real state is left as it was unless --apply replays on the agent itself. Exits 0 if the replay matched, 1 if it diverged."
	app.Flags = cliutil.ClientFlags(
		&cli.StringFlag{Name: "as", Usage: "name the fork `NAME` (default: AGENT-replay-RUN)"},
		&cli.StringFlag{Name: "rev", Usage: "fork the agent as it was at commit `REV` (ox-commit log lists them; default: as it is now)"},
		&cli.BoolFlag{Name: "keep", Usage: "keep the fork after the replay (to look at its state: ox-state ls -a NAME)"},
		&cli.BoolFlag{Name: "apply", Usage: "replay on the agent itself, not on a fork: its tool calls change the agent's real state"},
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "ask model `NAME` afresh from the run's start instead of serving the recorded answers, and report the first answer or tool call that differs (spends the fork's budget)"},
		&cli.BoolFlag{Name: "verbose", Aliases: []string{"V"}, Usage: "show the replay's conversation as it goes, as ox-attach does"},
	)
	app.Action = replay
	cliutil.Run(app)
}

func replay(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("give the RUN to replay (ox-ps --all lists the runs)")
	}
	if c.Bool("apply") && (c.IsSet("as") || c.IsSet("rev") || c.Bool("keep")) {
		return cliutil.Usagef("--apply replays on the agent itself: --as, --rev and --keep are for a fork")
	}
	id := c.Args().First()
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()

	// The recording: the run's records, as its log keeps them, once it
	// has ended.
	state := ""
	err = cl.Ps(c.Context, proto.PsArgs{All: true}, func(r proto.RunRecord) error {
		if r.ID == id {
			state = r.State
		}
		return nil
	})
	if err != nil {
		return err
	}
	if state == proto.RunRunning || state == proto.RunQueued {
		return cliutil.Failf("run %s is %s: replay a run that has ended (ox-wait %s)", id, state, id)
	}
	var log bytes.Buffer
	err = cl.Attach(c.Context, id, func(raw json.RawMessage) error {
		log.Write(raw)
		log.WriteByte('\n')
		return nil
	})
	if err != nil {
		return err
	}
	rec, err := agent.ReadRecording(bytes.NewReader(log.Bytes()))
	if err != nil {
		return cliutil.Failf("run %s: %v", id, err)
	}

	// The world it replays in: a fork of the agent, unless --apply.
	target := rec.Agent
	forked := false
	if !c.Bool("apply") {
		target = c.String("as")
		if target == "" {
			target = forkName(rec.Agent, id)
		}
		if _, err := cl.Fork(c.Context, proto.ForkArgs{Agent: rec.Agent, Name: target, Rev: c.String("rev")}); err != nil {
			var pe *proto.Error
			if errors.As(err, &pe) && pe.Code == proto.EEXIST {
				return cliutil.Failf("agent %q exists (a replay kept with --keep?): remove it (ox-agents rm %s) or name the fork with --as: %v", target, target, err)
			}
			return err
		}
		forked = true
	}
	note := func(format string, args ...any) {
		if !c.Bool("json") || c.Bool("verbose") {
			fmt.Fprintf(os.Stderr, "["+format+"]\n", args...)
		}
	}
	where := "on agent " + target + " itself (--apply)"
	if forked {
		where = "in " + target + ", a fork of " + rec.Agent
	}
	note("replaying run %s of agent %s (%d answers) %s", id, rec.Agent, len(rec.Answers), where)

	argv := []string{"ox-agent", "--replay", "-", "--json"}
	if m := c.String("model"); m != "" {
		argv = append(argv, "--afresh", "--model", m)
	}
	a := proto.SpawnArgs{Agent: target, Command: argv, Input: log.String(), Work: rec.Work}
	end, replayRun, status, stderr, err := run(c, cl, a)
	// The cleaning up is done also after Ctrl-C, on a context of its own:
	// the replay's run ended first (a fork with a live run stays).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.Context.Err() != nil && replayRun != "" {
		cl.Kill(ctx, proto.KillArgs{Runs: []string{replayRun}, Signal: "TERM"}, func(proto.RunRecord) error { return nil })
		cl.Wait(ctx, []string{replayRun}, func(proto.ExitRecord) error { return nil })
	}
	if rec.Work != "" && replayRun != "" {
		// Its changes to the folder wait in its copy-on-write workspace:
		// thrown away with the fork, kept for ox-work apply with --apply.
		if c.Bool("apply") || c.Bool("keep") {
			note("the replay's changes to %s wait in run %s's workspace: ox-work diff %s", rec.Work, replayRun, replayRun)
		} else if _, derr := cl.WorkDiscard(ctx, replayRun); derr != nil && !isCode(derr, proto.ENOENT) {
			note("the replay's work (run %s) is kept: %v", replayRun, derr)
		}
	}
	if forked && !c.Bool("keep") {
		if _, rerr := cl.AgentRemove(ctx, target); rerr != nil {
			note("the fork %s is kept: %v", target, rerr)
		}
	} else if forked {
		note("the fork %s is kept (ox-agents rm %s removes it)", target, target)
	}
	if err != nil {
		return err
	}
	if end == nil {
		return cliutil.Failf("the replay of run %s ended (status %d) without its report%s", id, status, stderr)
	}
	p := cliutil.NewPrinter(c)
	if p.JSON {
		p.Print(end)
	} else {
		fmt.Println(end.Text)
		if !end.Matched && end.Want != "" {
			fmt.Printf("  recorded: %s\n  replayed: %s\n", end.Want, end.Got)
		}
	}
	if err := p.Flush(); err != nil {
		return err
	}
	if !end.Matched {
		return cliutil.Silent(cliutil.ExitFailure)
	}
	return nil
}

// run runs the replay a, handed the recording on its stdin: its report,
// its run, its exit status, and what it said on stderr.
func run(c *cli.Context, cl *client.Client, a proto.SpawnArgs) (*proto.ReplayRecord, string, int, string, error) {
	var end *proto.ReplayRecord
	var stderr strings.Builder
	status := -1
	show := cliutil.NewRunStream(false)
	err := cl.SpawnAttach(c.Context, a,
		func(raw json.RawMessage) error {
			var head struct {
				Type   string `json:"type"`
				Stream string `json:"stream"`
				Text   string `json:"text"`
				Status int    `json:"status"`
			}
			json.Unmarshal(raw, &head)
			switch head.Type {
			case proto.RecordRun:
				if show.Run == "" {
					var r proto.RunRecord
					json.Unmarshal(raw, &r)
					show.Run = r.ID
				}
			case proto.RecordExit:
				status = head.Status
			case proto.RecordOutput:
				if head.Stream == "stderr" {
					stderr.WriteString("\n  " + head.Text)
					return nil
				}
				// The runner's records, each a line of its stdout.
				var r struct {
					Type string `json:"type"`
				}
				if json.Unmarshal([]byte(head.Text), &r) != nil {
					return nil
				}
				if r.Type == proto.RecordReplay {
					end = &proto.ReplayRecord{}
					if err := json.Unmarshal([]byte(head.Text), end); err != nil {
						return err
					}
				} else if c.Bool("verbose") {
					show.Record(json.RawMessage(head.Text))
				}
			}
			return nil
		})
	if err != nil {
		return nil, show.Run, status, "", err
	}
	if stderr.Len() > 0 {
		return end, show.Run, status, ":" + stderr.String(), nil
	}
	return end, show.Run, status, "", nil
}

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}

// forkName is the default name of the fork a replay of run id runs in.
func forkName(agentName, id string) string {
	n := agentName + "-replay-" + strings.ToLower(id)
	if len(n) > proto.MaxAgentLen {
		n = n[:proto.MaxAgentLen]
	}
	return strings.TrimRight(n, "-._")
}
