// Package llm talks to an OpenAI-compatible chat-completions endpoint
// (OpenAI, ollama, llama.cpp, vLLM) for the LLM runner: one streamed model
// turn at a time, failed attempts retried with exponential backoff (or
// when the endpoint's Retry-After says), errors classified so that a
// request the endpoint refuses is not sent again, and a circuit breaker so
// that a dead endpoint is not hammered. The daemon keeps one breaker per
// endpoint for every run (Breakers), and answers llm.gate with it (Gate).
//
// Two clocks bound an attempt: the first-token timeout (the longest wait
// for the first token and between two tokens) makes a hung server fail
// fast, and the call timeout bounds the whole answer; an answer that is
// still streaming when the call timeout ends is kept as far as it came,
// not generated again.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Config is where and how to reach the endpoint.
type Config struct {
	BaseURL string // ".../v1"
	Key     string // may be empty (ollama, llama.cpp)
	Model   string
	// Timeout bounds one attempt, from request to the end of its stream
	// (0: none).
	Timeout time.Duration
	// FirstToken bounds the wait for the first token of an answer and
	// then between two tokens (0: only Timeout).
	FirstToken time.Duration
	// Retries is how many times a failed attempt is tried again.
	Retries int
	// Backoff is the first wait between attempts; it doubles up to
	// MaxBackoff, with jitter.
	Backoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; an
	// endpoint that asks for more fails the call.
	MaxRetryAfter time.Duration
	// Breaker: after Threshold failed attempts in a row the circuit opens
	// for Cooldown (doubling while probes fail, up to MaxCooldown).
	Threshold             int
	Cooldown, MaxCooldown time.Duration
	// Gate, if set, is the breaker to use instead of one of the client's
	// own: the daemon's, shared by every run against the endpoint.
	Gate Gate
	// Observe, if set, is told of retries and breaker changes.
	Observe func(Event)
	// HTTP is the client to use; nil means a default one.
	HTTP *http.Client
}

// DefaultConfig returns the defaults for the endpoint at url.
func DefaultConfig(url, key, model string) Config {
	return Config{
		BaseURL: url, Key: key, Model: model,
		Timeout: 10 * time.Minute, FirstToken: time.Minute, Retries: 4,
		Backoff: 250 * time.Millisecond, MaxBackoff: 8 * time.Second, MaxRetryAfter: time.Minute,
		Threshold: 3, Cooldown: time.Second, MaxCooldown: 30 * time.Second,
	}
}

// Options are the settings of one call.
type Options struct {
	// Model, if set, is asked instead of the config's.
	Model string
	// MaxTokens caps the answer (max_tokens); 0 sends none.
	MaxTokens int
	// Temperature, if set, is sent: 0 too, exactly (go-openai leaves a
	// zero out; the transport puts it back).
	Temperature *float32
	// OnDelta, if set, is given each piece of the answer's text as it
	// comes. Pieces of an attempt that then fails are not taken back: the
	// caller is told by a "discarded" Event.
	OnDelta func(string)
	// Before, if set, is asked before each attempt (retries included)
	// for its max_tokens: the budget left, which may have shrunk by what
	// the failed attempts used. An error ends the call with it.
	Before func(attempt int) (maxTokens int, err error)
	// Spent, if set, is told after each attempt what it used: the usage
	// the endpoint reported or, when it reported none, the count of what
	// it streamed (also when the call is cancelled mid-stream); and the
	// attempt's answer (nil when it failed: failure says why).
	Spent func(attempt int, used openai.Usage, answer *Turn, failure *Error)
	// Observe, if set, is told of this call's events instead of the
	// config's Observe.
	Observe func(Event)
	// Schema, if set, is the JSON Schema the answer must match: sent as
	// its response_format.
	Schema json.RawMessage
	// Wait: a call that finds the breaker open waits for its probe
	// instead of failing at once with the Circuit class.
	Wait bool
}

