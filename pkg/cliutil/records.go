package cliutil

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// ParseTime reads a time given on the command line: RFC 3339
// (2026-11-22T10:00:00Z), a date (2026-11-22, local midnight), or a
// duration meaning that long ago (24h, 90m).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.Local); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-11-22T10:00:00Z), a date (2026-11-22) or a duration ago (24h)", s)
}

// Line is one line of input: its number (from 1) and its bytes, without
// the newline.
type Line struct {
	N    int
	Text []byte
}

// LineReader reads input lines of at most max bytes, checking that each
// is UTF-8: a longer or non-UTF-8 line is an error naming it.
type LineReader struct {
	r   *bufio.Reader
	max int
	n   int
}

// NewLineReader reads r.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line, or io.EOF.
func (lr *LineReader) Next() (Line, error) {
	var buf []byte
	for {
		frag, err := lr.r.ReadSlice('\n')
		if len(buf)+len(frag) > lr.max+1 {
			lr.n++
			return Line{N: lr.n}, fmt.Errorf("line %d is longer than %d bytes (limits.max_value)", lr.n, lr.max)
		}
		buf = append(buf, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(buf) == 0 {
			return Line{}, io.EOF
		}
		if err != nil && err != io.EOF {
			return Line{}, err
		}
		break
	}
	lr.n++
	buf = bytes.TrimSuffix(buf, []byte("\n"))
	buf = bytes.TrimSuffix(buf, []byte("\r"))
	if !utf8.Valid(buf) {
		return Line{N: lr.n}, fmt.Errorf("line %d is not valid UTF-8 (memories and queries are text)", lr.n)
	}
	return Line{N: lr.n, Text: buf}, nil
}

// Record is a line read as a record of any ox-* command: Fields are its
// JSON fields when it is a JSON object, and Text its human payload
// ("text", else "value", else the whole line).
type Record struct {
	Fields map[string]json.RawMessage
	Text   string
}

// ParseRecord reads a line as a record.
func ParseRecord(line []byte) Record {
	t := bytes.TrimSpace(line)
	if len(t) > 1 && t[0] == '{' && t[len(t)-1] == '}' {
		var f map[string]json.RawMessage
		if json.Unmarshal(t, &f) == nil {
			r := Record{Fields: f, Text: string(line)}
			for _, k := range []string{"text", "value"} {
				var s string
				if raw, ok := f[k]; ok && json.Unmarshal(raw, &s) == nil {
					r.Text = s
					break
				}
			}
			return r
		}
	}
	return Record{Text: string(line)}
}

// String returns the string field k of a JSON record, or "".
func (r Record) String(k string) string {
	var s string
	if raw, ok := r.Fields[k]; ok {
		json.Unmarshal(raw, &s)
	}
	return s
}

// Strings returns the string-list field k of a JSON record.
func (r Record) Strings(k string) []string {
	var s []string
	if raw, ok := r.Fields[k]; ok {
		json.Unmarshal(raw, &s)
	}
	return s
}

// Float returns the number field k of a JSON record, or 0.
func (r Record) Float(k string) float64 {
	var f float64
	if raw, ok := r.Fields[k]; ok {
		json.Unmarshal(raw, &f)
	}
	return f
}

// Piped reports whether standard input is a pipe or a file: input a
// command was given, even if empty. A terminal or a character device such
// as /dev/null (cron's stdin) is not.
func Piped() bool {
	fi, err := os.Stdin.Stat()
	if err != nil {
		return false
	}
	m := fi.Mode()
	return m&os.ModeNamedPipe != 0 || m&os.ModeSocket != 0 || m.IsRegular()
}

// NothingPiped reports whether a command that takes its operands from its
// arguments or the records on stdin got neither because the pipe was
// empty: `ox-ps | ox-kill` with no runs has nothing to do, and exits 0
// (as xargs -r would), while no arguments and no pipe is a usage error.
func NothingPiped(c *cli.Context) bool { return c.NArg() == 0 && Piped() }

// ArgsOrStdin returns the command's arguments or, when it has none and
// standard input is not a terminal, one value per input line: the first of
// fields a JSON record has (so `ox-ps | ox-kill` takes each run record's
// id), or the line itself, trimmed. Empty lines are skipped. agent, when
// not empty, must be the agent of every record that names one. A value
// given twice is taken once.
func ArgsOrStdin(c *cli.Context, agent string, fields ...string) ([]string, error) {
	if c.NArg() > 0 || IsTerminal(os.Stdin) {
		return c.Args().Slice(), nil
	}
	var out []string
	seen := map[string]bool{}
	add := func(v string) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	lr := NewLineReader(os.Stdin, 1<<20)
	for {
		l, err := lr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, Usagef("stdin: %v", err)
		}
		if len(bytes.TrimSpace(l.Text)) == 0 {
			continue
		}
		r := ParseRecord(l.Text)
		if r.Fields == nil {
			add(strings.TrimSpace(r.Text))
			continue
		}
		if a := r.String("agent"); agent != "" && a != "" && a != agent {
			return nil, Usagef("stdin line %d is a record of agent %q, not %q", l.N, a, agent)
		}
		v := ""
		for _, f := range fields {
			if v = r.String(f); v != "" {
				break
			}
		}
		if v == "" {
			return nil, Usagef("stdin line %d is a record with no %s", l.N, strings.Join(fields, " or "))
		}
		add(v)
	}
}
