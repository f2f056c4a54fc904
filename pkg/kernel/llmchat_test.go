package kernel

import (
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/llm"
)

// TestPromptEstimate: a conversation whose prefix the endpoint counted is
// that count and an estimate of the rest; a new one is the conservative
// estimate, scaled by what the endpoint counted of earlier prompts of the
// agent (with a margin, never above the conservative one).
func TestPromptEstimate(t *testing.T) {
	var p promptMemo
	msgs := []openai.ChatCompletionMessage{{Role: "system", Content: "You are an agent. Be brief."}, {Role: "user", Content: "what is the disk usage of /var?"}}
	sums := digests(nil, msgs)
	full := llm.EstimateMessages(msgs) + 100
	if n, all := p.estimate("r1", "k", msgs, sums, 100); n != full || !all {
		t.Fatalf("first estimate %d (%v), want %d", n, all, full)
	}
	// The endpoint counted 40 for it.
	p.learn("r1", len(msgs), sums[len(msgs)], 40)
	p.calibrate("k", 40, full)
	more := append(msgs, openai.ChatCompletionMessage{Role: "assistant", Content: "12 GB"})
	if n, all := p.estimate("r1", "k", more, digests(nil, more), 100); all || n != 40+llm.EstimateMessage(more[2]) {
		t.Errorf("after a counted prefix: %d (%v)", n, all)
	}
	// A changed prefix is not the counted one.
	other := []openai.ChatCompletionMessage{{Role: "system", Content: "You are someone else."}, msgs[1], more[2]}
	n, all := p.estimate("r1", "k", other, digests(nil, other), 100)
	conservative := llm.EstimateMessages(other) + 100
	if !all || n >= conservative || float64(n) < float64(conservative)*40/float64(full) {
		t.Errorf("a new conversation: %d, conservative %d, ratio %.2f", n, conservative, 40/float64(full))
	}
	// Another agent's key learned nothing.
	if n, _ := p.estimate("r2", "k2", other, digests(nil, other), 100); n != conservative {
		t.Errorf("another key: %d, want %d", n, conservative)
	}
}
