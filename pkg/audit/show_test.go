package audit

import (
	"context"
	"strings"
	"testing"
)

func TestLineAndExportLines(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	appendSync(t, l, 3, 3)
	line, err := l.Line(2)
	if err != nil || LineSeq(line) != 2 || !strings.Contains(string(line), "day-1.md") {
		t.Fatalf("entry 2: %s %v", line, err)
	}
	if line, err := l.Line(4); line != nil || err != nil {
		t.Fatalf("past the end: %s %v", line, err)
	}
	if err := l.Append(entries(3, 1)); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := l.ExportLines(context.Background(), func(b []byte) error { got = append(got, string(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	// Four entries (the last made durable by the export) and the head.
	if len(got) != 5 || LineSeq([]byte(got[3])) != 4 || !strings.Contains(got[4], `"type":"audit_head"`) {
		t.Fatalf("export: %q", got)
	}
}
