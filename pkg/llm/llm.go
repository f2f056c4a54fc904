// Package llm talks to an OpenAI-compatible chat-completions endpoint
// (OpenAI, ollama, llama.cpp, vLLM) for the LLM runner: one streamed model
// turn at a time, each attempt bounded by a timeout, failed attempts
// retried with exponential backoff, and a circuit breaker so that a dead
// endpoint is not hammered.
package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Config is where and how to reach the endpoint.
type Config struct {
	BaseURL string // ".../v1"
	Key     string // may be empty (ollama, llama.cpp)
	Model   string
	// Timeout bounds one attempt, from request to the end of its stream.
	Timeout time.Duration
	// Retries is how many times a failed attempt is tried again.
	Retries int
	// Backoff is the first wait between attempts; it doubles up to
	// MaxBackoff, with jitter.
	Backoff, MaxBackoff time.Duration
	// Breaker: after Threshold failed attempts in a row the circuit opens
	// for Cooldown (doubling while probes fail, up to MaxCooldown).
	Threshold             int
	Cooldown, MaxCooldown time.Duration
	// Observe, if set, is told of retries and breaker changes.
	Observe func(Event)
	// HTTP is the client to use; nil means a default one.
	HTTP *http.Client
}

// DefaultConfig returns the defaults for the endpoint at url.
func DefaultConfig(url, key, model string) Config {
	return Config{
		BaseURL: url, Key: key, Model: model,
		Timeout: 2 * time.Minute, Retries: 4,
		Backoff: 250 * time.Millisecond, MaxBackoff: 8 * time.Second,
		Threshold: 3, Cooldown: time.Second, MaxCooldown: 30 * time.Second,
	}
}

// Event is a retry or a change of the breaker's state.
type Event struct {
	Kind    string // "retry", "open", "half-open", "closed"
	Attempt int
	Wait    time.Duration
	Err     error
}

// Turn is the model's answer: text and/or tool calls, and the usage the
// endpoint reported.
type Turn struct {
	Content   string
	ToolCalls []openai.ToolCall
	Finish    string
	Usage     openai.Usage
	Attempts  int
}

// Error is a failure of the endpoint, after retries.
type Error struct {
	Status   int  // HTTP status, 0 for a transport failure
	Retry    bool // worth trying again later
	Attempts int
	Err      error
}

func (e *Error) Error() string {
	s := e.Err.Error()
	if e.Attempts > 1 {
		s += fmt.Sprintf(" (after %d attempts)", e.Attempts)
	}
	return "model endpoint: " + s
}

func (e *Error) Unwrap() error { return e.Err }

// ErrOpen is the breaker refusing a call while the endpoint is down.
var ErrOpen = errors.New("circuit open: the endpoint failed repeatedly; not calling it until it cools down")

// Client is a model endpoint. It is safe for concurrent use.
type Client struct {
	cfg Config
	oc  *openai.Client
	br  *Breaker
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	oc := openai.DefaultConfig(cfg.Key)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.HTTP != nil {
		oc.HTTPClient = cfg.HTTP
	} else {
		// No overall client timeout: a stream may run long; each attempt
		// has its own context deadline instead.
		oc.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 0,
		}}
	}
	return &Client{cfg: cfg, oc: openai.NewClientWithConfig(oc),
		br: NewBreaker(cfg.Threshold, cfg.Cooldown, cfg.MaxCooldown)}
}

// Breaker returns the client's circuit breaker.
func (c *Client) Breaker() *Breaker { return c.br }

func (c *Client) observe(e Event) {
	if c.cfg.Observe != nil {
		c.cfg.Observe(e)
	}
}