// Gate is a circuit breaker: the client's own (Breaker) or one that lives
// elsewhere (the daemon's, over its socket).
type Gate interface {
	// Allow says whether an attempt may go now; if not, how long until
	// it may. When it lets a half-open probe through, probe is true.
	Allow(ctx context.Context) (wait time.Duration, probe bool, err error)
	// Report tells the outcome of an attempt (ok: the endpoint answered);
	// it returns the breaker's new state when that changed, "" otherwise.
	Report(ctx context.Context, ok bool) (changed string, err error)
}

// Event is a retry, a change of the breaker's state, or an attempt whose
// streamed text was thrown away.
type Event struct {
	Kind    string // "retry", "open", "half-open", "closed", "discarded"
	Attempt int
	Wait    time.Duration
	Err     error
	// Discarded is how much text the failed attempt had streamed
	// ("discarded" events).
	Discarded int
}

// Turn is the model's answer: text and/or tool calls, and the usage the
// endpoint reported.
type Turn struct {
	Content   string
	ToolCalls []openai.ToolCall
	Finish    string
	Usage     openai.Usage
	// Model is the model the endpoint says answered ("" if it did not).
	Model    string
	Attempts int
	// Spent is what failed attempts used: the usage they reported, or,
	// for a stream cut after it began, the count of what it streamed.
	Spent openai.Usage
	// Charged: the kernel made the call (llm.chat) and charged it, each
	// attempt as it ended. MaxTokens is the answer's max_tokens, Capped
	// says the budget set it; Cost is the answer's; RunTokens and RunCost
	// the run's after the call; Over, the budget the answer took the run
	// or agent past (the run ends).
	Charged   bool
	MaxTokens int
	Capped    bool
	Cost      float64
	RunTokens int64
	RunCost   float64
	Over      string
}

// Class says what kind of failure an Error is.
type Class string

// The classes of failure.
const (
	Transport Class = "transport" // no answer: refused, reset, DNS, TLS
	Timeout   Class = "timeout"   // no first token, a stall, or the call's timeout
	Server    Class = "server"    // 5xx
	RateLimit Class = "rate"      // 429
	Auth      Class = "auth"      // 401, 403: the key
	NotFound  Class = "notfound"  // 404: the URL or the model
	Overflow  Class = "overflow"  // 400: the conversation is longer than the context
	Refused   Class = "refused"   // another 4xx, or a 5xx that says it is permanent
	Circuit   Class = "breaker"   // the circuit is open
	// InStream is an error the server sent inside a 200 answer's stream
	// (llama-server's failure to parse the model's tool call): the
	// endpoint is up, so the breaker does not move, and the same request
	// would fail the same way, so it is not retried.
	InStream Class = "stream"
)

// Error is a failure of the endpoint, after retries.
type Error struct {
	Status   int // HTTP status, 0 for a transport failure
	Class    Class
	Retry    bool // worth trying again later
	Attempts int
	URL      string
	Err      error
	// RetryAfter is what the endpoint asked to wait, if it did.
	RetryAfter time.Duration
	// Spent is what the attempts used (see Turn.Spent); Partial is the
	// text of an answer cut by the call's timeout.
	Spent   openai.Usage
	Partial string
	Model   string
	// RetryAt is when an open breaker lets the next call try the endpoint
	// (Circuit class).
	RetryAt time.Time
	// Charged: the kernel charged Spent (llm.chat).
	Charged bool
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
	cfg  Config
	oc   *openai.Client
	br   *Breaker
	gate Gate
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	oc := openai.DefaultConfig(cfg.Key)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	hc := cfg.HTTP
	if hc == nil {
		// No overall client timeout: a stream may run long; each attempt
		// has its own deadlines instead.
		hc = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}}
	}
	// The answer's headers (Retry-After) and the URL asked are not in
	// go-openai's errors: a transport that notes them beside.
	w := *hc
	base := w.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	w.Transport = noting{base}
	oc.HTTPClient = &w
	c := &Client{cfg: cfg, oc: openai.NewClientWithConfig(oc)}
	c.br = NewBreaker(cfg.Threshold, cfg.Cooldown, cfg.MaxCooldown)
	c.gate = cfg.Gate
	if c.gate == nil {
		c.gate = localGate{c.br}
	}
	return c
}

