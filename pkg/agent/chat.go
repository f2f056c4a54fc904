package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/oxios/oxios/pkg/proto"
)

// A chat (ox-spawn -i, ox-agent -i) is one run that answers message after
// message in one conversation: the runner asks Config.Next for each
// message after the first, and a TurnReader reads them, one a line, from
// a terminal, a pipe or the run's stdin that ox-spawn writes.

// MaxMessage bounds one message of a chat (bytes).
const MaxMessage = 1 << 20

// TurnReader reads the messages of a chat, one a line: a line of text, or
// a JSON message record (how ox-spawn hands a message, whatever its
// lines), or, first, a context record (how oxiosd hands a chat run its
// input). Empty lines are skipped; "exit" or "quit" alone on a line ends
// the chat as the end of the input does; "!multi" starts a message of
// several lines, which "!end" ends.
type TurnReader struct {
	r *bufio.Reader
	// Prompt, if set, is called before each line is read, with whether
	// the line goes on a message of several lines (a terminal's prompt).
	Prompt func(more bool)
	// Context is the text of a context record read first, if any.
	Context string
	lines   int
	// A line read ahead (ReadContext), which the next read returns.
	ahead   string
	isAhead bool
}

// NewTurnReader reads the messages of a chat from r.
func NewTurnReader(r io.Reader) *TurnReader {
	return &TurnReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next message, or io.EOF when the chat is over.
func (t *TurnReader) Next() (string, error) {
	var multi []string
	inMulti := false
	for {
		if t.Prompt != nil {
			t.Prompt(inMulti)
		}
		line, err := t.line()
		if err != nil {
			if errors.Is(err, io.EOF) && inMulti && len(multi) > 0 {
				return strings.Join(multi, "\n"), nil
			}
			return "", err
		}
		t.lines++
		if inMulti {
			if strings.TrimSpace(line) == "!end" {
				if text := strings.Join(multi, "\n"); strings.TrimSpace(text) != "" {
					return text, nil
				}
				inMulti, multi = false, nil
				continue
			}
			multi = append(multi, line)
			continue
		}
		if strings.HasPrefix(line, "{") {
			var rec struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil {
				switch {
				case rec.Type == proto.RecordContext && t.lines == 1:
					t.Context = rec.Text
					continue
				case rec.Type == proto.RecordMessage:
					if strings.TrimSpace(rec.Text) == "" {
						continue
					}
					return rec.Text, nil
				}
			}
		}
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "exit", "quit":
			return "", io.EOF
		case "!multi":
			inMulti = true
			continue
		}
		return line, nil
	}
}

// ReadContext reads the first line if it is a context record, and keeps
// any other line as the first that Next reads.
func (t *TurnReader) ReadContext() error {
	if b, err := t.r.Peek(1); err != nil || b[0] != '{' {
		return nil
	}
	line, err := t.line()
	if err != nil {
		return err
	}
	var rec proto.ContextRecord
	if json.Unmarshal([]byte(line), &rec) == nil && rec.Type == proto.RecordContext {
		t.Context, t.lines = rec.Text, 1
		return nil
	}
	t.ahead, t.isAhead = line, true
	return nil
}

// line reads one line, without its newline; a line longer than
// MaxMessage is an error.
func (t *TurnReader) line() (string, error) {
	if t.isAhead {
		t.isAhead = false
		return t.ahead, nil
	}
	var b []byte
	for {
		part, err := t.r.ReadSlice('\n')
		b = append(b, part...)
		if len(b) > MaxMessage+1 {
			return "", fmt.Errorf("a message of more than %d bytes", MaxMessage)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (!errors.Is(err, io.EOF) || len(b) == 0) {
			return "", err
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
}

// MessageLine is how a front end hands a chat run one message: a JSON
// message record and its newline, whatever lines the text holds.
func MessageLine(text string) []byte {
	b, _ := json.Marshal(struct {
		Type string `json:"type"`
		Role string `json:"role"`
		Text string `json:"text"`
	}{proto.RecordMessage, "user", text})
	return append(b, '\n')
}
