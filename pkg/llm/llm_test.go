package llm_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/llm/llmtest"
)

func client(url string, events *[]llm.Event) *llm.Client {
	cfg := llm.DefaultConfig(url, "k", "m")
	cfg.Backoff, cfg.MaxBackoff = 5*time.Millisecond, 20*time.Millisecond
	cfg.Cooldown, cfg.MaxCooldown = 50*time.Millisecond, 200*time.Millisecond
	cfg.Timeout = 2 * time.Second
	if events != nil {
		cfg.Observe = func(e llm.Event) { *events = append(*events, e) }
	}
	return llm.New(cfg)
}

var hello = []openai.ChatCompletionMessage{{Role: "user", Content: "hello"}}

func TestStreamAssemblesTurn(t *testing.T) {
	s := llmtest.New(llmtest.Turn{
		Content:      "Let me look — at the “disk” first.",
		ToolCalls:    []llmtest.Call{{Name: "state_read", Arguments: `{"key":"a/very/long/key/name/to/split/in/pieces"}`}, {Name: "finish", Arguments: `{"summary":"done"}`}},
		PromptTokens: 120, CompletionTokens: 30,
	})
	defer s.Close()
	turn, err := client(s.URL, nil).Chat(context.Background(), hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Content != "Let me look — at the “disk” first." {
		t.Errorf("content %q", turn.Content)
	}
	if len(turn.ToolCalls) != 2 || turn.ToolCalls[0].Function.Name != "state_read" ||
		turn.ToolCalls[0].Function.Arguments != `{"key":"a/very/long/key/name/to/split/in/pieces"}` ||
		turn.ToolCalls[1].Function.Name != "finish" || turn.ToolCalls[0].ID == "" || turn.ToolCalls[0].ID == turn.ToolCalls[1].ID {
		t.Errorf("tool calls %+v", turn.ToolCalls)
	}
	if turn.Usage.PromptTokens != 120 || turn.Usage.CompletionTokens != 30 || turn.Finish != "tool_calls" {
		t.Errorf("usage %+v finish %q", turn.Usage, turn.Finish)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || !reqs[0].Body.Stream || reqs[0].Body.Model != "m" {
		t.Errorf("requests %+v", reqs)
	}
}

func TestRetryThenSuccess(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Status: 500, Repeat: 1}, llmtest.Turn{Status: 429}, llmtest.Turn{Content: "ok"})
	defer s.Close()
	var ev []llm.Event
	turn, err := client(s.URL, &ev).Chat(context.Background(), hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Content != "ok" || turn.Attempts != 3 || len(s.Requests()) != 3 {
		t.Fatalf("turn %+v after %d requests", turn, len(s.Requests()))
	}
	if len(ev) != 2 || ev[0].Kind != "retry" || ev[1].Kind != "retry" {
		t.Errorf("events %+v", ev)
	}
}

func TestClientErrorNotRetried(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Status: 400, Error: "model not found: m"})
	defer s.Close()
	_, err := client(s.URL, nil).Chat(context.Background(), hello, nil)
	var le *llm.Error
	if !errors.As(err, &le) || le.Status != 400 || le.Retry || !strings.Contains(err.Error(), "model not found") {
		t.Fatalf("err %v", err)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestBreakerOpensAndRecovers(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Status: 500, Repeat: 8}, llmtest.Turn{Content: "back"})
	defer s.Close()
	var ev []llm.Event
	c := client(s.URL, &ev)
	_, err := c.Chat(context.Background(), hello, nil)
	if !errors.Is(err, llm.ErrOpen) {
		t.Fatalf("after 5 failures: %v", err)
	}
	if c.Breaker().State() != llm.Open {
		t.Fatalf("breaker %v", c.Breaker().State())
	}
	// While open, no request reaches the endpoint until the cooldown.
	n := len(s.Requests())
	if n != 5 {
		t.Fatalf("%d requests, want 5 (4 retries)", n)
	}
	// The next call waits, probes (half-open), fails and re-opens for
	// longer, ... until the endpoint is back.
	turn, err := c.Chat(context.Background(), hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if turn.Content != "back" || c.Breaker().State() != llm.Closed {
		t.Fatalf("turn %+v, breaker %v", turn, c.Breaker().State())
	}
	var kinds []string
	for _, e := range ev {
		if e.Kind != "retry" {
			kinds = append(kinds, e.Kind)
		}
	}
	got := strings.Join(kinds, ",")
	if !strings.HasPrefix(got, "open,half-open,open,half-open") || !strings.HasSuffix(got, "half-open,closed") {
		t.Errorf("breaker transitions %s", got)
	}
}

func TestStallTimesOut(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Content: "slow", Stall: llmtest.Duration(time.Second)}, llmtest.Turn{Content: "fast"})
	defer s.Close()
	cfg := llm.DefaultConfig(s.URL, "", "m")
	cfg.Timeout, cfg.Backoff = 100*time.Millisecond, time.Millisecond
	turn, err := llm.New(cfg).Chat(context.Background(), hello, nil)
	if err != nil || turn.Content != "fast" || turn.Attempts != 2 {
		t.Fatalf("turn %+v err %v", turn, err)
	}
}

func TestCancel(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Content: "late", Delay: llmtest.Duration(5 * time.Second)})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client(s.URL, nil).Chat(ctx, hello, nil)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}