// Breaker returns the client's own circuit breaker (unused when the
// config names a Gate).
func (c *Client) Breaker() *Breaker { return c.br }

func (c *Client) observe(opt *Options, e Event) {
	if opt.Observe != nil {
		opt.Observe(e)
	} else if c.cfg.Observe != nil {
		c.cfg.Observe(e)
	}
}

// Chat sends the conversation and returns the model's turn, streamed and
// assembled. Failed attempts are retried when that may help. A call that
// finds the breaker open fails at once with the Circuit class (naming
// when the endpoint is tried again) unless opt.Wait; once its own
// failures opened it, the call waits for the probe within its retries.
func (c *Client) Chat(ctx context.Context, msgs []openai.ChatCompletionMessage, tools []openai.Tool, opt Options) (*Turn, error) {
	req := openai.ChatCompletionRequest{
		Model: c.cfg.Model, Messages: msgs, Stream: true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
		MaxTokens:     opt.MaxTokens,
	}
	if opt.Model != "" {
		req.Model = opt.Model
	}
	if len(tools) > 0 {
		// No tools, no "tools": a server without tool support (llama-server
		// without --jinja) answers plain chat.
		req.Tools = tools
	}
	if len(opt.Schema) > 0 {
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "result", Schema: opt.Schema}}
	}
	zeroTemp := false
	if opt.Temperature != nil {
		req.Temperature = *opt.Temperature
		zeroTemp = req.Temperature == 0
	}
	backoff := c.cfg.Backoff
	var spent openai.Usage
	var last *Error
	open := false // the last change of the breaker this call saw opened it
	for attempt := 1; ; attempt++ {
		if opt.Before != nil {
			n, err := opt.Before(attempt)
			if err != nil {
				return nil, err
			}
			req.MaxTokens = n
		}
		wait, probe, err := c.gate.Allow(ctx)
		if err != nil {
			return nil, err
		}
		if wait > 0 {
			if !opt.Wait && !open {
				// Down before this call: say so now, not after the cooldown
				// (a cron job would hang on it).
				at := time.Now().Add(wait)
				e := &Error{Class: Circuit, Retry: true, Attempts: attempt - 1, URL: c.cfg.BaseURL, Spent: spent, RetryAt: at,
					Err: fmt.Errorf("%w; next try at %s (in %v)", ErrOpen, at.UTC().Format(time.RFC3339), wait.Round(time.Millisecond))}
				if last != nil {
					e.Err = errors.Join(last.Err, e.Err)
				}
				return nil, e
			}
			// Open: wait for the probe's turn (the wait is not an attempt).
			c.observe(&opt, Event{Kind: "retry", Attempt: attempt, Wait: wait, Err: ErrOpen})
			if err := sleep(ctx, wait); err != nil {
				return nil, err
			}
			attempt--
			continue
		}
		if probe {
			c.observe(&opt, Event{Kind: "half-open", Attempt: attempt})
		}
		t, aerr := c.attempt(ctx, req, msgs, zeroTemp, &opt)
		if aerr == nil {
			if opt.Spent != nil {
				opt.Spent(attempt, t.Usage, t, nil)
			}
			c.report(ctx, true, attempt, nil, &open, &opt)
			t.Attempts, t.Spent = attempt, spent
			return t, nil
		}
		if opt.Spent != nil {
			opt.Spent(attempt, aerr.Spent, nil, aerr)
		}
		if aerr.Partial != "" {
			c.observe(&opt, Event{Kind: "discarded", Attempt: attempt, Err: aerr.Err, Discarded: len(aerr.Partial)})
		}
		addUsage(&spent, aerr.Spent)
		if ctx.Err() != nil {
			// The caller went (a run killed). An endpoint that streamed is
			// up; a probe cut short is let go, not left to its lease, so
			// that other calls are not refused meanwhile.
			if aerr.Spent.TotalTokens > 0 {
				c.report(ctx, true, attempt, nil, &open, &opt)
			} else if probe {
				c.report(ctx, false, attempt, aerr.Err, &open, &opt)
			}
			return nil, ctx.Err()
		}
		last = aerr
		last.Attempts, last.Spent = attempt, spent
		switch last.Class {
		case Transport, Timeout, Server:
			if last.Retry {
				c.report(ctx, false, attempt, last.Err, &open, &opt)
				break
			}
			fallthrough
		default:
			// The endpoint answered: it is up (busy, for a 429), or the
			// request is wrong.
			c.report(ctx, true, attempt, nil, &open, &opt)
		}
		if !last.Retry {
			return nil, last
		}
		if attempt > c.cfg.Retries {
			if open {
				last.Class = Circuit
				last.Err = errors.Join(last.Err, ErrOpen)
			}
			return nil, last
		}
		if open && last.RetryAfter == 0 {
			continue // the breaker's cooldown is the wait
		}
		wait = jitter(backoff)
		backoff = min(2*backoff, c.cfg.MaxBackoff)
		if last.RetryAfter > 0 {
			wait = last.RetryAfter
		}
		c.observe(&opt, Event{Kind: "retry", Attempt: attempt, Wait: wait, Err: last.Err})
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// report tells the gate an attempt's outcome and observes a change.
func (c *Client) report(ctx context.Context, ok bool, attempt int, err error, open *bool, opt *Options) {
	changed, _ := c.gate.Report(context.WithoutCancel(ctx), ok)
	if changed != "" {
		*open = changed == Open.String()
		c.observe(opt, Event{Kind: changed, Attempt: attempt, Err: err})
	}
}

var (
	errFirstToken = errors.New("no token within the first-token timeout")
	errStall      = errors.New("the answer stalled: no token within the first-token timeout")
	errCallTime   = errors.New("the answer was not complete within the call's timeout")
	errEmpty      = errors.New("the stream ended without an answer")
)

// attempt is one streamed request.
func (c *Client) attempt(ctx context.Context, req openai.ChatCompletionRequest, msgs []openai.ChatCompletionMessage, zeroTemp bool, opt *Options) (*Turn, *Error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.cfg.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, c.cfg.Timeout, errCallTime)
		defer stop()
	}
	started := false
	var idle *time.Timer
	if c.cfg.FirstToken > 0 {
		idle = time.AfterFunc(c.cfg.FirstToken, func() { cancel(errFirstToken) })
		defer idle.Stop()
	}
	note := &noted{zeroTemp: zeroTemp}
	ctx = context.WithValue(ctx, notedKey{}, note)
	t := &Turn{}
	var text strings.Builder
	pieces := 0 // pieces of text or tool calls streamed
	streamed := func() openai.Usage {
		// The server did the work but did not say how much: the prompt,
		// estimated, and what came, counted (a piece is a token on
		// llama.cpp and OpenAI; more if its text is longer).
		n := max(pieces, Estimate(text.String()))
		for _, tc := range t.ToolCalls {
			n = max(n, pieces, Estimate(text.String())+Estimate(tc.Function.Name+tc.Function.Arguments)+4)
		}
		if req.MaxTokens > 0 {
			// The server stops at max_tokens (and is stopped past it,
			// below): more is the estimate's error.
			n = min(n, req.MaxTokens)
		}
		u := openai.Usage{PromptTokens: EstimateMessages(msgs) + EstimateTools(req.Tools), CompletionTokens: n}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		return u
	}
	fail := func(err error) *Error {
		e := c.classify(ctx, err, note, started)
		e.Partial, e.Model = text.String(), t.Model
		if t.Usage.TotalTokens > 0 {
			e.Spent = t.Usage
		} else if started {
			e.Spent = streamed()
		}
		return e
	}
	st, err := c.oc.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return nil, fail(err)
	}
	defer st.Close()
	for {
		chunk, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fail(err)
		}
		if chunk.Model != "" {
			t.Model = chunk.Model
		}
		if chunk.Usage != nil {
			t.Usage = *chunk.Usage
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.Delta.Content != "" || len(ch.Delta.ToolCalls) > 0 || ch.FinishReason != "" {
				started = true
				if idle != nil {
					idle.Reset(c.cfg.FirstToken)
				}
			}
			if ch.Delta.Content != "" || len(ch.Delta.ToolCalls) > 0 {
				pieces++
			}
			if ch.Delta.Content != "" {
				text.WriteString(ch.Delta.Content)
				if opt.OnDelta != nil {
					opt.OnDelta(ch.Delta.Content)
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				t.ToolCalls = mergeToolCall(t.ToolCalls, tc)
			}
			if ch.FinishReason != "" {
				t.Finish = string(ch.FinishReason)
			}
		}
		if req.MaxTokens > 0 && pieces > req.MaxTokens {
			// A server that does not stop at max_tokens is stopped here:
			// what it sends past the cap would be charged past the budget.
			t.Finish = string(openai.FinishReasonLength)
			break
		}
	}
	t.Content = text.String()
	if t.Content == "" && len(t.ToolCalls) == 0 && t.Finish == "" {
		return nil, fail(errEmpty)
	}
	if t.Usage.TotalTokens == 0 && t.Usage.PromptTokens+t.Usage.CompletionTokens == 0 {
		// A server that does not report usage: charge what it streamed.
		t.Usage = streamed()
	}
	return t, nil
}

