package cliutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"
)

// Printer prints records: one JSON object per line when stdout is not a
// terminal (or with --json), a table with a header on a terminal.
type Printer struct {
	JSON   bool
	out    *bufio.Writer
	tab    *tabwriter.Writer
	header []string
	rows   int
	enc    *json.Encoder
}

// NewPrinter returns a printer for the command's stdout; header names the
// table's columns.
func NewPrinter(c *cli.Context, header ...string) *Printer {
	return newPrinter(os.Stdout, c.Bool("json") || !IsTerminal(os.Stdout), header)
}

func newPrinter(w io.Writer, asJSON bool, header []string) *Printer {
	p := &Printer{JSON: asJSON, out: bufio.NewWriter(w), header: header}
	p.enc = json.NewEncoder(p.out)
	p.enc.SetEscapeHTML(false)
	if !asJSON {
		p.tab = tabwriter.NewWriter(p.out, 2, 8, 2, ' ', 0)
	}
	return p
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Print prints one record: rec as JSON, or row as a table row.
func (p *Printer) Print(rec any, row ...string) error {
	if p.JSON {
		return p.enc.Encode(rec)
	}
	if p.rows == 0 && len(p.header) > 0 {
		fmt.Fprintln(p.tab, strings.Join(p.header, "\t"))
	}
	p.rows++
	_, err := fmt.Fprintln(p.tab, strings.Join(row, "\t"))
	return err
}

// Flush writes out what is buffered; call it before exiting.
func (p *Printer) Flush() error {
	if p.tab != nil {
		p.tab.Flush()
	}
	return p.out.Flush()
}

// HumanSize formats n bytes for a table.
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ci", float64(n)/float64(div), "KMGTPE"[exp])
}
