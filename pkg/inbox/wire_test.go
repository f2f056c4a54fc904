package inbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

func TestWireRecordsTargetsAndArgs(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		m, err := s.Send(Message{To: "b", Text: text, Sender: "uid=0 (root)"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	if err := s.Ack("b", ids[0]); err != nil {
		t.Fatal(err)
	}
	var got []proto.MsgRecord
	collect := func(r *proto.MsgRecord) error { got = append(got, *r); return nil }
	if err := s.Records(proto.MsgListArgs{Agent: "b", Max: 2}, collect); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != proto.RecordMsg || got[0].Agent != "b" || !got[0].Read || got[1].Text != "two" || got[1].Read || got[1].Sender != "uid=0 (root)" {
		t.Fatalf("%+v", got)
	}
	got = nil
	if err := s.Records(proto.MsgListArgs{Agent: "b", Unread: true, After: ids[1]}, collect); err != nil || len(got) != 1 || got[0].ID != ids[2] {
		t.Fatalf("%+v %v", got, err)
	}
	if err := s.Records(proto.MsgListArgs{Agent: "b", After: "x"}, collect); err == nil || err.(*proto.Error).Code != proto.EINVAL {
		t.Fatal(err)
	}

	if got := Target("b", "", ""); got != "b:msg from operator" {
		t.Fatal(got)
	}
	if got := Target("b", "a", ids[0]); got != "b:msg from a "+ids[0] {
		t.Fatal(got)
	}

	o, perr := RecvArgs(proto.MsgListArgs{After: ids[0], Max: 3, Peek: true, Wait: "30s"})
	if perr != nil || o != (RecvOptions{After: ids[0], Max: 3, Peek: true, Wait: 30 * time.Second}) {
		t.Fatalf("%+v %v", o, perr)
	}
	if _, perr := RecvArgs(proto.MsgListArgs{Wait: "-1s"}); perr == nil || perr.Message != `wait "-1s": want a duration such as 30s` {
		t.Fatal(perr)
	}
	if _, perr := RecvArgs(proto.MsgListArgs{Max: -1}); perr == nil || perr.Code != proto.EINVAL {
		t.Fatal(perr)
	}
}

func TestSenderAndDeliver(t *testing.T) {
	if from, err := Sender(proto.MsgSendArgs{From: "x"}, "", ""); err != nil || from != "x" {
		t.Fatal(from, err)
	}
	if from, err := Sender(proto.MsgSendArgs{}, "a", "r1"); err != nil || from != "a" {
		t.Fatal(from, err)
	}
	if from, err := Sender(proto.MsgSendArgs{From: "b"}, "a", "r1"); err == nil || err.Code != proto.EPERM || from != "b" {
		t.Fatal(from, err)
	}
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	who := audit.Actor{UID: 1000, Agent: "a", Run: "r1"}
	var e *audit.Entry
	var event, agent, key string
	record := func(ctx context.Context, got *audit.Entry, ev, ag, k string, data any) error {
		e, event, agent, key = got, ev, ag, k
		if data.(*proto.MsgRecord).Text != "hi" {
			t.Errorf("data %+v", data)
		}
		return nil
	}
	rec, refused, err := s.Deliver(context.Background(), Message{From: "a", To: "b", Text: "hi"}, who, "dg", record)
	if err != nil || refused != nil || rec.ID == "" || rec.Agent != "b" {
		t.Fatalf("%+v %v %v", rec, refused, err)
	}
	if *e != (audit.Entry{Actor: who, Op: proto.OpMsgSend, Target: "b:msg from a " + rec.ID, Args: "dg", Result: "ok"}) ||
		event != proto.EventMsgSent || agent != "b" || key != rec.ID {
		t.Fatalf("%+v %q %q %q", e, event, agent, key)
	}
	if _, err := s.Get("b", rec.ID); err != nil {
		t.Fatal("not in the inbox:", err)
	}
	stop := errors.New("stopping")
	if _, _, err := s.Deliver(context.Background(), Message{To: "b", Text: "x"}, who, "dg", func(context.Context, *audit.Entry, string, string, string, any) error { return stop }); err != stop {
		t.Fatal(err)
	}
}

func TestReceive(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := s.Send(Message{To: "b", Text: "one"})
	if err != nil {
		t.Fatal(err)
	}
	var got []proto.MsgRecord
	collect := func(r *proto.MsgRecord) error { got = append(got, *r); return nil }
	if err := s.Receive(context.Background(), proto.MsgListArgs{Agent: "b", Wait: "soon"}, collect); err == nil {
		t.Fatal("a bad wait was taken")
	}
	if err := s.Receive(context.Background(), proto.MsgListArgs{Agent: "b"}, collect); err != nil || len(got) != 1 || got[0].ID != m.ID || got[0].Text != "one" {
		t.Fatalf("%+v %v", got, err)
	}
	got = nil
	if err := s.Receive(context.Background(), proto.MsgListArgs{Agent: "b"}, collect); err != nil || len(got) != 0 {
		t.Fatalf("received twice: %+v %v", got, err)
	}
}
