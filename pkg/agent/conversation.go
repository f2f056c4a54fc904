package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/proto"
)

// Conversations: a run's conversation is kept in its agent's state under
// conversations/RUN (so it is versioned, listed with `ox-state list
// conversations/` and removed with `ox-state rm`), and a later run may
// continue it (ox-spawn --continue).

// ConversationPrefix is where an agent's conversations are kept.
const ConversationPrefix = "conversations/"

// maxConversation bounds a kept conversation (bytes of JSON); the oldest
// turns go first.
const maxConversation = 1 << 20

// Conversation is what is kept of a run's conversation.
type Conversation struct {
	Run      string                         `json:"run"`
	Agent    string                         `json:"agent"`
	Model    string                         `json:"model,omitempty"`
	Persona  string                         `json:"persona,omitempty"`
	Saved    time.Time                      `json:"saved"`
	Messages []openai.ChatCompletionMessage `json:"messages"`
}

// LoadConversation returns conversation id of the agent, or its latest
// when id is "".
func LoadConversation(ctx context.Context, k Kernel, id string) (*Conversation, error) {
	if id == "" {
		recs, err := k.StateList(ctx, ConversationPrefix)
		var pe *proto.Error
		if err != nil && (!errors.As(err, &pe) || pe.Code != proto.ENOENT) {
			return nil, err
		}
		// An agent with no state at all (-a fresh -c) has no conversation
		// either: that is what to say, not "no agent".
		var last proto.StateRecord
		for _, r := range recs {
			if last.Key == "" || r.Modified.After(last.Modified) {
				last = r
			}
		}
		if last.Key == "" {
			return nil, proto.Errorf(proto.ENOENT, "no conversation to continue: this agent has none kept yet (a run keeps its conversation unless --no-keep)")
		}
		id = strings.TrimPrefix(last.Key, ConversationPrefix)
	}
	if strings.ContainsAny(id, "/ \t\n") || id == "" {
		return nil, proto.Errorf(proto.EINVAL, "conversation %q: want a run id such as r-12", id)
	}
	b, err := k.StateLoad(ctx, ConversationPrefix+id)
	if err != nil {
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code == proto.ENOENT {
			return nil, proto.Errorf(proto.ENOENT, "no conversation %q (ox-state ls -a AGENT %s lists them)", id, ConversationPrefix)
		}
		return nil, err
	}
	c := &Conversation{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, proto.Errorf(proto.EINVAL, "conversation %q is not one ox-agent kept: %v", id, err)
	}
	return c, nil
}

// SaveConversation keeps msgs as the conversation of run.
func SaveConversation(ctx context.Context, k Kernel, c *Conversation) error {
	c.Messages = whole(c.Messages)
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if len(b) > maxConversation {
		// Drop the oldest turns until what is left fits: sized one
		// message at a time, marshalled once more at the end.
		over := len(b) - maxConversation
		for over > 0 {
			n, ok := dropOldest(c)
			if !ok {
				break
			}
			over -= n
		}
		if b, err = json.Marshal(c); err != nil {
			return err
		}
	}
	return k.StateSave(ctx, ConversationPrefix+c.Run, b)
}

// whole drops a last answer whose tool calls have no results (the run
// ended before they ran): an endpoint refuses such a conversation.
func whole(msgs []openai.ChatCompletionMessage) []openai.ChatCompletionMessage {
	if n := len(msgs); n > 0 && len(msgs[n-1].ToolCalls) > 0 {
		m := msgs[n-1]
		m.ToolCalls = nil
		if m.Content == "" {
			return msgs[:n-1]
		}
		return append(msgs[:n-1:n-1], m)
	}
	return msgs
}

// dropOldest removes the oldest turn after the first system prompts and
// task; it returns the bytes of JSON that took, and whether there was one.
func dropOldest(c *Conversation) (int, bool) {
	i := 0
	for i < len(c.Messages) && c.Messages[i].Role == openai.ChatMessageRoleSystem {
		i++
	}
	i++ // the first task
	if i >= len(c.Messages)-1 {
		return 0, false
	}
	j := i + 1
	for j < len(c.Messages) && c.Messages[j].Role == openai.ChatMessageRoleTool {
		j++
	}
	n := 0
	for _, m := range c.Messages[i:j] {
		b, _ := json.Marshal(m)
		n += len(b) + 1
	}
	c.Messages = append(c.Messages[:i], c.Messages[j:]...)
	return n, true
}

// Exchange is one message of the user in a kept conversation and what the
// model answered it (its texts, tool calls left out): what ox-agent logs
// shows and searches.
type Exchange struct {
	Run    string
	Model  string
	Saved  time.Time
	Prompt string
	Answer string
}

// Exchanges are the exchanges of c, in order. The context a run was handed
// goes with the message after it.
func (c *Conversation) Exchanges() []Exchange {
	var out []Exchange
	var context string
	for _, m := range c.Messages {
		switch m.Role {
		case openai.ChatMessageRoleUser:
			if strings.HasPrefix(m.Content, contextPrefix) {
				context = m.Content
				continue
			}
			prompt := m.Content
			if context != "" {
				prompt, context = context+"\n\n"+prompt, ""
			}
			out = append(out, Exchange{Run: c.Run, Model: c.Model, Saved: c.Saved, Prompt: prompt})
		case openai.ChatMessageRoleAssistant:
			if len(out) == 0 || strings.TrimSpace(m.Content) == "" {
				continue
			}
			e := &out[len(out)-1]
			if e.Answer != "" {
				e.Answer += "\n"
			}
			e.Answer += m.Content
		}
	}
	return out
}

// Matches reports whether the exchange holds every one of words, in its
// prompt or its answer, whatever their case.
func (e Exchange) Matches(words []string) bool {
	text := strings.ToLower(e.Prompt + "\n" + e.Answer)
	for _, w := range words {
		if !strings.Contains(text, strings.ToLower(w)) {
			return false
		}
	}
	return true
}

// Conversations returns the agent's kept conversations, the newest first.
// One that does not decode is skipped, and named in skipped.
func Conversations(ctx context.Context, k Kernel) (convs []*Conversation, skipped []string, err error) {
	recs, err := k.StateList(ctx, ConversationPrefix)
	var pe *proto.Error
	if err != nil && (!errors.As(err, &pe) || pe.Code != proto.ENOENT) {
		return nil, nil, err
	}
	for _, r := range recs {
		id := strings.TrimPrefix(r.Key, ConversationPrefix)
		c, err := LoadConversation(ctx, k, id)
		if err != nil {
			if errors.As(err, &pe) && (pe.Code == proto.EINVAL || pe.Code == proto.ENOENT) {
				skipped = append(skipped, r.Key)
				continue
			}
			return nil, nil, err
		}
		convs = append(convs, c)
	}
	slices.SortStableFunc(convs, func(a, b *Conversation) int { return b.Saved.Compare(a.Saved) })
	return convs, skipped, nil
}
