package cliutil

import (
	"bytes"
	"testing"
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	p := newPrinter(&b, false, []string{"KEY", "VALUE"})
	p.Flush()
	if b.String() != "KEY  VALUE\n" {
		t.Fatalf("an empty table: %q, want its header", b.String())
	}

	b.Reset()
	p = newPrinter(&b, false, []string{"KEY", "VALUE"})
	p.width = 16
	p.Print(nil, "a\tb\nc", "\x1b[31mred")
	p.Print(nil, "k", "a value much longer than the terminal")
	p.Flush()
	want := "KEY      VALUE\n" +
		`a\tb\nc  \x1b[3…` + "\n" +
		"k        a valu…\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}

	// Whole: nothing is cut, for a column that must be read in full.
	b.Reset()
	p = newPrinter(&b, false, []string{"ID", "WHAT"})
	p.width = 16
	p.Whole()
	p.Print(nil, "a1", "exec rm aaaaaaaaaaaaaaaaaaaa /etc")
	p.Flush()
	if want := "ID  WHAT\na1  exec rm aaaaaaaaaaaaaaaaaaaa /etc\n"; b.String() != want {
		t.Fatalf("whole table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"plain":       "plain",
		"héllo":       "héllo",
		"tab\there":   `tab\there`,
		"\x00bin\xff": `\x00bin\xff`,
		"bell\a":      `bell\a`,
		// Printable only: a bidirectional override, a zero-width space or
		// a no-break space would show other text than the cell holds.
		"x\u202egnp.exe": `x\u202egnp.exe`,
		"a\u200bb":       `a\u200bb`,
		"a\u00a0b":       `a\u00a0b`,
		"a b":            "a b",
	} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"two\nlines\twith a tab\n": "two\nlines\twith a tab\n",
		"\x1b]0;pwned\a\x1b[2J":    `\x1b]0;pwned\a\x1b[2J`,
		"ok\r\nx\u202ey":           "ok\\r\nx\\u202ey",
		"héllo\n\n":                "héllo\n\n",
		"bad\xffbyte":              `bad\xffbyte`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
