// Command ox-recall finds an agent's memories for a query through oxiosd.
// See ox-recall(1).
package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-recall", "find an agent's memories for a query, best first")
	app.Version = version
	app.ArgsUsage = "[QUERY...]"
	app.Description = "Hybrid recall: BM25 with stemming and query expansion, fused with a dense signal. With no QUERY the query is read from stdin (the text of JSON records, or plain text)."
	app.Flags = cliutil.ClientFlags(
		&cli.IntFlag{Name: "k", Aliases: []string{"n"}, Value: 10, Usage: "return at most `N` memories"},
		&cli.StringFlag{Name: "kind", Usage: "only memories of `KIND` (working, episodic, semantic)"},
		&cli.StringSliceFlag{Name: "tag", Aliases: []string{"t"}, Usage: "only memories with `TAG` (repeatable: all of them)"},
		&cli.StringFlag{Name: "since", Usage: "only memories created since `TIME` (RFC 3339, a date, or a duration ago: 24h)"},
		&cli.Float64Flag{Name: "min-score", Usage: "only memories scoring at least `S` (0 to 1)"},
		&cli.BoolFlag{Name: "all-agents", Usage: "search every agent (admin only), merged by score"},
	)
	app.Action = recallCmd
	cliutil.Run(app)
}

func recallCmd(c *cli.Context) error {
	a := proto.MemRecallArgs{K: c.Int("k"), Kind: c.String("kind"), Tags: c.StringSlice("tag"), MinScore: c.Float64("min-score"), AllAgents: c.Bool("all-agents")}
	if !a.AllAgents {
		agent, err := cliutil.Agent(c)
		if err != nil {
			return err
		}
		a.Agent = agent
	}
	if a.K < 1 || a.K > 10000 {
		return cliutil.Usagef("-k %d: want 1 to 10000", a.K)
	}
	if a.Kind != "" {
		if err := memory.CheckKind(a.Kind); err != nil {
			return cliutil.Usagef("--kind: %v", err)
		}
	}
	for _, t := range a.Tags {
		if err := memory.CheckTag(t); err != nil {
			return cliutil.Usagef("--tag: %v", err)
		}
	}
	if s := c.String("since"); s != "" {
		t, err := cliutil.ParseTime(s)
		if err != nil {
			return cliutil.Usagef("--since: %v", err)
		}
		a.Since = t
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	if c.NArg() > 0 {
		a.Query = strings.Join(c.Args().Slice(), " ")
	} else {
		if cliutil.IsTerminal(os.Stdin) {
			fmt.Fprintln(os.Stderr, "ox-recall: reading the query from stdin; end it with Ctrl-D")
		}
		lr := cliutil.NewLineReader(os.Stdin, cl.Hello().MaxValue)
		var parts []string
		for {
			l, err := lr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return cliutil.Failf("stdin: %v", err)
			}
			parts = append(parts, cliutil.ParseRecord(l.Text).Text)
		}
		a.Query = strings.Join(parts, "\n")
	}
	if strings.TrimSpace(a.Query) == "" {
		return cliutil.Usagef("the query is empty: give QUERY words or pipe the query in")
	}
	p := cliutil.NewPrinter(c, "SCORE", "AGENT", "KIND", "ID", "TEXT")
	err = cl.MemRecall(c.Context, a, func(r proto.MemoryRecord) error {
		return p.Print(r, strconv.FormatFloat(r.Score, 'f', 3, 64), r.Agent, r.Kind, r.ID, oneLine(r.Text, 60))
	})
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	return err
}

// oneLine shortens text for a table cell.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
