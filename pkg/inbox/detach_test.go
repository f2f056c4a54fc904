package inbox

import (
	"slices"
	"testing"
)

// TestDetachSettle: an inbox detached for its agent's removal and left so
// by a crash is named at the next Open, and settles either way: dropped
// with an agent that is gone, back whole with one that is still there;
// the ids of a dropped inbox are never given again.
func TestDetachSettle(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"gone", "kept", "gone", "kept"} {
		if _, err := s.Send(Message{To: to, Text: "for " + to}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := s.Send(Message{To: "gone", Text: "last"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"gone", "kept"} {
		if err := s.Detach(a); err != nil {
			t.Fatal(err)
		}
		if n := len(s.List(a, "", false)); n != 0 {
			t.Fatalf("%s: %d messages listed once detached", a, n)
		}
	}
	// A message sent while "other" is being removed goes with it.
	if _, err := s.Send(Message{To: "other", Text: "before"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Detach("other"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(Message{To: "other", Text: "meanwhile"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle("other", true); err != nil {
		t.Fatal(err)
	}
	if n := len(s.List("other", "", false)); n != 0 {
		t.Fatalf("a removed agent keeps %d messages sent during its removal", n)
	}
	s.Close() // the crash
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := s.Detached(); !slices.Equal(d, []string{"gone", "kept"}) {
		t.Fatalf("Detached() = %v", d)
	}
	if err := s.Settle("gone", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle("kept", false); err != nil {
		t.Fatal(err)
	}
	if d := s.Detached(); len(d) != 0 {
		t.Fatalf("Detached() = %v after settling", d)
	}
	if n := len(s.List("gone", "", false)); n != 0 {
		t.Fatalf("the removed agent's inbox holds %d messages", n)
	}
	if ms := s.List("kept", "", false); len(ms) != 2 || ms[0].Text != "for kept" {
		t.Fatalf("the kept inbox came back as %+v", ms)
	}
	m, err := s.Send(Message{To: "gone", Text: "new life"})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID <= last.ID {
		t.Fatalf("id %s given again after the dropped inbox's %s", m.ID, last.ID)
	}
	if ms := s.List("gone", "", false); len(ms) != 1 {
		t.Fatalf("a new inbox of the name holds %d messages, want 1", len(ms))
	}
}
