package audit

import (
	"strings"
	"testing"
)

// TestActorNode: the node a fleet call came from is in the entry's line,
// its hash, and what Peek reads back.
func TestActorNode(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]*Entry{{Actor: Actor{UID: 0, Node: "n2"}, Op: "run.spawn", Target: "payroll", Result: "EPERM"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	var line []byte
	var got *Entry
	if err := l.Scan(1, func(e *Entry, b []byte) error { got, line = e, append([]byte(nil), b...); return nil }); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if got == nil || got.Actor.Node != "n2" || !strings.Contains(string(line), `"actor":{"uid":0,"node":"n2"}`) {
		t.Fatalf("entry %+v, line %s", got, line)
	}
	if info, ok := Peek(line); !ok || info.Actor.Node != "n2" {
		t.Fatalf("peek: %+v %v", info, ok)
	}
	rep, err := Verify(dir)
	if err != nil || !rep.OK {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}
