package inbox

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSendListAckReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m1, err := s.Send(Message{From: "a", To: "b", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	m2, err := s.Send(Message{From: "c", To: "b", Text: "re", ReplyTo: m1.ID, Records: []json.RawMessage{json.RawMessage(`{"type":"memory","text":"x"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(Message{To: "a", Text: "to a"}); err != nil {
		t.Fatal(err)
	}
	if ids := s.IDs("b", ""); len(ids) != 2 || ids[0] != m1.ID || ids[1] != m2.ID {
		t.Fatal(ids)
	}
	if ids := s.IDs("b", m1.ID); len(ids) != 1 || ids[0] != m2.ID {
		t.Fatal(ids)
	}
	if ids := s.IDs("nobody", ""); len(ids) != 0 {
		t.Fatal(ids)
	}
	if !(m1.ID < m2.ID) || m1.Time.IsZero() {
		t.Fatalf("ids %s %s", m1.ID, m2.ID)
	}
	if got := s.List("b", "", true); len(got) != 2 || got[0].Text != "hello" || got[1].ReplyTo != m1.ID || len(got[1].Records) != 1 {
		t.Fatalf("list: %+v", got)
	}
	if err := s.Ack("b", m1.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack("b", "m9999"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ack of an unknown id: %v", err)
	}
	// Not closed: what a kill -9 leaves. Everything acknowledged is on disk.
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	un := s2.List("b", "", true)
	if len(un) != 1 || un[0].ID != m2.ID {
		t.Fatalf("unread after reopen: %+v", un)
	}
	if all := s2.List("b", "", false); len(all) != 2 || !all[0].Read {
		t.Fatalf("all after reopen: %+v", all)
	}
	if after := s2.List("b", m1.ID, false); len(after) != 1 || after[0].ID != m2.ID {
		t.Fatalf("after %s: %+v", m1.ID, after)
	}
	// The sequence goes on after a reopen: ids stay ordered.
	m4, err := s2.Send(Message{To: "b", Text: "later"})
	if err != nil || m4.ID <= m2.ID {
		t.Fatalf("id after reopen: %s (last %s) %v", m4.ID, m2.ID, err)
	}
	if g, err := s2.Get("b", m2.ID); err != nil || g.From != "c" {
		t.Fatalf("get: %+v %v", g, err)
	}
	if s2.Unread("b") != 2 || s2.Unread("nobody") != 0 {
		t.Fatalf("unread %d", s2.Unread("b"))
	}
	s.Close()
}

func TestTornLineAndBadInput(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Send(Message{To: "b", Text: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// A crash inside a write: half a line at the end.
	f, err := os.OpenFile(filepath.Join(dir, "b.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"msg":{"id":"m0000000002","to":"b","te`)
	f.Close()
	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.List("b", "", false); len(got) != 1 || got[0].ID != m.ID {
		t.Fatalf("after a torn line: %+v", got)
	}
	m2, err := s.Send(Message{To: "b", Text: "next"})
	if err != nil || m2.ID != "m0000000002" {
		t.Fatalf("send after torn: %+v %v", m2, err)
	}
	for _, bad := range []Message{
		{To: "../x", Text: "t"}, {To: "", Text: "t"}, {To: "a/b", Text: "t"},
		{To: "b", Text: "t", ReplyTo: "nope"},
		{To: "b", Records: []json.RawMessage{json.RawMessage(`[1]`)}},
		{To: "b", Records: []json.RawMessage{json.RawMessage(`{"a":`)}},
		{To: "b", Text: string(make([]byte, MaxText+1))},
	} {
		if _, err := s.Send(bad); err == nil {
			t.Errorf("send %+v accepted", bad.To)
		}
	}
	if len(s.List("b", "", false)) != 2 {
		t.Fatal("a refused send left a message")
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "x.jsonl")); err == nil {
		t.Fatal("a file outside the inbox folder")
	}
}

func TestWait(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Wait(ctx, "b", "", true)
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("woke with an empty inbox: %v", err)
	default:
	}
	m, _ := s.Send(Message{To: "b", Text: "wake"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Waiting after the last message blocks until the next.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx, "b", m.ID, false); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait after the last: %v", err)
	}
	if err := s.Remove("b"); err != nil || len(s.List("b", "", false)) != 0 {
		t.Fatalf("remove: %v", err)
	}
}