// Chat sends the conversation and returns the model's turn, streamed and
// assembled. Failed attempts are retried; while the breaker is open Chat
// waits for it to let a probe through (within the retries), and gives up
// with ErrOpen when none is left.
func (c *Client) Chat(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool) (*Turn, error) {
	req := openai.ChatCompletionRequest{
		Model: c.cfg.Model, Messages: msgs, Tools: tools, Stream: true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	backoff := c.cfg.Backoff
	var last *Error
	for attempt := 1; ; attempt++ {
		if wait, ok := c.br.Allow(time.Now()); !ok {
			// Open: wait for the probe's turn (the wait is not an attempt).
			c.observe(Event{Kind: "retry", Attempt: attempt, Wait: wait, Err: ErrOpen})
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			attempt--
			continue
		}
		if c.br.State() == HalfOpen {
			c.observe(Event{Kind: "half-open", Attempt: attempt})
		}
		t, err := c.attempt(ctx, req)
		if err == nil {
			if c.br.Success() {
				c.observe(Event{Kind: "closed", Attempt: attempt})
			}
			t.Attempts = attempt
			return t, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = classify(err)
		last.Attempts = attempt
		if !last.Retry {
			// The endpoint answered: it is up, the request is wrong.
			c.br.Success()
			return nil, last
		}
		if c.br.Failure(time.Now()) {
			c.observe(Event{Kind: "open", Attempt: attempt, Err: last.Err})
		}
		if attempt > c.cfg.Retries {
			if c.br.State() == Open {
				return nil, &Error{Status: last.Status, Retry: true, Attempts: attempt, Err: errors.Join(last.Err, ErrOpen)}
			}
			return nil, last
		}
		if c.br.State() == Open {
			continue // the breaker's cooldown is the wait
		}
		wait := jitter(backoff)
		backoff = min(2*backoff, c.cfg.MaxBackoff)
		c.observe(Event{Kind: "retry", Attempt: attempt, Wait: wait, Err: last.Err})
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// attempt is one streamed request.
func (c *Client) attempt(ctx context.Context, req openai.ChatCompletionRequest) (*Turn, error) {
	if c.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.cfg.Timeout, errAttemptTimeout)
		defer cancel()
	}
	st, err := c.oc.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return nil, timeoutCause(ctx, err)
	}
	defer st.Close()
	t := &Turn{}
	var text strings.Builder
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, timeoutCause(ctx, err)
		}
		if chunk.Usage != nil {
			t.Usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			text.WriteString(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				t.ToolCalls = mergeToolCall(t.ToolCalls, tc)
			}
			if ch.FinishReason != "" {
				t.Finish = string(ch.FinishReason)
			}
		}
	}
	t.Content = text.String()
	if t.Content == "" && len(t.ToolCalls) == 0 && t.Finish == "" {
		return nil, errEmptyStream
	}
	return t, nil
}

var (
	errAttemptTimeout = errors.New("no complete answer within the attempt's timeout")
	errEmptyStream    = errors.New("the stream ended without an answer")
)

func timeoutCause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); errors.Is(c, errAttemptTimeout) {
		return errAttemptTimeout
	}
	return err
}

// mergeToolCall folds one streamed fragment of a tool call into calls:
// fragments of a call share an index; the first carries its id and name,
// the rest pieces of its arguments.
func mergeToolCall(calls []openai.ToolCall, d openai.ToolCall) []openai.ToolCall {
	i := len(calls)
	if d.Index != nil {
		i = *d.Index
	} else if d.ID == "" && len(calls) > 0 {
		i = len(calls) - 1
	}
	for len(calls) <= i {
		calls = append(calls, openai.ToolCall{Type: openai.ToolTypeFunction})
	}
	tc := &calls[i]
	if d.ID != "" {
		tc.ID = d.ID
	}
	if d.Type != "" {
		tc.Type = d.Type
	}
	if d.Function.Name != "" {
		tc.Function.Name += d.Function.Name
	}
	tc.Function.Arguments += d.Function.Arguments
	return calls
}

// classify says whether an attempt's failure is worth retrying: transport
// errors, timeouts, 408, 409, 429 and 5xx are; other answers are not.
func classify(err error) *Error {
	var api *openai.APIError
	var rq *openai.RequestError
	status := 0
	switch {
	case errors.As(err, &api):
		status = api.HTTPStatusCode
	case errors.As(err, &rq):
		status = rq.HTTPStatusCode
		if rq.Err != nil && len(rq.Body) > 0 {
			err = fmt.Errorf("%s: %s", rq.HTTPStatus, strings.TrimSpace(string(rq.Body[:min(len(rq.Body), 300)])))
		}
	}
	retry := status == 0 || status == 408 || status == 409 || status == 429 || status >= 500
	if status != 0 {
		err = fmt.Errorf("HTTP %d: %w", status, err)
	}
	return &Error{Status: status, Retry: retry, Err: err}
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	// Full jitter over the upper half: d/2 .. d.
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
