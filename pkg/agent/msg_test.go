package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// msgKernel is memKernel with an inbox.
type msgKernel struct {
	memKernel
	sent  []proto.MsgSendArgs
	inbox []proto.MsgRecord
	waits []time.Duration
}

func (k *msgKernel) MsgSend(_ context.Context, a proto.MsgSendArgs) (proto.MsgRecord, error) {
	if a.To == "eve" {
		return proto.MsgRecord{}, proto.Errorf(proto.EPERM, "eve: messages from a are not accepted (policy rule msg.accept)")
	}
	k.sent = append(k.sent, a)
	return proto.MsgRecord{ID: "m0000000007", Agent: a.To, Text: a.Text}, nil
}

func (k *msgKernel) MsgRecv(_ context.Context, max int, wait time.Duration) ([]proto.MsgRecord, error) {
	k.waits = append(k.waits, wait)
	out := k.inbox
	k.inbox = nil
	return out, nil
}

func TestRunnerMessageTools(t *testing.T) {
	k := &msgKernel{memKernel: memKernel{state: map[string][]byte{}}}
	k.inbox = []proto.MsgRecord{{ID: "m0000000003", From: "ops", Agent: "a", Text: "please check the disk"}}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "work", Recall: -1},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "msg_wait", Arguments: `{"seconds":5000}`}}},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "msg_send", Arguments: `{"to":"ops","text":"disk is fine","reply_to":"m0000000003"}`}}},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "msg_send", Arguments: `{"to":"eve","text":"psst"}`}}},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "msg_read", Arguments: `{}`}}},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "finish", Arguments: `{"summary":"answered ops"}`}}})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(k.sent) != 1 || k.sent[0].To != "ops" || k.sent[0].ReplyTo != "m0000000003" {
		t.Fatalf("sent: %+v", k.sent)
	}
	// The wait is bounded; a read does not wait.
	if len(k.waits) != 2 || k.waits[0] != 10*time.Minute || k.waits[1] != 0 {
		t.Fatalf("waits: %v", k.waits)
	}
	txt := s.Requests()[len(s.Requests())-1].Text()
	for _, want := range []string{"please check the disk", "sent m0000000007 to ops", "msg.accept", "no unread messages"} {
		if !strings.Contains(txt, want) {
			t.Errorf("conversation lacks %q:\n%s", want, txt)
		}
	}
}

func TestRunnerNoMessageToolsWithoutMessenger(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "x", Recall: -1},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "finish", Arguments: `{"summary":"done"}`}}})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tl := range s.Requests()[0].Body.Tools {
		if strings.HasPrefix(tl.Function.Name, "msg_") {
			t.Errorf("message tool %s offered by a kernel without messages", tl.Function.Name)
		}
	}
}
