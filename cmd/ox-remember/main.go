// Command ox-remember stores memories of an agent through oxiosd. See
// ox-remember(1).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-remember", "store memories of an agent")
	app.Version = version
	app.ArgsUsage = "[TEXT...]"
	app.Description = "With TEXT, remembers it. Without, reads stdin: one memory per line; a line that is a JSON record of any ox-* command keeps its text and fields. Lines go in batches, each durable in one group commit."
	app.Flags = cliutil.ClientFlags(
		&cli.StringFlag{Name: "kind", Aliases: []string{"k"}, Usage: "`KIND` of memory: working, episodic or semantic (default episodic, or the record's)"},
		&cli.StringSliceFlag{Name: "tag", Aliases: []string{"t"}, Usage: "add `TAG` (repeatable)"},
		&cli.StringFlag{Name: "ttl", Usage: "forget after `DURATION` (90m, 24h; working memory defaults to memory.working_ttl)"},
		&cli.Float64Flag{Name: "importance", Usage: "importance `F` from 0 to 1 (breaks ties in recall)"},
		&cli.StringFlag{Name: "source", Usage: "where the memory comes from (`TEXT`, one line)"},
		&cli.IntFlag{Name: "batch", Value: 1000, Usage: "memories per request when reading stdin (`N`)"},
	)
	app.Action = remember
	cliutil.Run(app)
}

type opts struct {
	kind, ttl, source string
	tags              []string
	importance        float64
	imp               bool
}

func remember(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	o := opts{kind: c.String("kind"), ttl: c.String("ttl"), source: c.String("source"), tags: c.StringSlice("tag"),
		importance: c.Float64("importance"), imp: c.IsSet("importance")}
	if o.kind != "" {
		if err := memory.CheckKind(o.kind); err != nil {
			return cliutil.Usagef("--kind: %v", err)
		}
	}
	for _, t := range o.tags {
		if err := memory.CheckTag(t); err != nil {
			return cliutil.Usagef("--tag: %v", err)
		}
	}
	if o.ttl != "" {
		if d, err := time.ParseDuration(o.ttl); err != nil || d < 0 {
			return cliutil.Usagef("--ttl %q: want a duration such as 90m or 24h", o.ttl)
		}
	}
	if o.imp && !(o.importance >= 0 && o.importance <= 1) {
		return cliutil.Usagef("--importance %v: want a number from 0 to 1", o.importance)
	}
	batch := c.Int("batch")
	if batch < 1 || batch > proto.MaxRememberBatch {
		return cliutil.Usagef("--batch %d: want 1 to %d", batch, proto.MaxRememberBatch)
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "ID", "KIND", "TAGS", "CREATED")
	defer p.Flush()
	print := func(recs []proto.MemoryRecord) error {
		for _, r := range recs {
			if p.JSON {
				// Off a terminal: no row to format (a bulk load's
				// 100k times were a tenth of the command's CPU).
				if err := p.Print(r); err != nil {
					return err
				}
				continue
			}
			if err := p.Print(r, r.ID, r.Kind, strings.Join(r.Tags, ","), r.Created.Local().Format("2006-01-02 15:04:05")); err != nil {
				return err
			}
		}
		return nil
	}
	if c.NArg() > 0 {
		in, err := o.input(cliutil.ParseRecord([]byte(strings.Join(c.Args().Slice(), " "))), false)
		if err != nil {
			return cliutil.Usagef("%v", err)
		}
		recs, err := cl.MemRemember(c.Context, proto.MemRememberArgs{Agent: agent, Memories: []proto.MemoryInput{in}})
		if err != nil {
			return err
		}
		return print(recs)
	}
	if cliutil.IsTerminal(os.Stdin) {
		fmt.Fprintln(os.Stderr, "ox-remember: reading memories from stdin, one per line; end with Ctrl-D")
	}
	// A bulk load keeps little alive (the batches in flight) and makes
	// much garbage: at Go's default the collector ran every few MiB, a
	// third of the command's CPU on 100k lines. Four times the live heap
	// is still a few MiB.
	debug.SetGCPercent(400)
	return fromStdin(c, cl, agent, o, batch, print)
}

