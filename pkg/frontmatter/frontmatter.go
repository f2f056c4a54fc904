// Package frontmatter reads the front matter that opens a memory's file
// and a message's: a line "---", lines "key: value", a line "---", then
// the text. It is the one scanner of the memory files (package memory),
// and of what a client writes into a memory folder or an inbox of the
// mount (package fs); each says which keys it takes, and how strictly.
package frontmatter

import (
	"bytes"
	"fmt"
	"strings"
)

// Unclosed is the error of a front matter without its closing "---":
// Line is the line where one was looked for, past the end.
type Unclosed struct{ Line int }

func (e *Unclosed) Error() string {
	return fmt.Sprintf("line %d: front matter not closed by \"---\"", e.Line)
}

// Scan reads the front matter that opens b. each gets every line of it
// (without its newline) and its number in b, the first being 2; an error
// of each ends the scan. text is what follows the front matter; opened
// is false when b does not open with "---\n", and then text is b and
// each is not called. A front matter not closed is an *Unclosed.
func Scan(b []byte, each func(line int, l string) error) (text []byte, opened bool, err error) {
	rest, ok := bytes.CutPrefix(b, []byte("---\n"))
	if !ok {
		return b, false, nil
	}
	for line := 2; ; line++ {
		l, after, found := bytes.Cut(rest, []byte("\n"))
		if !found {
			return nil, true, &Unclosed{Line: line}
		}
		rest = after
		if string(l) == "---" {
			return rest, true, nil
		}
		if err := each(line, string(l)); err != nil {
			return nil, true, err
		}
	}
}

// Field splits a line "key: value" as a person may write it: around the
// first colon, the spaces around key and value trimmed.
func Field(l string) (key, value string, ok bool) {
	k, v, ok := strings.Cut(l, ":")
	return strings.TrimSpace(k), strings.TrimSpace(v), ok
}
