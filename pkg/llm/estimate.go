package llm

import (
	"encoding/json"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// Estimate is a conservative count of the tokens of s, for budgets before
// the endpoint has said: a token for every 3 bytes of ASCII (tokenizers
// of English and code average about 4), and one for every byte of other
// text (a byte-fallback tokenizer's worst case for rare CJK; common ones
// take 1 or 2 tokens a character). Over-counting costs a little room in
// a budget; under-counting overshoots it.
func Estimate(s string) int {
	ascii, other := 0, 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			ascii++
			i++
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		other += n
		i += n
	}
	return (ascii+2)/3 + other
}

// perMessage is what a message costs beyond its text (role, template).
const perMessage = 6

// EstimateMessages is Estimate for a conversation.
func EstimateMessages(msgs []openai.ChatCompletionMessage) int {
	n := 3
	for _, m := range msgs {
		n += EstimateMessage(m)
	}
	return n
}

// EstimateMessage is Estimate for one message.
func EstimateMessage(m openai.ChatCompletionMessage) int {
	n := perMessage + Estimate(m.Content) + Estimate(m.Name)
	for _, tc := range m.ToolCalls {
		n += perMessage + Estimate(tc.ID) + Estimate(tc.Function.Name) + Estimate(tc.Function.Arguments)
	}
	return n
}

// EstimateTools is Estimate for the tools' definitions sent with a call.
func EstimateTools(tools []openai.Tool) int {
	n := 0
	for _, t := range tools {
		if t.Function == nil {
			continue
		}
		n += perMessage + Estimate(t.Function.Name) + Estimate(t.Function.Description)
		switch p := t.Function.Parameters.(type) {
		case json.RawMessage:
			n += Estimate(string(p))
		case []byte:
			n += Estimate(string(p))
		case nil:
		default:
			b, _ := json.Marshal(p)
			n += Estimate(string(b))
		}
	}
	return n
}
