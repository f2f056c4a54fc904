package inbox

import (
	"testing"
	"time"

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
