package inbox

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// An inbox holds at most its quota: received messages are dropped,
// oldest first, down to half of it; unread ones never, so a send past an
// inbox full of them is refused, and nothing is lost; all of it holds
// across a reopen.
func TestQuota(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const quota = 20000
	s.Quota = func(agent string) int64 {
		if agent == "b" {
			return quota
		}
		return 0
	}
	text := strings.Repeat("x", 1000)
	var sent []string
	send := func() error {
		m, err := s.Send(Message{From: "a", To: "b", Text: text})
		if err == nil {
			sent = append(sent, m.ID)
		}
		return err
	}
	// Unread: the inbox fills, then refuses.
	for send() == nil {
	}
	if err := send(); !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "ox-msg recv -a b") {
		t.Fatalf("past the quota: %v", err)
	}
	full := len(sent)
	if full < 10 || full > 20 {
		t.Fatalf("%d messages of 1000 bytes in a quota of %d", full, quota)
	}
	if fi, _ := os.Stat(s.path("b")); fi.Size() > quota {
		t.Fatalf("inbox file %d bytes, quota %d", fi.Size(), quota)
	}
	// Too big for the inbox at all.
	if _, err := s.Send(Message{To: "b", Text: strings.Repeat("y", quota)}); !errors.Is(err, ErrFull) {
		t.Fatalf("a message bigger than the quota: %v", err)
	}
	// No quota for another agent.
	for range 30 {
		if _, err := s.Send(Message{To: "c", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	// Received: the next send drops the oldest received ones, down to
	// half the quota, and keeps the rest.
	if err := s.Ack("b", sent[:full-2]...); err != nil {
		t.Fatal(err)
	}
	if err := send(); err != nil {
		t.Fatalf("after receiving: %v", err)
	}
	ids := s.IDs("b", "")
	if len(ids) >= full || ids[len(ids)-1] != sent[len(sent)-1] || ids[0] == sent[0] {
		t.Fatalf("kept %v of %v", ids, sent)
	}
	for _, id := range sent[full-2:] { // the two unread and the new one
		if _, err := s.Get("b", id); err != nil {
			t.Fatalf("unread %s dropped: %v", id, err)
		}
	}
	fi, _ := os.Stat(s.path("b"))
	if fi.Size() > quota/2+2000 {
		t.Fatalf("inbox file %d bytes after dropping, want about half of %d", fi.Size(), quota)
	}
	// As it was, after a reopen: the same messages, the same read marks,
	// and the ids go on.
	unread := s.Unread("b")
	s.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.IDs("b", ""); strings.Join(got, ",") != strings.Join(ids, ",") || s.Unread("b") != unread || unread != 3 {
		t.Fatalf("reopened: %v (%d unread), want %v (%d)", got, s.Unread("b"), ids, unread)
	}
	if len(s.IDs("c", "")) != 30 {
		t.Fatal("another inbox changed")
	}
	m, err := s.Send(Message{To: "c", Text: "next"})
	if err != nil || m.ID <= sent[len(sent)-1] {
		t.Fatalf("id after reopen: %s %v", m.ID, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("left %s", e.Name())
		}
	}
}
