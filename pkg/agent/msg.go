package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/proto"
)

// Messenger is what a Kernel offers for messages between agents. The
// runner gives the model the message tools only when its kernel has it.
type Messenger interface {
	MsgSend(ctx context.Context, a proto.MsgSendArgs) (proto.MsgRecord, error)
	// MsgRecv returns the unread messages (marking them read), waiting
	// up to wait for a first one when there is none.
	MsgRecv(ctx context.Context, max int, wait time.Duration) ([]proto.MsgRecord, error)
}

// msgPrefix names the message tools: msg_send, msg_read, msg_wait.
const msgPrefix = "msg_"

// maxMsgWait bounds how long msg_wait holds a turn.
const maxMsgWait = 10 * time.Minute

var msgTools = []tool{
	{"msg_send", "Send a message to another agent (its inbox). Reply to a message by giving its id as reply_to.",
		`{"type":"object","properties":{"to":{"type":"string","description":"the agent's name"},"text":{"type":"string"},"reply_to":{"type":"string","description":"id of the message this answers"}},"required":["to","text"]}`},
	{"msg_read", "Read your unread messages (they are then marked read).",
		`{"type":"object","properties":{"max":{"type":"integer","minimum":1,"maximum":50}}}`},
	{"msg_wait", "Wait for a message to arrive (up to seconds), then read your unread messages.",
		`{"type":"object","properties":{"seconds":{"type":"integer","minimum":1,"maximum":600}},"required":["seconds"]}`},
}

// msgToolList returns the message tools if the kernel has messages.
func (r *Runner) msgToolList() []openai.Tool {
	if _, ok := r.k.(Messenger); !ok {
		return nil
	}
	out := make([]openai.Tool, len(msgTools))
	for i, t := range msgTools {
		out[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name: t.name, Description: t.desc, Parameters: json.RawMessage(t.params)}}
	}
	return out
}

// callMsg runs a message tool; ok is false for any other tool.
func (r *Runner) callMsg(ctx context.Context, tc openai.ToolCall) (out string, ok bool, err error) {
	if !strings.HasPrefix(tc.Function.Name, msgPrefix) {
		return "", false, nil
	}
	m, has := r.k.(Messenger)
	if !has {
		return "", false, nil
	}
	var a struct {
		To      string `json:"to"`
		Text    string `json:"text"`
		ReplyTo string `json:"reply_to"`
		Max     int    `json:"max"`
		Seconds int    `json:"seconds"`
	}
	args := strings.TrimSpace(tc.Function.Arguments)
	if args == "" {
		args = "{}"
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		return "", true, toolErrorf("%s: arguments are not JSON: %v", tc.Function.Name, err)
	}
	switch tc.Function.Name {
	case "msg_send":
		if a.To == "" || strings.TrimSpace(a.Text) == "" {
			return "", true, toolErrorf("msg_send needs to and text")
		}
		rec, err := m.MsgSend(ctx, proto.MsgSendArgs{To: a.To, Text: a.Text, ReplyTo: a.ReplyTo})
		if err != nil {
			return "", true, err
		}
		return fmt.Sprintf("sent %s to %s", rec.ID, rec.Agent), true, nil
	case "msg_read", "msg_wait":
		var wait time.Duration
		if tc.Function.Name == "msg_wait" {
			wait = min(time.Duration(max(a.Seconds, 1))*time.Second, maxMsgWait)
		}
		recs, err := m.MsgRecv(ctx, a.Max, wait)
		if err != nil {
			return "", true, err
		}
		if len(recs) == 0 {
			return "no unread messages", true, nil
		}
		b, err := json.Marshal(recs)
		if err != nil {
			return "", true, err
		}
		return string(b), true, nil
	}
	return "", true, toolErrorf("no tool %q", tc.Function.Name)
}

// MsgSend sends as the client's agent.
func (c *Client) MsgSend(ctx context.Context, a proto.MsgSendArgs) (proto.MsgRecord, error) {
	return c.C.MsgSend(ctx, a)
}

// MsgRecv receives the client's agent's unread messages.
func (c *Client) MsgRecv(ctx context.Context, max int, wait time.Duration) ([]proto.MsgRecord, error) {
	a := proto.MsgListArgs{Agent: c.Agent, Max: max}
	if wait > 0 {
		a.Wait = wait.String()
	}
	var out []proto.MsgRecord
	err := c.C.MsgRecv(ctx, a, func(m proto.MsgRecord) error {
		out = append(out, m)
		return nil
	})
	return out, err
}
