package cliutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/mattn/go-isatty"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// Printer prints records: one JSON object per line when stdout is not a
// terminal (or with --json), a table with a header on a terminal.
type Printer struct {
	JSON   bool
	out    *bufio.Writer
	tab    *tabwriter.Writer
	buf    bytes.Buffer // the table, cut to width at Flush
	width  int          // the terminal's columns; 0: no limit
	whole  bool         // lines are not cut to width (see Whole)
	header []string
	rows   int
	enc    *json.Encoder
	line   []byte // a record's line, reused (proto.AppendRecord)
}

// NewPrinter returns a printer for the command's stdout; header names the
// table's columns.
func NewPrinter(c *cli.Context, header ...string) *Printer {
	p := newPrinter(os.Stdout, c.Bool("json") || !IsTerminal(os.Stdout), header)
	if !p.JSON {
		if ws, err := unix.IoctlGetWinsize(int(os.Stdout.Fd()), unix.TIOCGWINSZ); err == nil {
			p.width = int(ws.Col)
		}
	}
	return p
}

func newPrinter(w io.Writer, asJSON bool, header []string) *Printer {
	p := &Printer{JSON: asJSON, out: bufio.NewWriter(w), header: header}
	p.enc = json.NewEncoder(p.out)
	p.enc.SetEscapeHTML(false)
	if !asJSON {
		p.tab = tabwriter.NewWriter(&p.buf, 2, 8, 2, ' ', 0)
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
		if b, ok := proto.AppendRecord(p.line[:0], rec); ok {
			p.line = append(b, '\n')
			_, err := p.out.Write(p.line)
			return err
		}
		return p.enc.Encode(rec)
	}
	p.printHeader()
	p.rows++
	cells := make([]string, len(row))
	for i, c := range row {
		cells[i] = Cell(c)
	}
	_, err := fmt.Fprintln(p.tab, strings.Join(cells, "\t"))
	return err
}

func (p *Printer) printHeader() {
	if p.rows == 0 && len(p.header) > 0 {
		fmt.Fprintln(p.tab, strings.Join(p.header, "\t"))
	}
}

// Flush writes out what is buffered; call it before exiting. An empty
// table still has its header, so that nothing listed is told from nothing
// printed; each line is cut to the terminal's width.
func (p *Printer) Flush() error {
	if p.tab != nil {
		p.printHeader()
		p.rows = max(p.rows, 1) // the header once
		p.tab.Flush()
		for line := range strings.Lines(p.buf.String()) {
			line = strings.TrimSuffix(line, "\n")
			if !p.whole {
				line = cut(line, p.width)
			}
			p.out.WriteString(line)
			p.out.WriteByte('\n')
		}
		p.buf.Reset()
	}
	return p.out.Flush()
}

// Whole makes the table's lines print whole, wrapped by the terminal,
// instead of cut to its width: for what must be read in full, such as
// the command an operator approves (put such a column last).
func (p *Printer) Whole() { p.whole = true }

// cut shortens line to width columns (runes), ending it with "…".
func cut(line string, width int) string {
	if width <= 0 || utf8.RuneCountInString(line) <= width {
		return line
	}
	r := []rune(line)
	return string(r[:width-1]) + "…"
}

// Cell is s made safe for a table cell: control characters (a tab or a
// newline would break the row, an escape sequence would drive the
// terminal), other runes that are not printable (a bidirectional override
// or a zero-width character would show other text than s holds) and
// invalid UTF-8 are shown escaped, as Go quotes them.
func Cell(s string) string {
	if proto.Printable(s) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// Text is s made safe to print on a terminal as lines: as Cell, but
// newlines and tabs stay. Text that another agent wrote (a message) goes
// through it, so that an escape sequence in it cannot drive the
// operator's terminal, nor a bidirectional override show other text.
func Text(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		body, nl := strings.CutSuffix(line, "\n")
		for i, cell := range strings.Split(body, "\t") {
			if i > 0 {
				b.WriteByte('\t')
			}
			b.WriteString(Cell(cell))
		}
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
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
