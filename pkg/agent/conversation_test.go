package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/agent"
)

// TestConversationKept: a conversation is kept whole (an answer whose tool
// calls never ran loses them), the latest is the one continued, and an
// oversized one loses its oldest turns, not its prompt or task.
func TestConversationKept(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}}
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessage{
		{Role: "system", Content: "prompt"}, {Role: "user", Content: "task"},
		{Role: "assistant", Content: "calling", ToolCalls: []openai.ToolCall{{ID: "c1", Function: openai.FunctionCall{Name: "state_list"}}}},
	}
	if err := agent.SaveConversation(ctx, k, &agent.Conversation{Run: "r1", Agent: "a", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	c, err := agent.LoadConversation(ctx, k, "")
	if err != nil || c.Run != "r1" || len(c.Messages) != 3 || len(c.Messages[2].ToolCalls) != 0 || c.Messages[2].Content != "calling" {
		t.Fatalf("loaded %+v, %v", c, err)
	}
	big := []openai.ChatCompletionMessage{{Role: "system", Content: "prompt"}, {Role: "user", Content: "the task"}}
	for range 40 {
		big = append(big, openai.ChatCompletionMessage{Role: "assistant", Content: strings.Repeat("x", 40<<10)})
	}
	if err := agent.SaveConversation(ctx, k, &agent.Conversation{Run: "r2", Agent: "a", Messages: big}); err != nil {
		t.Fatal(err)
	}
	c, err = agent.LoadConversation(ctx, k, "")
	if err != nil || c.Run != "r2" {
		t.Fatalf("latest: %+v %v", c, err)
	}
	if b, _ := json.Marshal(c); len(b) > 1<<20 || c.Messages[1].Content != "the task" || len(c.Messages) >= len(big) {
		t.Errorf("kept %d bytes, %d messages, task %q", len(b), len(c.Messages), c.Messages[1].Content)
	}
	for _, id := range []string{"nope", "../x"} {
		if _, err := agent.LoadConversation(ctx, k, id); err == nil {
			t.Errorf("conversation %q loaded", id)
		}
	}
	k.state["conversations/junk"] = []byte("not json")
	if _, err := agent.LoadConversation(ctx, k, "junk"); err == nil || !strings.Contains(err.Error(), "not one ox-agent kept") {
		t.Errorf("junk: %v", err)
	}
}

// TestPersonaApply: a persona fills what the command line did not say.
func TestPersonaApply(t *testing.T) {
	p, err := agent.ParsePersona("x", []byte("system = \"be short\"\ntemperature = 0.3\nmax_tokens = 9\ntools = [\"recall\"]\nrecall = false\nsummary = false\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{}
	p.Apply(&cfg, func(f string) bool { return f == "max-tokens" })
	if cfg.System != "be short" || cfg.Temperature == nil || *cfg.Temperature != 0.3 || cfg.MaxTokens != 0 || cfg.Recall != -1 || !cfg.NoSummary || len(cfg.Tools) != 1 {
		t.Errorf("cfg %+v", cfg)
	}
	for _, bad := range []string{"temperature = 5", "max_tokens = -2", "sytem = \"x\"", "system = "} {
		if _, err := agent.ParsePersona("x", []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
