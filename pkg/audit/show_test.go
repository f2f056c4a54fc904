package audit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
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

func code(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestShow(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	appendSync(t, l, 3, 3)
	all := func(*Info) bool { return true }
	if line, err := l.Show(2, 7, all); err != nil || LineSeq(line) != 2 {
		t.Fatalf("entry 2: %s %v", line, err)
	}
	if _, err := l.Show(0, 7, all); code(err) != proto.EINVAL {
		t.Fatalf("entry 0: %v", err)
	}
	if _, err := l.Show(4, 7, all); code(err) != proto.ENOENT || !strings.Contains(err.Error(), "the log ends at 3") {
		t.Fatalf("past the end: %v", err)
	}
	var seen uint64
	_, err := l.Show(2, 7, func(in *Info) bool { seen = in.Seq; return false })
	if code(err) != proto.ENOENT || !strings.Contains(err.Error(), "visible to uid 7") || seen != 2 {
		t.Fatalf("not visible: %v (asked about %d)", err, seen)
	}
}

func TestSyncedHeadAndVerify(t *testing.T) {
	l := open(t, t.TempDir(), Options{})
	defer l.Close()
	appendSync(t, l, 2, 2)
	if err := l.Append(entries(2, 1)); err != nil {
		t.Fatal(err)
	}
	h, err := l.SyncedHead()
	if err != nil || h.Type != proto.RecordAuditHead || h.Seq != 3 || h.Hash == "" {
		t.Fatalf("%+v %v", h, err)
	}
	if seq, hash := l.Head(); seq != 3 || hash != h.Hash {
		t.Fatalf("the head is not durable: %d %s", seq, hash)
	}
	rep, err := l.VerifySynced("oxiosd")
	if err != nil || rep != mustVerify(t, l.dir).Record("oxiosd") {
		t.Fatalf("%+v %v", rep, err)
	}
}
