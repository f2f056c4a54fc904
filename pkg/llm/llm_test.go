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
	turn, err := client(s.URL, nil).Chat(context.Background(), hello, nil, llm.Options{})
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
	turn, err := client(s.URL, &ev).Chat(context.Background(), hello, nil, llm.Options{})
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
	_, err := client(s.URL, nil).Chat(context.Background(), hello, nil, llm.Options{})
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
	_, err := c.Chat(context.Background(), hello, nil, llm.Options{})
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
	// The next call fails at once, saying when the endpoint is tried
	// again (a cron job does not hang on it), and sends nothing.
	_, err = c.Chat(context.Background(), hello, nil, llm.Options{})
	var le *llm.Error
	if !errors.As(err, &le) || le.Class != llm.Circuit || le.RetryAt.IsZero() || !strings.Contains(err.Error(), "next try at") || len(s.Requests()) != n {
		t.Fatalf("a call while open: %v (%d requests)", err, len(s.Requests()))
	}
	// One that asks to wait waits, probes (half-open), fails and re-opens
	// for longer, ... until the endpoint is back.
	turn, err := c.Chat(context.Background(), hello, nil, llm.Options{Wait: true})
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
	s := llmtest.New(llmtest.Turn{Content: "slow", Stall: llmtest.Duration(30 * time.Second)}, llmtest.Turn{Content: "fast"})
	defer s.Close()
	cfg := llm.DefaultConfig(s.URL, "", "m")
	cfg.FirstToken, cfg.Backoff = time.Second, time.Millisecond
	turn, err := llm.New(cfg).Chat(context.Background(), hello, nil, llm.Options{})
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
	_, err := client(s.URL, nil).Chat(ctx, hello, nil, llm.Options{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

// chatErr calls c once and returns its *llm.Error.
func chatErr(t *testing.T, c *llm.Client) *llm.Error {
	t.Helper()
	_, err := c.Chat(context.Background(), hello, nil, llm.Options{})
	var le *llm.Error
	if !errors.As(err, &le) {
		t.Fatalf("err %v, want an *llm.Error", err)
	}
	return le
}

func TestErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		turn  llmtest.Turn
		class llm.Class
		want  []string // in the message
	}{
		{"401", llmtest.Turn{Status: 401, Error: "Incorrect API key provided"}, llm.Auth, []string{"HTTP 401", "Incorrect API key", "API key"}},
		{"403", llmtest.Turn{Status: 403, Error: "forbidden"}, llm.Auth, []string{"HTTP 403"}},
		{"404", llmtest.Turn{Status: 404, Error: "File Not Found"}, llm.NotFound, []string{"HTTP 404", "/v1/chat/completions", "base_url"}},
		{"overflow", llmtest.Turn{Status: 400, Error: llmtest.ContextError}, llm.Overflow, []string{"context size"}},
		{"400", llmtest.Turn{Status: 400, Error: "unknown field foo"}, llm.Refused, []string{"unknown field foo"}},
		{"jinja", llmtest.Turn{Status: 500, Error: "tools param requires --jinja flag"}, llm.Refused, []string{"--jinja"}},
		{"501", llmtest.Turn{Status: 501}, llm.Refused, []string{"HTTP 501"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := llmtest.New(tc.turn, llmtest.Turn{Content: "must not be asked"})
			defer s.Close()
			var ev []llm.Event
			c := client(s.URL, &ev)
			le := chatErr(t, c)
			if le.Class != tc.class || le.Retry || le.Status != tc.turn.Status {
				t.Errorf("class %s retry %v status %d, want %s, no retry", le.Class, le.Retry, le.Status, tc.class)
			}
			for _, w := range tc.want {
				if !strings.Contains(le.Error(), w) {
					t.Errorf("%q does not say %q", le.Error(), w)
				}
			}
			if n := len(s.Requests()); n != 1 {
				t.Errorf("%d requests, want 1: a refusal is not retried", n)
			}
			// The endpoint answered: the breaker stays closed.
			if c.Breaker().State() != llm.Closed || len(ev) != 0 {
				t.Errorf("breaker %v, events %v", c.Breaker().State(), ev)
			}
		})
	}
}

