// Command ox-top shows what runs use, refreshed: CPU, memory, open files,
// tokens. See ox-top(1).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-top", "show what runs use, refreshed: CPU, memory, open files, tokens")
	app.Version = version
	app.Description = "Samples the runs (of agent -a, or every agent you may see) each interval: CPU use since the last sample, CPU time, RSS, open files and processes, summed over each run's processes, and tokens and cost; with the host's load and the run queue. On a terminal it redraws a table sorted by CPU until Ctrl-C or COUNT samples; off a terminal (or with --json) it prints one resources record per sample as a JSON line. oxiosd reads /proc only when asked."
	app.Flags = cliutil.ClientFlags(
		&cli.IntFlag{Name: "count", Aliases: []string{"n"}, Usage: "stop after `COUNT` samples (0: until interrupted; default 0 on a terminal, 1 off one)", Value: -1},
		&cli.DurationFlag{Name: "interval", Aliases: []string{"d"}, Usage: "the time between samples", Value: time.Second},
		&cli.BoolFlag{Name: "fleet", Aliases: []string{"F"}, Usage: "sample every node of the fleet: one record (a table) per node, each with its node"},
	)
	app.Action = top
	cliutil.Run(app)
}

func top(c *cli.Context) error {
	agent := c.String("agent")
	if agent != "" {
		if err := proto.CheckAgent(agent); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
	}
	if c.NArg() > 0 {
		return cliutil.Usagef("ox-top takes no arguments (got %q)", c.Args().First())
	}
	every := c.Duration("interval")
	if every < 100*time.Millisecond {
		return cliutil.Usagef("--interval %s: want 100ms or more", every)
	}
	asJSON := c.Bool("json") || !cliutil.IsTerminal(os.Stdout)
	count := c.Int("count")
	if count < 0 {
		count = 0
		if asJSON {
			count = 1
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	fleet := c.Bool("fleet")
	// Per node ("" alone): the CPU times of the last sample, and its time.
	prevs := map[string]map[string]float64{}
	prevTimes := map[string]time.Time{}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; count == 0 || n < count; n++ {
		if n > 0 {
			select {
			case <-tick.C:
			case <-c.Context.Done():
				return nil
			}
		}
		recs, err := sample(c, cl, agent, fleet)
		if err != nil {
			if c.Context.Err() != nil {
				return nil
			}
			return err
		}
		for i := range recs {
			rec := &recs[i]
			prev := prevs[rec.Node]
			if prev == nil {
				prev = map[string]float64{}
				prevs[rec.Node] = prev
			}
			percent(rec, prev, prevTimes[rec.Node])
			prevTimes[rec.Node] = rec.Time
			clear(prev)
			for _, r := range rec.Runs {
				prev[r.ID] = r.CPU
			}
			if asJSON {
				if err := enc.Encode(rec); err != nil {
					return err
				}
			} else {
				draw(out, rec, i == 0)
			}
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// sample is one resources record, or with fleet one per node, by node.
func sample(c *cli.Context, cl *client.Client, agent string, fleet bool) ([]proto.ResourcesRecord, error) {
	if !fleet {
		rec, err := cl.Resources(c.Context, agent)
		return []proto.ResourcesRecord{rec}, err
	}
	var recs []proto.ResourcesRecord
	err := cliutil.FleetStream(c.Context, cl, proto.OpResources, proto.ResourcesArgs{Agent: agent}, func(b json.RawMessage) error {
		var rec proto.ResourcesRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		recs = append(recs, rec)
		return nil
	})
	sort.Slice(recs, func(i, j int) bool { return recs[i].Node < recs[j].Node })
	return recs, err
}

// percent sets each run's CPU use since the last sample (100 = one core);
// on the first sample, or for a run new since it, the average since its
// start. Runs are sorted by it, highest first.
func percent(rec *proto.ResourcesRecord, prev map[string]float64, at time.Time) {
	for i := range rec.Runs {
		r := &rec.Runs[i]
		if r.State == proto.RunQueued {
			continue
		}
		var p float64
		if before, ok := prev[r.ID]; ok && rec.Time.After(at) {
			p = 100 * (r.CPU - before) / rec.Time.Sub(at).Seconds()
		} else if el := rec.Time.Sub(r.Started).Seconds(); el > 0 && !r.Started.IsZero() {
			p = 100 * r.CPU / el
		}
		p = float64(int64(max(p, 0)*10+0.5)) / 10
		r.CPUPercent = &p
	}
	sort.SliceStable(rec.Runs, func(i, j int) bool {
		a, b := rec.Runs[i].CPUPercent, rec.Runs[j].CPUPercent
		switch {
		case a == nil || b == nil:
			return a != nil
		case *a != *b:
			return *a > *b
		}
		return rec.Runs[i].CPU > rec.Runs[j].CPU
	})
}

// draw redraws the terminal: a summary line, then the runs.
func draw(w *bufio.Writer, rec *proto.ResourcesRecord, first bool) {
	h, ad := rec.Host, rec.Admission
	if first {
		w.WriteString("\x1b[H\x1b[2J")
	} else {
		w.WriteString("\n")
	}
	if rec.Node != "" {
		fmt.Fprintf(w, "node %s  ", rec.Node)
	}
	limit := "no limit"
	if ad.MaxConcurrent > 0 {
		limit = fmt.Sprintf("max %d", ad.MaxConcurrent)
	}
	fmt.Fprintf(w, "ox-top %s  load %.2f on %d cores  mem %s available of %s",
		rec.Time.Local().Format(time.TimeOnly), h.Load1, h.Cores, cliutil.HumanSize(h.MemAvailable), cliutil.HumanSize(h.MemTotal))
	if h.MemPressure >= 0 {
		fmt.Fprintf(w, "  pressure %.1f%%", h.MemPressure)
	}
	fmt.Fprintf(w, "\nruns: %d running (%s), %d queued", ad.Running, limit, ad.Queued)
	if h.Overloaded {
		fmt.Fprintf(w, "  OVERLOADED: %s", h.Why)
	}
	w.WriteString("\n\n")
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tAGENT\tSTATE\tPID\tCPU%\tCPU\tRSS\tFDS\tPROCS\tTOKENS\tCOST\tWHAT")
	for _, r := range rec.Runs {
		what := r.Task
		if len(r.Command) > 0 {
			what = strings.Join(r.Command, " ")
		}
		if len(what) > 40 {
			what = what[:37] + "..."
		}
		pct, pid := "-", "-"
		if r.CPUPercent != nil {
			pct = fmt.Sprintf("%.1f", *r.CPUPercent)
		}
		if r.PID > 0 {
			pid = fmt.Sprint(r.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2fs\t%s\t%d\t%d\t%d\t%.4g\t%s\n", r.ID, r.Agent, r.State, pid, pct,
			r.CPU, cliutil.HumanSize(r.RSS), r.FDs, r.Procs, r.Tokens, r.Cost, what)
	}
	tw.Flush()
}