// noted is what the transport saw of an attempt's answer.
type noted struct {
	url        string
	status     int
	retryAfter string
	// zeroTemp: the request's temperature is 0, which go-openai leaves
	// out of the body (omitempty); the transport writes it in.
	zeroTemp bool
}

type notedKey struct{}

// noting is a RoundTripper that notes the URL asked and the answer's
// status and Retry-After in the request's noted.
type noting struct{ base http.RoundTripper }

func (n noting) RoundTrip(req *http.Request) (*http.Response, error) {
	nt, _ := req.Context().Value(notedKey{}).(*noted)
	if nt != nil && nt.zeroTemp && req.Body != nil {
		if err := zeroTemperature(req); err != nil {
			return nil, err
		}
	}
	resp, err := n.base.RoundTrip(req)
	if nt != nil {
		u := *req.URL
		u.User = nil
		nt.url = u.String()
		if resp != nil {
			nt.status = resp.StatusCode
			nt.retryAfter = resp.Header.Get("Retry-After")
		}
	}
	return resp, err
}

// zeroTemperature writes "temperature":0 into req's JSON body: go-openai
// leaves a zero out (omitempty), and a server's default is not greedy. A
// tiny nonzero value instead is not greedy either on llama.cpp, which
// samples with 1e-45 differently from 0.
func zeroTemperature(req *http.Request) error {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return err
	}
	if len(body) > 0 && body[0] == '{' && !bytes.Contains(body, []byte(`"temperature":`)) {
		body = append([]byte(`{"temperature":0,`), body[1:]...)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	return nil
}