func TestURLInTransportError(t *testing.T) {
	s := llmtest.New()
	url := s.URL
	s.Close()
	cfg := llm.DefaultConfig(url, "", "m")
	cfg.Retries = 0
	le := chatErr(t, llm.New(cfg))
	// The port is closed, but another test's listener may take it in the
	// meantime (then the connection is reset, not refused): what must hold
	// is the class, the retry and the address the error names.
	if le.Class != llm.Transport || !le.Retry || !strings.Contains(le.Error(), url) {
		t.Errorf("%v: class %s", le, le.Class)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Status: 429, RetryAfter: "1"}, llmtest.Turn{Status: 503, RetryAfter: "0.2"}, llmtest.Turn{Content: "ok"})
	defer s.Close()
	var ev []llm.Event
	c := client(s.URL, &ev)
	turn, err := c.Chat(context.Background(), hello, nil, llm.Options{})
	if err != nil || turn.Content != "ok" {
		t.Fatalf("turn %+v err %v", turn, err)
	}
	if len(ev) != 2 || ev[0].Wait != time.Second || ev[1].Wait != 200*time.Millisecond {
		t.Errorf("waits %+v, want 1s then 200ms as the endpoint asked", ev)
	}
	// A rate limit does not count against the breaker: the endpoint is up.
	if c.Breaker().State() != llm.Closed {
		t.Errorf("breaker %v", c.Breaker().State())
	}
	// An endpoint that asks for more than MaxRetryAfter fails the call.
	s.Push(llmtest.Turn{Status: 429, RetryAfter: "3600"})
	le := chatErr(t, c)
	if le.Retry || !strings.Contains(le.Error(), "wait 1h0m0s") {
		t.Errorf("%v", le)
	}
}

func TestFirstTokenTimeout(t *testing.T) {
	// Hung before the first token: given up after FirstToken, not after
	// the call's whole timeout, and tried again.
	s := llmtest.New(llmtest.Turn{Content: "never", Stall: llmtest.Duration(time.Minute)}, llmtest.Turn{Content: "fast"})
	defer s.Close()
	var ev []llm.Event
	cfg := llm.DefaultConfig(s.URL, "", "m")
	// Long enough for a loaded machine to answer the fast turn in time.
	cfg.FirstToken, cfg.Timeout, cfg.Backoff = time.Second, time.Hour, time.Millisecond
	cfg.Observe = func(e llm.Event) { ev = append(ev, e) }
	turn, err := llm.New(cfg).Chat(context.Background(), hello, nil, llm.Options{})
	if err != nil || turn.Content != "fast" || turn.Attempts != 2 {
		t.Fatalf("turn %+v err %v", turn, err)
	}
	if len(ev) != 1 || !strings.Contains(ev[0].Err.Error(), "first-token timeout") {
		t.Errorf("events %+v", ev)
	}
	// Nothing was streamed: nothing is charged for the failed attempt.
	if turn.Spent.TotalTokens != 0 {
		t.Errorf("spent %+v", turn.Spent)
	}
}

