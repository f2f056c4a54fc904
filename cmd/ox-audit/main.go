// Command ox-audit reads and verifies the audit log of oxiosd: the
// append-only, hash-chained record of every change and every refusal. See
// ox-audit(1).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-audit", "read and verify the audit log")
	app.Version = version
	app.Description = "Every change and every refusal is an entry of an append-only BLAKE3 hash chain. " +
		"Entries print as JSON lines exactly as stored (a table on a terminal)."
	filters := []cli.Flag{
		&cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "only entries about or by agent `NAME`"},
		&cli.StringFlag{Name: "op", Usage: "only entries of op `OP` (a glob: 'state.*')"},
		&cli.StringFlag{Name: "since", Usage: "start at `SEQ|TIME`: an entry number, a time (RFC 3339, 'YYYY-MM-DD[ HH:MM[:SS]]') or an age (2h)"},
		cliutil.SocketFlag, cliutil.JSONFlag,
	}
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:      "log",
			Usage:     "print entries, oldest first",
			ArgsUsage: " ",
			Flags:     append([]cli.Flag{&cli.IntFlag{Name: "n", Usage: "only the last `N` selected entries"}}, filters...),
			Action:    logCmd,
		},
		{
			Name:      "tail",
			Usage:     "print the last entries; with -f, go on printing new ones as they happen",
			ArgsUsage: " ",
			Flags: append([]cli.Flag{
				&cli.IntFlag{Name: "n", Value: 10, Usage: "print the last `N` entries first"},
				&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "wait for new entries and print them (until interrupted)"},
				&cli.BoolFlag{Name: "fleet", Aliases: []string{"F"}, Usage: "the entries of every node of the fleet, each with its node"},
			}, filters...),
			Action: tailCmd,
		},
		{
			Name:      "show",
			Usage:     "print the entry SEQ",
			ArgsUsage: "SEQ",
			Flags:     []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    showCmd,
		},
		{
			Name:      "verify",
			Usage:     "recompute the hash chain: the daemon's live log, a data dir offline, or an export",
			ArgsUsage: " ",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "data", Usage: "verify the log of data dir `DIR` offline, without the daemon", TakesFile: true},
				&cli.StringFlag{Name: "file", Usage: "verify the export `FILE` ('-' for stdin)", TakesFile: true},
				&cli.BoolFlag{Name: "local", Usage: "in a fleet, do not hold the log to the heads of it the peers witnessed"},
				cliutil.SocketFlag, cliutil.JSONFlag,
			},
			Action: verifyCmd,
		},
		{
			Name:      "export",
			Usage:     "write the whole log and its head to stdout, a file that verify --file checks anywhere",
			ArgsUsage: " ",
			Flags:     []cli.Flag{cliutil.SocketFlag},
			Action:    exportCmd,
		},
		{
			Name:      "head",
			Usage:     "print the head (last seq and hash), to keep away from this machine",
			ArgsUsage: " ",
			Flags:     []cli.Flag{cliutil.SocketFlag, cliutil.JSONFlag},
			Action:    headCmd,
		},
	})
	cliutil.Run(app)
}

// parseSince reads --since: a seq, or a time.
func parseSince(s string, now time.Time) (seq uint64, at string, err error) {
	if s == "" {
		return 0, "", nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		if n == 0 {
			return 0, "", cliutil.Usagef("--since %s: entries are numbered from 1", s)
		}
		return n, "", nil
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(s, "-")); err == nil && d > 0 {
		return 0, now.Add(-d).UTC().Format(time.RFC3339Nano), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return 0, t.UTC().Format(time.RFC3339Nano), nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return 0, t.UTC().Format(time.RFC3339Nano), nil
		}
	}
	return 0, "", cliutil.Usagef("--since %q is neither an entry number, a time (RFC 3339 or 'YYYY-MM-DD[ HH:MM[:SS]]') nor an age (2h, 30m)", s)
}

func logArgs(c *cli.Context) (proto.AuditLogArgs, error) {
	if c.NArg() > 0 {
		return proto.AuditLogArgs{}, cliutil.Usagef("%s takes no arguments (got %q); filter with -a, --op, --since", c.Command.Name, c.Args().First())
	}
	a := proto.AuditLogArgs{Agent: c.String("agent"), Op: c.String("op"), N: c.Int("n")}
	if a.Agent != "" {
		if err := proto.CheckAgent(a.Agent); err != nil {
			return a, cliutil.Usagef("%s", err.Message)
		}
	}
	if _, err := path.Match(a.Op, ""); err != nil {
		return a, cliutil.Usagef("--op %q is not a glob: %v", a.Op, err)
	}
	if a.N < 0 {
		return a, cliutil.Usagef("-n must not be negative")
	}
	var err error
	a.SinceSeq, a.SinceTime, err = parseSince(c.String("since"), time.Now())
	return a, err
}

