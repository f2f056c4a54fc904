package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/cliutil"
)

// logsCommand is `ox-agent logs`: the prompts and answers of the agent's
// kept conversations, the newest first, those holding WORDS with -q.
var logsCommand = &cli.Command{
	Name:      "logs",
	Usage:     "the prompts and answers of the agent's kept conversations, the newest first (-q: those holding WORDS)",
	ArgsUsage: "[WORDS...]",
	Flags: cliutil.ClientFlags(
		&cli.StringFlag{Name: "query", Aliases: []string{"q"}, Usage: "only the exchanges whose prompt or answer holds every word of `WORDS` (and of the arguments), whatever their case"},
		&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Value: 10, Usage: "at most `N` exchanges (0: all)"},
		&cli.StringFlag{Name: "conversation", Usage: "only the conversation of run `ID`"},
	),
	Action: logs,
}

// exchangeRecord is the record of an exchange.
type exchangeRecord struct {
	Type   string    `json:"type"` // always "exchange"
	Agent  string    `json:"agent"`
	Run    string    `json:"run"`
	Model  string    `json:"model,omitempty"`
	Saved  time.Time `json:"saved"`
	Prompt string    `json:"prompt"`
	Answer string    `json:"answer"`
	Text   string    `json:"text"`
}

func logs(c *cli.Context) error {
	// -a, --socket and --json given before "logs" count too.
	for _, name := range []string{"agent", "socket", "json"} {
		for _, p := range c.Lineage()[1:] {
			if !c.IsSet(name) && p.IsSet(name) {
				c.Set(name, p.String(name))
			}
		}
	}
	name, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	words := append(strings.Fields(c.String("query")), c.Args().Slice()...)
	if c.Int("count") < 0 {
		return cliutil.Usagef("--count %d: want 0 (all) or more", c.Int("count"))
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	k := &agent.Client{C: cl, Agent: name}
	var convs []*agent.Conversation
	if id := c.String("conversation"); id != "" {
		conv, err := agent.LoadConversation(c.Context, k, id)
		if err != nil {
			return err
		}
		convs = append(convs, conv)
	} else {
		var skipped []string
		if convs, skipped, err = agent.Conversations(c.Context, k); err != nil {
			return err
		}
		for _, key := range skipped {
			fmt.Fprintf(os.Stderr, "ox-agent: %s is not a conversation ox-agent kept: skipped\n", key)
		}
	}
	p := cliutil.NewPrinter(c, "RUN", "SAVED", "PROMPT", "ANSWER")
	n := 0
	// A continued conversation holds the one it continued: each exchange
	// is shown once, with the newest run that holds it.
	seen := map[[2]string]bool{}
	for _, conv := range convs {
		ex := conv.Exchanges()
		slices.Reverse(ex) // the newest first
		for _, e := range ex {
			if !e.Matches(words) || seen[[2]string{e.Prompt, e.Answer}] {
				continue
			}
			seen[[2]string{e.Prompt, e.Answer}] = true
			if max := c.Int("count"); max > 0 && n >= max {
				return p.Flush()
			}
			n++
			rec := exchangeRecord{Type: "exchange", Agent: name, Run: e.Run, Model: e.Model, Saved: e.Saved.UTC(), Prompt: e.Prompt, Answer: e.Answer,
				Text: fmt.Sprintf("%s: %s -> %s", e.Run, agent.OneLine(e.Prompt, 200), agent.OneLine(e.Answer, 200))}
			p.Print(rec, e.Run, e.Saved.Local().Format("2006-01-02 15:04"), agent.OneLine(e.Prompt, 60), agent.OneLine(e.Answer, 80))
		}
	}
	return p.Flush()
}

// noLogs reports whether "logs" is not the name of the subcommand here:
// after "--" it is a task (oxiosd runs ox-agent -- TASK).
func noLogs(args []string) bool {
	for _, a := range args[1:] {
		switch a {
		case "--":
			return true
		case "logs":
			return false
		}
	}
	return false
}