// input makes a memory of a record; flags give what the record does not.
func (o *opts) input(r cliutil.Record, fromRecord bool) (proto.MemoryInput, error) {
	in := proto.MemoryInput{Text: r.Text, Kind: o.kind, Source: o.source, Importance: o.importance, TTL: o.ttl}
	if fromRecord && r.Fields != nil {
		if k := r.String("kind"); k != "" && o.kind == "" && memory.CheckKind(k) == nil {
			in.Kind = k
		}
		if s := r.String("source"); s != "" && o.source == "" {
			in.Source = s
		}
		if f := r.Float("importance"); f > 0 && f <= 1 && !o.imp {
			in.Importance = f
		}
		for _, t := range r.Strings("tags") {
			if memory.CheckTag(t) == nil {
				in.Tags = append(in.Tags, t)
			}
		}
	}
	in.Tags = append(in.Tags, o.tags...)
	if strings.TrimSpace(in.Text) == "" {
		return in, errors.New("the text is empty")
	}
	if len(in.Source) > memory.MaxSourceLen || strings.ContainsAny(in.Source, "\r\n") {
		return in, fmt.Errorf("source %.40q: want one line of at most %d bytes", in.Source, memory.MaxSourceLen)
	}
	in.Source = strings.TrimSpace(in.Source)
	return in, nil
}

type pending struct {
	first, last int
	recs        []proto.MemoryRecord
	err         error
	done        chan struct{}
}

// fromStdin sends stdin's lines in batches, a few requests in flight, and
// prints the records in input order. A bad line stops the input: its batch
// is not sent (nothing of it is remembered), the batches before it are.
func fromStdin(c *cli.Context, cl *client.Client, agent string, o opts, batch int, print func([]proto.MemoryRecord) error) error {
	maxText := cl.Hello().MaxValue - 1024
	budget := cl.Hello().MaxLine / 2
	lr := cliutil.NewLineReader(os.Stdin, maxText)
	inflight := make(chan *pending, 4)
	var readErr error
	go func() {
		defer close(inflight)
		var ins []proto.MemoryInput
		first, last, bytes := 0, 0, 0
		send := func() {
			if len(ins) == 0 {
				return
			}
			pd := &pending{first: first, last: last, done: make(chan struct{})}
			args := proto.MemRememberArgs{Agent: agent, Memories: ins}
			inflight <- pd
			go func() {
				pd.recs, pd.err = cl.MemRemember(c.Context, args)
				close(pd.done)
			}()
			ins, bytes = nil, 0
		}
		for {
			l, err := lr.Next()
			if err == io.EOF {
				send()
				return
			}
			if len(ins) == 0 {
				first = l.N
			}
			if err != nil {
				readErr = batchError(err, first, l.N)
				return
			}
			if len(strings.TrimSpace(string(l.Text))) == 0 {
				continue
			}
			in, err := o.input(cliutil.ParseRecord(l.Text), true)
			if err != nil {
				readErr = batchError(fmt.Errorf("line %d: %v", l.N, err), first, l.N)
				return
			}
			sz := len(in.Text)*2 + 256
			if len(ins) > 0 && (len(ins) == batch || bytes+sz > budget) {
				send()
				first = l.N
			}
			ins = append(ins, in)
			last, bytes = l.N, bytes+sz
		}
	}()
	var first error
	for pd := range inflight {
		<-pd.done
		if pd.err != nil && first == nil {
			first = fmt.Errorf("lines %d-%d: %w", pd.first, pd.last, pd.err)
			continue
		}
		if err := print(pd.recs); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	if readErr != nil {
		return readErr
	}
	return nil
}

func batchError(err error, first, n int) error {
	if first < n {
		return cliutil.Failf("%v; lines %d-%d (its batch) were not remembered, the lines before them were", err, first, n)
	}
	return cliutil.Failf("%v; it and the lines after it were not remembered", err)
}