func logCmd(c *cli.Context) error {
	a, err := logArgs(c)
	if err != nil {
		return err
	}
	return printEntries(c, a)
}

func tailCmd(c *cli.Context) error {
	a, err := logArgs(c)
	if err != nil {
		return err
	}
	a.Follow = c.Bool("follow")
	if a.N == 0 && !c.IsSet("n") {
		a.N = 10
	}
	// -n 0: nothing of the past, only what comes.
	a.OnlyNew = a.N == 0
	return printEntries(c, a)
}

// entryPrinter prints entry lines verbatim (JSON), or as a table row.
type entryPrinter struct {
	raw   *bufio.Writer
	tab   *cliutil.Printer
	fleet bool // a NODE column
}

func newEntryPrinter(c *cli.Context) *entryPrinter {
	cols := []string{"SEQ", "TIME", "ACTOR", "OP", "TARGET", "RESULT"}
	fleet := c.Bool("fleet")
	if fleet {
		cols = append([]string{"NODE"}, cols...)
	}
	p := cliutil.NewPrinter(c, cols...)
	if p.JSON {
		return &entryPrinter{raw: bufio.NewWriterSize(os.Stdout, 64<<10)}
	}
	return &entryPrinter{tab: p, fleet: fleet}
}

func (p *entryPrinter) print(line []byte) error {
	if p.raw != nil {
		p.raw.Write(line)
		return p.raw.WriteByte('\n')
	}
	in, ok := audit.Peek(line)
	if !ok {
		return fmt.Errorf("the daemon sent an entry of unknown shape: %.80s", line)
	}
	t, _ := time.Parse(time.RFC3339Nano, in.Time)
	row := []string{strconv.FormatUint(in.Seq, 10), t.Local().Format("2006-01-02 15:04:05"), actor(in.Actor), in.Op, in.Target, in.Result}
	if p.fleet {
		var n struct{ Node string }
		json.Unmarshal(line, &n)
		row = append([]string{n.Node}, row...)
	}
	return p.tab.Print(nil, row...)
}

func (p *entryPrinter) flush() error {
	if p.raw != nil {
		return p.raw.Flush()
	}
	return p.tab.Flush()
}

func actor(a audit.Actor) string {
	s := "uid " + strconv.FormatUint(uint64(a.UID), 10)
	if a.PID != 0 {
		s += " pid " + strconv.FormatInt(int64(a.PID), 10)
	}
	if a.Agent != "" {
		s += " " + a.Agent
		if a.Run != "" {
			s += "/" + a.Run
		}
	}
	return s
}

func printEntries(c *cli.Context, a proto.AuditLogArgs) error {
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := newEntryPrinter(c)
	each := func(line json.RawMessage) error {
		if err := p.print(line); err != nil {
			return err
		}
		if a.Follow {
			return p.flush() // a follower sees each entry as it comes
		}
		return nil
	}
	if c.Bool("fleet") {
		// An entry carries its node: the line is no longer the one its
		// hash covers, which ox-audit verify checks on that node.
		err = cliutil.FleetStream(c.Context, cl, proto.OpAuditLog, a, each)
	} else {
		err = cl.AuditLog(c.Context, a, each)
	}
	ferr := p.flush()
	if a.Follow && c.Context.Err() != nil {
		return nil // interrupted: the normal end of tail -f
	}
	if a.Follow && err == nil {
		// A follow has no end of its own: a log shipper must tell this
		// from an interrupt.
		return cliutil.Failf("the daemon ended the stream (it is stopping)")
	}
	if err == nil && ferr != nil && !errors.Is(ferr, os.ErrClosed) {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}

func showCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("show takes exactly one SEQ")
	}
	seq, err := strconv.ParseUint(c.Args().First(), 10, 64)
	if err != nil || seq == 0 {
		return cliutil.Usagef("SEQ %q is not an entry number (1, 2, ...)", c.Args().First())
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	line, err := cl.AuditShow(c.Context, seq)
	if err != nil {
		return err
	}
	p := newEntryPrinter(c)
	if err := p.print(line); err != nil {
		return err
	}
	return p.flush()
}

