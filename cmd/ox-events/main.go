// Command ox-events streams what happens in oxiosd as JSON lines: state
// changes, commits, refusals, runs... until interrupted. See ox-events(1).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-events", "stream what happens in oxiosd, as JSON lines")
	app.Version = version
	app.Description = "Events come in commit order, each with the seq of the audit entry that records it. " +
		"A reader that falls behind gets a \"lost\" record with the count and goes on; " +
		"--since replays from the audit log, so a reconnect misses nothing."
	app.ArgsUsage = " "
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "only events of agent `NAME`"},
		&cli.BoolFlag{Name: "fleet", Aliases: []string{"F"}, Usage: "the events of every node of the fleet, each with its node"},
		&cli.StringSliceFlag{Name: "type", Aliases: []string{"t"}, Usage: "only events of type `T` (a glob: 'state.*'; repeat for more)"},
		&cli.Uint64Flag{Name: "since", Usage: "first replay the events of audit entries from `SEQ` on (to resume: the last seq seen plus one)"},
		&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Usage: "exit after `N` events (0: run until interrupted)"},
		cliutil.SocketFlag, cliutil.JSONFlag,
	}
	app.Action = stream
	cliutil.Run(app)
}

func stream(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("ox-events takes no arguments (got %q); filter with -a, --type, --since", c.Args().First())
	}
	a := proto.EventsArgs{Agent: c.String("agent"), Types: c.StringSlice("type"), SinceSeq: c.Uint64("since")}
	if a.Agent != "" {
		if err := proto.CheckAgent(a.Agent); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
	}
	for _, t := range a.Types {
		if _, err := path.Match(t, ""); err != nil {
			return cliutil.Usagef("--type %q is not a glob: %v", t, err)
		}
	}
	if c.IsSet("since") && a.SinceSeq == 0 {
		return cliutil.Usagef("--since 0: audit entries are numbered from 1")
	}
	count := c.Int("count")
	if count < 0 {
		return cliutil.Usagef("--count must not be negative")
	}
	asJSON := c.Bool("json") || !cliutil.IsTerminal(os.Stdout)
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriterSize(os.Stdout, 32<<10)
	seen := 0
	// The stream has no end of its own: after --count events, cancelling
	// is how this reader leaves it.
	ctx, done := context.WithCancel(c.Context)
	defer done()
	each := func(rec json.RawMessage) error {
		if count > 0 && seen >= count {
			return nil // records already on the way when we left
		}
		if asJSON {
			out.Write(rec)
			out.WriteByte('\n')
		} else if err := printRow(out, rec); err != nil {
			return err
		}
		// A reader sees each event as it comes.
		if err := out.Flush(); err != nil {
			return cliutil.Failf("writing stdout: %v", err)
		}
		if count > 0 && isEvent(rec) {
			if seen++; seen == count {
				done()
			}
		}
		return nil
	}
	if c.Bool("fleet") {
		err = cliutil.FleetStream(ctx, cl, proto.OpEvents, a, each)
	} else {
		err = cl.Events(ctx, a, each)
	}
	out.Flush()
	switch {
	case count > 0 && seen >= count:
		return nil
	case err != nil && c.Context.Err() != nil:
		return nil // interrupted: the normal end
	case err == nil:
		return cliutil.Failf("the daemon ended the stream (it is stopping)")
	}
	return err
}

func isEvent(rec json.RawMessage) bool {
	var r struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(rec, &r) == nil && r.Type == proto.RecordEvent
}

// printRow prints a record readably: one line per event, as it comes (a
// table would wait for its last row to align).
func printRow(out *bufio.Writer, raw json.RawMessage) error {
	var r struct {
		proto.EventRecord
		Count uint64 `json:"count"`
		Node  string `json:"node"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("the daemon sent a record of unknown shape: %.80s", raw)
	}
	if r.Type == proto.RecordLost {
		_, err := fmt.Fprintf(out, "-- %d events lost (this reader fell behind; replay with --since)\n", r.Count)
		return err
	}
	at := r.Time
	if t, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
		at = t.Local().Format("2006-01-02 15:04:05.000")
	}
	what := r.Agent
	if r.Key != "" {
		what += ":" + r.Key
	}
	if r.Deleted {
		what += " (deleted)"
	}
	seq := "-"
	if r.Seq != 0 {
		seq = strconv.FormatUint(r.Seq, 10)
	}
	if r.Node != "" {
		at = r.Node + "  " + at
	}
	_, err := fmt.Fprintf(out, "%s  %8s  %-16s %-40s %s\n", at, seq, r.Event, what, r.Result)
	return err
}
