package agent

import (
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/proto"
)

// Compaction: when the endpoint refuses a conversation as longer than the
// model's context, the middle of it (the turns between the task and the
// last two) is replaced by a short digest of each message, and the call
// is tried once more. The run's records keep everything.

const (
	keepUnits   = 2    // turns kept whole at the end
	digestLine  = 160  // bytes of each message in the digest
	digestTotal = 4000 // bytes of the digest
	longContext = 4000 // a message of the head longer than this may be cut
	cutContext  = 0.5  // ... to this part of it
	compactNote = "compacted"
)

// compact shortens the conversation; it reports whether it could.
func (r *Runner) compact() bool {
	msgs := r.msgs
	// The head: the system prompts, then what the user gave (context,
	// task), up to the first answer.
	h := 0
	for h < len(msgs) && msgs[h].Role == openai.ChatMessageRoleSystem {
		h++
	}
	for h < len(msgs) && msgs[h].Role == openai.ChatMessageRoleUser {
		h++
	}
	// The tail: the last keepUnits turns, each an answer and its tools'
	// results, or a message of the user.
	t := len(msgs)
	for units := 0; t > h && units < keepUnits; units++ {
		t--
		for t > h && msgs[t].Role == openai.ChatMessageRoleTool {
			t--
		}
	}
	var out []openai.ChatCompletionMessage
	folded := 0
	if t > h {
		var b strings.Builder
		b.WriteString("Earlier turns of this conversation, shortened to fit the model's context:\n")
		for _, m := range msgs[h:t] {
			if b.Len() > digestTotal {
				b.WriteString("- (more turns left out)\n")
				break
			}
			switch {
			case m.Role == openai.ChatMessageRoleTool:
				fmt.Fprintf(&b, "- %s returned: %s\n", m.Name, OneLine(m.Content, digestLine))
			case len(m.ToolCalls) > 0:
				for _, tc := range m.ToolCalls {
					fmt.Fprintf(&b, "- you called %s %s\n", tc.Function.Name, OneLine(tc.Function.Arguments, digestLine))
				}
				if m.Content != "" {
					fmt.Fprintf(&b, "- you said: %s\n", OneLine(m.Content, digestLine))
				}
			case m.Role == openai.ChatMessageRoleSystem:
				// Recalled memories and old prompts: said again by the head.
			default:
				fmt.Fprintf(&b, "- %s: %s\n", m.Role, OneLine(m.Content, digestLine))
			}
		}
		folded = t - h
		out = append(out, msgs[:h]...)
		out = append(out, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: b.String()})
		out = append(out, msgs[t:]...)
	} else {
		// Nothing between: cut the longest message the user gave (the
		// context on stdin, most often), but never the task itself.
		long := -1
		for i := range h - 1 {
			if msgs[i].Role == openai.ChatMessageRoleUser && len(msgs[i].Content) > longContext && (long < 0 || len(msgs[i].Content) > len(msgs[long].Content)) {
				long = i
			}
		}
		if long < 0 {
			return false
		}
		out = append(out, msgs...)
		c := out[long].Content
		n := int(float64(len(c)) * cutContext)
		for n > 0 && c[n]&0xC0 == 0x80 {
			n--
		}
		out[long].Content = c[:n] + "\n(the rest was cut to fit the model's context)"
		folded = 1
	}
	r.msgs = out
	r.known, r.knownN = 0, 0
	r.emit(&proto.EndpointRecord{Type: proto.RecordEndpoint, Event: compactNote,
		Text: fmt.Sprintf("the conversation is longer than the model's context: %d messages shortened, trying once more", folded)})
	return true
}
