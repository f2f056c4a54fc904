package cliutil

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/oxios/oxios/pkg/proto"
)

// RunStream prints the records of a run as they come (ox-spawn,
// ox-attach): each as a JSON line, or on a terminal as readable text,
// the run's output on stdout and stderr and the rest on stderr. It
// remembers the exit record.
type RunStream struct {
	JSON bool
	// Quiet shows only the answers on a terminal; Verbose the system
	// prompts and recalled memories too.
	Quiet, Verbose bool
	// Deltas passes delta records on as JSON too (they are left out off
	// a terminal: the message record after them holds the whole answer).
	Deltas bool
	// Chat: the run is a chat (ox-spawn -i), whose user typed its
	// messages: on a terminal they are not shown again.
	Chat bool
	out  *bufio.Writer
	Exit *proto.ExitRecord
	Run  string
	// streamed: deltas of an answer were printed; midline: the last
	// did not end its line.
	streamed, midline bool
}

// NewRunStream prints to stdout: JSON unless stdout is a terminal and
// asJSON is false.
func NewRunStream(asJSON bool) *RunStream {
	return &RunStream{JSON: asJSON || !IsTerminal(os.Stdout), out: bufio.NewWriter(os.Stdout)}
}

// Record prints one record (one JSON object).
func (s *RunStream) Record(b json.RawMessage) error {
	var head struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	json.Unmarshal(b, &head)
	switch head.Type {
	case proto.RecordRun:
		if s.Run == "" {
			s.Run = head.ID
		}
	case proto.RecordExit:
		var ex proto.ExitRecord
		if err := json.Unmarshal(b, &ex); err == nil {
			s.Exit = &ex
		}
	}
	if s.JSON {
		if head.Type == proto.RecordDelta && !s.Deltas && !s.Verbose {
			return nil
		}
		s.out.Write(b)
		s.out.WriteByte('\n')
		return s.out.Flush()
	}
	s.text(head.Type, b)
	return s.out.Flush()
}

func (s *RunStream) text(typ string, b []byte) {
	var r map[string]any
	json.Unmarshal(b, &r)
	str := func(k string) string { v, _ := r[k].(string); return v }
	note := func(format string, args ...any) {
		if s.Quiet {
			return
		}
		s.endLine()
		note(format, args...)
	}
	if typ != proto.RecordDelta && typ != proto.RecordMessage {
		s.streamed = false
	}
	switch typ {
	case proto.RecordDelta:
		t := str("text")
		s.out.WriteString(t)
		s.streamed = true
		s.midline = !strings.HasSuffix(t, "\n")
		return
	case proto.RecordOutput:
		if str("stream") == "stderr" {
			s.out.Flush()
			fmt.Fprintln(os.Stderr, str("text"))
			return
		}
		fmt.Fprintln(s.out, str("text"))
	case proto.RecordMessage:
		role := str("role")
		switch {
		case role == "assistant" || role == "":
			if s.streamed {
				// Its deltas showed it already.
				s.endLine()
				s.streamed = false
				return
			}
			fmt.Fprintln(s.out, str("text"))
		case role == "system" && !s.Verbose:
			// The prompt is the same each run: --verbose shows it.
		case role == "user" && s.Chat:
			// Typed on this terminal.
		default:
			note("%s: %s", role, str("text"))
		}
	case proto.RecordTurn:
		// A chat waits for its next message: the prompt says so.
	case proto.RecordRun:
		pid, _ := r["pid"].(float64)
		note("run %s started (agent %s, pid %d)", str("id"), str("agent"), int(pid))
	case proto.RecordExit:
		note("run %s: %s", str("run"), str("text"))
	case proto.RecordToolCall:
		args, _ := json.Marshal(r["arguments"])
		if a, ok := r["arguments"].(string); ok {
			args = []byte(a)
		}
		note("-> %s %s", str("name"), oneLine(string(args), 200))
	case proto.RecordToolResult:
		t := str("text")
		if t == "" {
			t = str("error")
		}
		note("<- %s %s", str("name"), oneLine(t, 200))
	default:
		if t := str("text"); t != "" {
			note("%s: %s", typ, oneLine(t, 200))
		}
	}
}

// endLine ends a line the deltas left open, before a note.
func (s *RunStream) endLine() {
	if s.midline {
		s.out.WriteByte('\n')
		s.midline = false
	}
	s.out.Flush()
}

func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "["+format+"]\n", args...)
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// ExitCode is the exit status a command following a run exits with: the
// run's (0, 1, 128+N), or 1 if the stream ended without an exit record.
func (s *RunStream) ExitCode() error {
	if s.Exit == nil {
		return Failf("the stream of run %s ended before its exit record (did oxiosd stop?)", s.Run)
	}
	if s.Exit.Status != 0 {
		return Silent(s.Exit.Status)
	}
	return nil
}

// ReadInput reads what a command's stdin holds when it is a pipe or a
// file (not a terminal, and not /dev/null or another device), up to max
// bytes: the input of a run.
func ReadInput(max int) (string, error) {
	fi, err := os.Stdin.Stat()
	if err != nil || fi.Mode()&(os.ModeNamedPipe) == 0 && !fi.Mode().IsRegular() {
		return "", nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, int64(max)+1))
	if err != nil {
		return "", Failf("stdin: %v", err)
	}
	if len(b) > max {
		return "", Usagef("stdin holds more than %d bytes, the most a run's input may be", max)
	}
	return string(b), nil
}