// classify says what an attempt's failure is and whether it is worth
// retrying: transport errors, timeouts, 408, 409, 429 and 5xx are, unless
// the server says the request can never work; other answers are not.
func (c *Client) classify(ctx context.Context, err error, nt *noted, started bool) *Error {
	e := &Error{URL: nt.url, Err: err}
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errCallTime):
		if started {
			// A long answer from a slow model: generating it again would
			// take as long.
			e.Class, e.Err = Timeout, fmt.Errorf("%w (%v; raise timeout in the [llm] section of oxios.toml)", errCallTime, c.cfg.Timeout)
			return e
		}
		e.Class, e.Retry, e.Err = Timeout, true, fmt.Errorf("%w (%v)", errCallTime, c.cfg.Timeout)
		return e
	case errors.Is(cause, errFirstToken):
		e.Class, e.Retry = Timeout, true
		e.Err = fmt.Errorf("%w (%v)", errFirstToken, c.cfg.FirstToken)
		if started {
			e.Err = fmt.Errorf("%w (%v)", errStall, c.cfg.FirstToken)
		}
		return e
	}
	var api *openai.APIError
	var rq *openai.RequestError
	msg := err.Error()
	if nt.status == http.StatusOK && errors.As(err, &api) && api.HTTPStatusCode == 0 {
		// An error event inside the answer's stream: the server is up
		// and said what went wrong (a tool call it could not parse).
		e.Class, e.Err = InStream, fmt.Errorf("the endpoint %s reported an error inside its answer: %s", nt.url, api.Message)
		return e
	}
	switch {
	case errors.As(err, &api):
		e.Status, msg = api.HTTPStatusCode, api.Message
	case errors.As(err, &rq):
		e.Status = rq.HTTPStatusCode
		if len(rq.Body) > 0 {
			msg = strings.TrimSpace(string(rq.Body[:min(len(rq.Body), 300)]))
		}
	}
	if e.Status == 0 && nt.status >= 400 {
		e.Status = nt.status
	}
	if e.Status == 0 {
		e.Class, e.Retry = Transport, true
		if errors.Is(err, errEmpty) {
			e.Class = Server
		}
		return e
	}
	e.Err = fmt.Errorf("HTTP %d from %s: %s", e.Status, nt.url, msg)
	if ra := retryAfter(nt.retryAfter, time.Now()); ra > 0 {
		e.RetryAfter = ra
	}
	low := strings.ToLower(msg)
	switch s := e.Status; {
	case s == 401 || s == 403:
		e.Class = Auth
		e.Err = fmt.Errorf("HTTP %d from %s: %s (the endpoint refused the API key: set key_env in the [llm] section of oxios.toml, or OPENAI_API_KEY)", s, nt.url, msg)
	case s == 404:
		e.Class = NotFound
		e.Err = fmt.Errorf("HTTP 404 from %s: %s (is base_url right, ending in /v1, and does the endpoint serve model %q?)", nt.url, msg, c.cfg.Model)
	case s == 429:
		e.Class, e.Retry = RateLimit, true
	case s == 408 || s == 409:
		e.Class, e.Retry = Transport, true
	case s == 400 || s == 413:
		e.Class = Refused
		if overflow(low) {
			e.Class = Overflow
		}
	case s >= 500:
		e.Class, e.Retry = Server, !permanent(s, low)
		if !e.Retry {
			e.Class = Refused
		}
	default:
		e.Class = Refused
	}
	if e.Retry && e.RetryAfter > c.cfg.MaxRetryAfter && c.cfg.MaxRetryAfter > 0 {
		e.Retry = false
		e.Err = fmt.Errorf("%w (the endpoint asks to wait %v before trying again)", e.Err, e.RetryAfter)
	}
	return e
}

// overflow reports whether a refusal says the prompt is longer than the
// model's context (OpenAI, llama.cpp, vLLM, ollama, Mistral wordings).
func overflow(msg string) bool {
	for _, s := range []string{"context_length_exceeded", "maximum context length", "context length", "context size", "context window", "too many tokens", "prompt is too long", "exceeds the available context"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// permanent reports whether a 5xx answer says the request can never work
// (llama-server without --jinja: "tools param requires --jinja flag").
func permanent(status int, msg string) bool {
	if status == 501 || status == 505 {
		return true
	}
	for _, s := range []string{"--jinja", "not supported", "unsupported", "not implemented"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 && n < 1e6 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func addUsage(u *openai.Usage, d openai.Usage) {
	u.PromptTokens += d.PromptTokens
	u.CompletionTokens += d.CompletionTokens
	u.TotalTokens += d.TotalTokens
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