func verifyCmd(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("verify takes no arguments; name what to check with --data DIR or --file FILE")
	}
	data, file := c.String("data"), c.String("file")
	var rec proto.AuditVerify
	var witnessed []proto.WitnessRecord
	switch {
	case data != "" && file != "":
		return cliutil.Usagef("give --data or --file, not both")
	case file != "":
		r := os.Stdin
		name := "stdin"
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return cliutil.Failf("%v", err)
			}
			defer f.Close()
			r, name = f, file
		}
		rep, err := audit.VerifyFile(r)
		if err != nil {
			return cliutil.Failf("reading %s: %v", name, err)
		}
		rec = rep.Record(name)
	case data != "":
		dir, err := auditDir(data)
		if err != nil {
			return err
		}
		rep, err := audit.Verify(dir)
		if err != nil {
			return cliutil.Failf("reading %s: %v", dir, err)
		}
		rec = rep.Record(dir)
	default:
		cl, err := cliutil.Connect(c)
		if err != nil {
			return err
		}
		defer cl.Close()
		if rec, err = cl.AuditVerify(c.Context); err != nil {
			return err
		}
		if rec.OK && !c.Bool("local") {
			// In a fleet, the peers kept heads of this log: a rewrite
			// that re-hashed its chain still differs from them.
			err := cl.FleetWitness(c.Context, func(w proto.WitnessRecord) error { witnessed = append(witnessed, w); return nil })
			var pe *proto.Error
			if err != nil && !(errors.As(err, &pe) && (pe.Code == proto.ENOTCONN || pe.Code == proto.ENOSYS)) {
				return err
			}
		}
	}
	p := cliutil.NewPrinter(c)
	if p.JSON {
		p.Print(rec)
	} else if rec.OK {
		fmt.Printf("%s: audit log verifies: %d entries, head %d %s\n", rec.Source, rec.Entries, rec.HeadSeq, rec.HeadHash)
	}
	if err := p.Flush(); err != nil {
		return cliutil.Failf("writing stdout: %v", err)
	}
	if rec.Note != "" {
		fmt.Fprintf(os.Stderr, "ox-audit: note: %s\n", rec.Note)
	}
	if !rec.OK {
		where := ""
		if rec.FirstBad != 0 {
			where = fmt.Sprintf(" at entry %d", rec.FirstBad)
		}
		return cliutil.Failf("%s: audit log does NOT verify%s: %s (the %d entries before it link)", rec.Source, where, rec.Problem, rec.Entries)
	}
	return witnessReport(c, witnessed)
}

// witnessReport prints what the peers' heads said of the log and fails
// (exit 1) when one of them no longer matches it.
func witnessReport(c *cli.Context, ws []proto.WitnessRecord) error {
	p := cliutil.NewPrinter(c)
	var bad []string
	for i := range ws {
		w := &ws[i]
		if p.JSON {
			p.Print(w)
		} else {
			fmt.Println(w.Text)
		}
		if !w.OK {
			bad = append(bad, w.Problem)
		}
	}
	if err := p.Flush(); err != nil {
		return cliutil.Failf("writing stdout: %v", err)
	}
	if len(bad) > 0 {
		return cliutil.Failf("audit log does NOT match what the fleet witnessed: %s", strings.Join(bad, "; "))
	}
	return nil
}

// auditDir finds the audit log of a data dir (or accepts the log dir
// itself).
func auditDir(data string) (string, error) {
	for _, dir := range []string{filepath.Join(data, "audit"), data} {
		if _, err := os.Stat(filepath.Join(dir, "head")); err == nil {
			return dir, nil
		}
		if segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.jsonl")); len(segs) > 0 {
			return dir, nil
		}
	}
	if _, err := os.Stat(data); err != nil {
		return "", cliutil.Failf("--data: %v", err)
	}
	return "", cliutil.Failf("--data %s: no audit log there (expected %s)", data, filepath.Join(data, "audit", "head"))
}

func exportCmd(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("export takes no arguments; redirect stdout to a file")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	err = cl.AuditExport(c.Context, func(line json.RawMessage) error {
		w.Write(line)
		return w.WriteByte('\n')
	})
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}

func headCmd(c *cli.Context) error {
	if c.NArg() > 0 {
		return cliutil.Usagef("head takes no arguments")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	h, err := cl.AuditHead(c.Context)
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "SEQ", "HASH")
	p.Print(h, strconv.FormatUint(h.Seq, 10), h.Hash)
	return p.Flush()
}
