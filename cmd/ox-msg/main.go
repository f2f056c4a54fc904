// Command ox-msg sends messages between agents and reads an agent's
// inbox. See ox-msg(1).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-msg", "send messages between agents; list and receive an agent's inbox")
	app.Version = version
	app.UsageText = "ox-msg send [-a FROM] [-r ID] TO [TEXT...]\nox-msg ls -a AGENT [--unread]\nox-msg recv -a AGENT [-f] [-n N] [--wait DUR] [--peek]"
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:      "send",
			Usage:     "send TEXT (and the records on stdin, attached) to agent TO",
			ArgsUsage: "TO [TEXT...]",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "agent", Aliases: []string{"a"}, Usage: "send as agent `NAME` (default: $OXIOS_AGENT; none: as an operator)", EnvVars: []string{"OXIOS_AGENT"}},
				&cli.StringFlag{Name: "reply-to", Aliases: []string{"r"}, Usage: "the message `ID` this one answers"},
				cliutil.SocketFlag, cliutil.JSONFlag,
			},
			Action: sendCmd,
		},
		{
			Name:   "ls",
			Usage:  "list an agent's inbox, oldest first",
			Flags:  cliutil.ClientFlags(&cli.BoolFlag{Name: "unread", Aliases: []string{"u"}, Usage: "only messages not received yet"}),
			Action: lsCmd,
		},
		{
			Name:  "recv",
			Usage: "print the unread messages and mark them read; -f waits for more",
			Flags: cliutil.ClientFlags(
				&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "wait for new messages and print each as it comes"},
				&cli.IntFlag{Name: "n", Usage: "stop after `N` messages"},
				&cli.DurationFlag{Name: "wait", Aliases: []string{"w"}, Usage: "with no unread message, wait up to `DUR` for one"},
				&cli.BoolFlag{Name: "peek", Usage: "leave the messages unread"},
			),
			Action: recvCmd,
		},
	})
	cliutil.Run(app)
}

// stdinRecords reads what a pipe or file on stdin holds: JSON records
// are attached as they are, other lines join the text.
func stdinRecords(max int) ([]json.RawMessage, string, error) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&os.ModeNamedPipe == 0 && !fi.Mode().IsRegular() {
		return nil, "", nil
	}
	lr := cliutil.NewLineReader(os.Stdin, max)
	var recs []json.RawMessage
	var text []string
	for {
		l, err := lr.Next()
		if err == io.EOF {
			return recs, strings.Join(text, "\n"), nil
		}
		if err != nil {
			return nil, "", cliutil.Failf("stdin: %v", err)
		}
		r := cliutil.ParseRecord(l.Text)
		if r.Fields != nil {
			recs = append(recs, json.RawMessage(append([]byte(nil), l.Text...)))
		} else if len(strings.TrimSpace(string(l.Text))) > 0 {
			text = append(text, string(l.Text))
		}
	}
}

func sendCmd(c *cli.Context) error {
	if c.NArg() < 1 {
		return cliutil.Usagef("give the recipient: ox-msg send TO [TEXT...]")
	}
	to := c.Args().First()
	if err := proto.CheckAgent(to); err != nil {
		return cliutil.Usagef("TO: %s", err.Message)
	}
	from := c.String("agent")
	if from != "" {
		if err := proto.CheckAgent(from); err != nil {
			return cliutil.Usagef("%s", err.Message)
		}
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	recs, more, err := stdinRecords(int(cl.Hello().MaxValue))
	if err != nil {
		return err
	}
	text := strings.Join(c.Args().Tail(), " ")
	if more != "" {
		text = strings.TrimSpace(text + "\n" + more)
	}
	if strings.TrimSpace(text) == "" && len(recs) == 0 {
		return cliutil.Usagef("nothing to send: give TEXT or pipe records on stdin")
	}
	rec, err := cl.MsgSend(c.Context, proto.MsgSendArgs{To: to, From: from, Text: text, ReplyTo: c.String("reply-to"), Records: recs})
	if err != nil {
		return err
	}
	p := cliutil.NewPrinter(c, "ID", "FROM", "TO", "TEXT")
	p.Print(rec, rec.ID, orOperator(rec.From), rec.Agent, oneLine(rec.Text))
	return p.Flush()
}

func orOperator(from string) string {
	if from == "" {
		return "(operator)"
	}
	return from
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func lsCmd(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c, "ID", "TIME", "FROM", "READ", "TEXT")
	err = cl.MsgList(c.Context, proto.MsgListArgs{Agent: agent, Unread: c.Bool("unread")}, func(m proto.MsgRecord) error {
		read := "no"
		if m.Read {
			read = "yes"
		}
		return p.Print(m, m.ID, m.Time.Local().Format("15:04:05"), orOperator(m.From), read, oneLine(m.Text))
	})
	if ferr := p.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}

func recvCmd(c *cli.Context) error {
	agent, err := cliutil.Agent(c)
	if err != nil {
		return err
	}
	if c.Int("n") < 0 {
		return cliutil.Usagef("-n must not be negative")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cliutil.NewPrinter(c)
	a := proto.MsgListArgs{Agent: agent, Follow: c.Bool("follow"), Max: c.Int("n"), Peek: c.Bool("peek")}
	if d := c.Duration("wait"); d > 0 {
		a.Wait = d.String()
	}
	err = cl.MsgRecv(c.Context, a, func(m proto.MsgRecord) error {
		if p.JSON {
			p.Print(m)
			return p.Flush()
		}
		// Another agent wrote it: shown, not obeyed, by the terminal.
		fmt.Printf("%s %s from %s:\n%s\n", m.ID, m.Time.Local().Format("15:04:05"), orOperator(m.From), cliutil.Text(m.Text))
		for _, r := range m.Records {
			fmt.Printf("  %s\n", cliutil.Cell(string(r)))
		}
		return nil
	})
	if c.Context.Err() != nil {
		err = nil // interrupted while following
	}
	if ferr := p.Flush(); err == nil && ferr != nil {
		err = cliutil.Failf("writing stdout: %v", ferr)
	}
	return err
}
