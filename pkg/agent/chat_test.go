package agent

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestTurnReader: a chat's messages, one a line: text, a message record
// (whatever lines its text holds), several lines between !multi and !end;
// a first context record is the context; empty lines are skipped, and
// exit ends the chat as the end of the input does.
func TestTurnReader(t *testing.T) {
	in := `{"type":"context","text":"Fragment a.txt:\nsda1"}` + "\n" +
		"first\n\n" + string(MessageLine("two\nlines")) + "!multi\nthree\n\nlines\n!end\n{not json\nexit\nafter\n"
	tr := NewTurnReader(strings.NewReader(in))
	if err := tr.ReadContext(); err != nil || tr.Context != "Fragment a.txt:\nsda1" {
		t.Fatalf("context %q, %v", tr.Context, err)
	}
	var got []string
	for {
		m, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	want := []string{"first", "two\nlines", "three\n\nlines", "{not json"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("messages %q, want %q", got, want)
	}
	// No context record: the first line is the first message.
	tr = NewTurnReader(strings.NewReader("hello"))
	if err := tr.ReadContext(); err != nil || tr.Context != "" {
		t.Fatalf("context %q, %v", tr.Context, err)
	}
	if m, err := tr.Next(); m != "hello" || err != nil {
		t.Fatalf("%q, %v", m, err)
	}
	tr = NewTurnReader(strings.NewReader(`{"type":"message","text":"x"}` + "\n"))
	tr.ReadContext()
	if m, err := tr.Next(); m != "x" || err != nil {
		t.Fatalf("a message record first: %q, %v", m, err)
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last: %v", err)
	}
}