func TestSlowAnswerNotRegenerated(t *testing.T) {
	// Tokens keep coming, slower than the call's timeout allows: the
	// answer is kept as far as it came and not asked for again.
	s := llmtest.New(llmtest.Turn{Content: strings.Repeat("slow words ", 40), Pace: llmtest.Duration(50 * time.Millisecond)}, llmtest.Turn{Content: "again"})
	defer s.Close()
	cfg := llm.DefaultConfig(s.URL, "", "m")
	cfg.FirstToken, cfg.Timeout = 2*time.Second, 600*time.Millisecond
	var deltas strings.Builder
	_, err := llm.New(cfg).Chat(context.Background(), hello, nil, llm.Options{OnDelta: func(d string) { deltas.WriteString(d) }})
	var le *llm.Error
	if !errors.As(err, &le) || le.Class != llm.Timeout || le.Retry {
		t.Fatalf("err %v", err)
	}
	if le.Partial == "" || le.Partial != deltas.String() || !strings.HasPrefix(le.Partial, "slow words") {
		t.Errorf("partial %q, deltas %q", le.Partial, deltas.String())
	}
	if n := s.Started(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if le.Spent.CompletionTokens == 0 || le.Spent.PromptTokens == 0 {
		t.Errorf("the cut answer is not charged: %+v", le.Spent)
	}
}

func TestOptionsSentAndModelReported(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Content: strings.Repeat("x", 400), Model: "qwen2.5-7b-instruct-q4_k_m.gguf", CompletionTokens: 100})
	defer s.Close()
	temp := float32(0)
	turn, err := client(s.URL, nil).Chat(context.Background(), hello, nil, llm.Options{MaxTokens: 10, Temperature: &temp})
	if err != nil {
		t.Fatal(err)
	}
	req := s.Requests()[0].Body
	if req.MaxTokens != 10 || req.Temperature > 1e-6 {
		t.Errorf("max_tokens %d temperature %v", req.MaxTokens, req.Temperature)
	}
	if turn.Model != "qwen2.5-7b-instruct-q4_k_m.gguf" || turn.Finish != "length" || turn.Usage.CompletionTokens != 10 || len(turn.Content) != 40 {
		t.Errorf("turn model %q finish %q usage %+v content %d bytes", turn.Model, turn.Finish, turn.Usage, len(turn.Content))
	}
}

func TestEstimateConservative(t *testing.T) {
	// 1000 CJK characters: a byte-fallback tokenizer may take 3000 tokens.
	cjk := strings.Repeat("日本語の文章", 1000/6+1)
	if n := llm.Estimate(cjk); n < 3*len([]rune(cjk)) {
		t.Errorf("CJK: %d tokens for %d runes", n, len([]rune(cjk)))
	}
	if n := llm.Estimate(strings.Repeat("word ", 100)); n < 125 || n > 200 {
		t.Errorf("English: %d tokens for 500 bytes", n)
	}
}

// TestBreakerProbeLease: a probe that never reports (its run died) does
// not hold the half-open breaker for ever: after the lease another goes.
func TestBreakerProbeLease(t *testing.T) {
	b := llm.NewBreaker(1, time.Second, time.Second)
	b.ProbeLease = time.Minute
	now := time.Now()
	b.Failure(now)
	if _, ok := b.Allow(now.Add(2 * time.Second)); !ok {
		t.Fatal("no probe after the cooldown")
	}
	if _, ok := b.Allow(now.Add(3 * time.Second)); ok {
		t.Fatal("a second probe while the first is out")
	}
	if _, ok := b.Allow(now.Add(2*time.Second + time.Minute)); !ok {
		t.Fatal("no probe after the lease")
	}
	if !b.Success() || b.State() != llm.Closed {
		t.Errorf("state %v", b.State())
	}
}

// TestWireTemperatureAndTools: temperature 0 goes on the wire as 0,
// exactly (go-openai leaves a zero out; a tiny nonzero value is not
// greedy on llama.cpp); tools go only when there are some.
func TestWireTemperatureAndTools(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Content: "a", Repeat: 3})
	defer s.Close()
	c := client(s.URL, nil)
	zero, warm := float32(0), float32(0.7)
	for _, temp := range []*float32{&zero, &warm, nil} {
		if _, err := c.Chat(context.Background(), hello, nil, llm.Options{Temperature: temp}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := s.Requests()
	if raw := string(reqs[0].Raw); !strings.Contains(raw, `"temperature":0,`) || strings.Contains(raw, "e-45") {
		t.Errorf("temperature 0 sent as %s", raw)
	}
	if raw := string(reqs[1].Raw); !strings.Contains(raw, `"temperature":0.7`) || strings.Count(raw, `"temperature"`) != 1 {
		t.Errorf("temperature 0.7 sent as %s", raw)
	}
	if raw := string(reqs[2].Raw); strings.Contains(raw, `"temperature"`) {
		t.Errorf("no temperature sent as %s", raw)
	}
	for _, q := range reqs {
		if strings.Contains(string(q.Raw), `"tools"`) {
			t.Errorf("tools sent with none to offer: %s", q.Raw)
		}
	}
}

// TestErrorInStream: an error the server sends inside a 200 answer (a
// tool call it failed to parse) is said as what it is: not retried, and
// the breaker does not move (the endpoint is up).
func TestErrorInStream(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Content: "partial", StreamError: "Failed to parse tool call", Repeat: 4}, llmtest.Turn{Content: "ok"})
	defer s.Close()
	c := client(s.URL, nil)
	for i := 0; i < 4; i++ {
		_, err := c.Chat(context.Background(), hello, nil, llm.Options{})
		var le *llm.Error
		if !errors.As(err, &le) || le.Class != llm.InStream || le.Retry || !strings.Contains(err.Error(), "Failed to parse tool call") {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("%d requests, want 4 (none retried)", n)
	}
	if st := c.Breaker().State(); st != llm.Closed {
		t.Errorf("breaker %v after errors inside answers", st)
	}
}

