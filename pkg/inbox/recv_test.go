package inbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRecv(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, text := range []string{"one", "two", "three"} {
		if _, err := s.Send(Message{From: "a", To: "b", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	take := func(m Message) error { got = append(got, m.Text); return nil }
	ctx := context.Background()
	// Peek leaves them unread; Max stops.
	if err := s.Recv(ctx, "b", RecvOptions{Peek: true, Max: 2}, take); err != nil || len(got) != 2 || s.Unread("b") != 3 {
		t.Fatal(got, err, s.Unread("b"))
	}
	got = nil
	if err := s.Recv(ctx, "b", RecvOptions{}, take); err != nil || len(got) != 3 || s.Unread("b") != 0 {
		t.Fatal(got, err, s.Unread("b"))
	}
	// Nothing unread: no wait returns at once, a wait runs out with nil.
	got = nil
	start := time.Now()
	if err := s.Recv(ctx, "b", RecvOptions{Wait: 50 * time.Millisecond}, take); err != nil || len(got) != 0 || time.Since(start) < 50*time.Millisecond {
		t.Fatal(got, err)
	}
	// A wait ends with the first message sent meanwhile.
	go func() {
		time.Sleep(20 * time.Millisecond)
		s.Send(Message{From: "a", To: "b", Text: "four"})
	}()
	if err := s.Recv(ctx, "b", RecvOptions{Wait: 10 * time.Second}, take); err != nil || len(got) != 1 || got[0] != "four" {
		t.Fatal(got, err)
	}
	// Following ends with ctx, with its error; emit's error is returned.
	fctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.Recv(fctx, "b", RecvOptions{Follow: true}, take); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	s.Send(Message{From: "a", To: "b", Text: "five"})
	boom := errors.New("boom")
	if err := s.Recv(ctx, "b", RecvOptions{}, func(Message) error { return boom }); err != boom || s.Unread("b") != 1 {
		t.Fatal(err)
	}
}
