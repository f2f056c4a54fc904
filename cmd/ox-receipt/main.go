// Command ox-receipt writes a run's receipt, and checks one offline. See
// ox-receipt(1).
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/oxios/oxios/pkg/cliutil"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/receipt"
)

var version = "0.1.0-dev"

func main() {
	app := cliutil.App("ox-receipt", "write a run's receipt; check one offline, against a head kept elsewhere")
	app.Version = version
	app.Description = "ox-receipt RUN writes one self-contained file that proves what the run did: its record and output, " +
		"its work's patch, the audit entries from its start to its exit bound to the log's head, and the state commits around it. " +
		"ox-receipt verify checks it without the daemon."
	app.UsageText = "ox-receipt RUN > run.receipt\nox-receipt verify [--head FILE] RECEIPT"
	app.ArgsUsage = "RUN"
	app.Flags = []cli.Flag{cliutil.SocketFlag}
	app.Action = writeCmd
	app.Commands = cliutil.SubcommandUsage([]*cli.Command{
		{
			Name:      "verify",
			Usage:     "check a receipt offline: exit 1 naming the part that does not match",
			ArgsUsage: "RECEIPT",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "head", Usage: "hold it to the head in `FILE` (ox-audit head's output, an export, '-' for stdin), kept since the run", TakesFile: true},
				cliutil.JSONFlag,
			},
			Action: verifyCmd,
		},
	})
	cliutil.Run(app)
}

func writeCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("give one run: ox-receipt RUN > run.receipt")
	}
	cl, err := cliutil.Connect(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := bufio.NewWriter(os.Stdout)
	err = cl.RunReceipt(c.Context, c.Args().First(), func(l proto.ReceiptLine) error {
		w.WriteString(l.Line)
		return w.WriteByte('\n')
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return cliutil.Failf("writing stdout: %v", err)
	}
	return nil
}

// open opens name, or stdin for "-".
func open(name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(name)
}

func verifyCmd(c *cli.Context) error {
	if c.NArg() != 1 {
		return cliutil.Usagef("give the receipt: ox-receipt verify [--head FILE] RECEIPT ('-' for stdin)")
	}
	var head *proto.AuditHead
	if name := c.String("head"); name != "" {
		if name == "-" && c.Args().First() == "-" {
			return cliutil.Usagef("the receipt and the head cannot both be stdin")
		}
		f, err := open(name)
		if err != nil {
			return cliutil.Failf("%v", err)
		}
		head, err = receipt.ReadHead(f)
		f.Close()
		if err != nil {
			return cliutil.Failf("--head %s: %v", name, err)
		}
	}
	name := c.Args().First()
	f, err := open(name)
	if err != nil {
		return cliutil.Failf("%v", err)
	}
	defer f.Close()
	res, err := receipt.Verify(f, head)
	if err != nil {
		return cliutil.Failf("reading %s: %v", name, err)
	}
	p := cliutil.NewPrinter(c)
	if p.JSON {
		p.Print(res)
		if err := p.Flush(); err != nil {
			return cliutil.Failf("writing stdout: %v", err)
		}
	}
	if !res.OK {
		return cliutil.Failf("%s: receipt does NOT verify: %s: %s", name, res.Part, res.Problem)
	}
	if !p.JSON {
		against := "no head given: it is whole, and proves what it holds only once held to a head kept since the run (--head)"
		if head != nil {
			against = fmt.Sprintf("bound to head %d %s", head.Seq, head.Hash)
		}
		fmt.Printf("%s: receipt of run %s of agent %s verifies: %d audit entries to %d, %s\n", name, res.Run, res.Agent, res.Entries, res.Head.Seq, against)
	}
	return nil
}