// TestBeforeAndSpentEveryAttempt: max_tokens is asked before every
// attempt, retries included, and each attempt's use is told as it ends:
// counted from what it streamed when the server reported none.
func TestBeforeAndSpentEveryAttempt(t *testing.T) {
	long := strings.Repeat("word ", 4000)
	s := llmtest.New(llmtest.Turn{Content: long, StallAfter: llmtest.Duration(5 * time.Second), NoUsage: true, Repeat: 2}, llmtest.Turn{Content: "done"})
	defer s.Close()
	cfg := llm.DefaultConfig(s.URL, "", "m")
	cfg.FirstToken, cfg.Backoff, cfg.MaxBackoff = 200*time.Millisecond, time.Millisecond, time.Millisecond
	left := 3000
	var asked []int
	var used []int
	turn, err := llm.New(cfg).Chat(context.Background(), hello, nil, llm.Options{
		Before: func(int) (int, error) { asked = append(asked, left/2); return left / 2, nil },
		Spent: func(_ int, u openai.Usage, _ *llm.Turn, _ *llm.Error) {
			used = append(used, u.CompletionTokens)
			left -= u.TotalTokens
		},
	})
	if err != nil || turn.Content != "done" {
		t.Fatalf("turn %+v, %v", turn, err)
	}
	if len(asked) != 3 || asked[1] >= asked[0] || asked[2] >= asked[1] {
		t.Errorf("max_tokens asked %v: want one a attempt, shrinking", asked)
	}
	for i, q := range s.Requests() {
		if q.Body.MaxTokens != asked[i] {
			t.Errorf("attempt %d sent max_tokens %d, asked %d", i+1, q.Body.MaxTokens, asked[i])
		}
	}
	// The stalled attempts streamed max_tokens (the server's count, 4
	// bytes a token): that is charged, though no usage came.
	if len(used) != 3 || used[0] != asked[0] || used[1] != asked[1] {
		t.Errorf("used %v for max_tokens %v", used, asked)
	}
}

// TestCancelledProbeLetGo: a probe whose caller goes (a run killed) is let
// go at once, not held for its lease, so later calls are not refused while
// nobody probes.
func TestCancelledProbeLetGo(t *testing.T) {
	s := llmtest.New(llmtest.Turn{Status: 500, Repeat: 5}, llmtest.Turn{Content: "late", Delay: llmtest.Duration(time.Minute)})
	defer s.Close()
	c := client(s.URL, nil)
	c.Breaker().ProbeLease = time.Hour
	if _, err := c.Chat(context.Background(), hello, nil, llm.Options{}); !errors.Is(err, llm.ErrOpen) {
		t.Fatalf("after the failures: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s.Started() < 6 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	if _, err := c.Chat(ctx, hello, nil, llm.Options{Wait: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled probe: %v", err)
	}
	if st := c.Breaker().State(); st != llm.Open {
		t.Errorf("breaker %v after its probe was cancelled: want open again, its probe let go", st)
	}
}
