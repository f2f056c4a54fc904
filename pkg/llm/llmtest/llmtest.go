// Package llmtest is a stand-in for a remote model endpoint: an HTTP
// server speaking the OpenAI chat-completions wire format (SSE streaming,
// tool calls, usage, error answers, stalls) that replays scripted turns
// and records every request, for tests, benchmarks and the demo.
package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Call is a tool call the model makes.
type Call struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text, as the model writes it
}

// Turn is one scripted answer.
type Turn struct {
	Content   string `json:"content,omitempty"`
	ToolCalls []Call `json:"tool_calls,omitempty"`
	// Status, if set, answers with this HTTP status and an OpenAI error
	// body carrying Error.
	Status int    `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// RetryAfter, if set, is sent as the Retry-After header of an error
	// answer ("2", or an HTTP date).
	RetryAfter string `json:"retry_after,omitempty"`
	// Delay is waited before the answer starts; Stall after its first
	// chunk, which carries only the role (a server hung before the first
	// token); Pace between two pieces of the text (a slow model).
	Delay Duration `json:"delay,omitempty"`
	Stall Duration `json:"stall,omitempty"`
	Pace  Duration `json:"pace,omitempty"`
	// StallAfter is waited after the text (cut at max_tokens, as a server
	// does) and before the end of the answer: a server that streamed all
	// it was allowed and then hung.
	StallAfter Duration `json:"stall_after,omitempty"`
	// StreamError, if set, ends a 200 answer after its text with an error
	// event inside the stream (llama-server's "Failed to parse tool call").
	StreamError string `json:"stream_error,omitempty"`
	// NoUsage leaves the usage out of the stream, as some servers do.
	NoUsage bool `json:"no_usage,omitempty"`
	// Model is the model the answer says answered (default: the one
	// asked).
	Model string `json:"model,omitempty"`
	// Repeat makes the turn answer this many requests (0 and 1: one; -1:
	// every request from then on).
	Repeat int `json:"repeat,omitempty"`
	// Usage reported; zero means an estimate (4 bytes a token).
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
}

// Duration is a time.Duration written as "250ms" in scripts.
type Duration time.Duration

// UnmarshalJSON reads "1.5s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var f float64
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("duration: want \"250ms\" or seconds, got %s", b)
		}
		*d = Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "250ms".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Request is a request the server got.
type Request struct {
	Body openai.ChatCompletionRequest
	// Raw is the body as sent, Auth its Authorization header.
	Raw    []byte
	Auth   string
	Status int           // what it was answered
	Took   time.Duration // the server's own time, delays included
	// FirstToken is when the first piece of text was written and
	// flushed (zero if none was).
	FirstToken time.Time
}

// Server is a scripted endpoint. Its base URL (ending in /v1) is URL.
type Server struct {
	URL  string
	srv  *http.Server
	ln   net.Listener
	mu   sync.Mutex
	turn []Turn
	left int // answers left of turn[0]
	reqs []Request
	busy time.Duration
	n    int
	got  int // requests begun
	ctx  int // the context window in (estimated) tokens; 0: none
}

// SetContext makes the server refuse, as llama-server does (HTTP 400),
// any request whose prompt is longer than n tokens, estimated as the
// usage it reports is; the refusal takes no turn of the script.
func (s *Server) SetContext(n int) {
	s.mu.Lock()
	s.ctx = n
	s.mu.Unlock()
}

// ContextError is the message of a refusal for a prompt too long.
const ContextError = "the request exceeds the available context size, try increasing it"

// New starts a server on a loopback port with a script.
func New(turns ...Turn) *Server {
	s, err := Listen("127.0.0.1:0", turns...)
	if err != nil {
		panic("llmtest: " + err.Error())
	}
	return s
}

// Listen starts a server on addr.
func Listen(addr string, turns ...Turn) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, URL: "http://" + ln.Addr().String() + "/v1"}
	s.Push(turns...)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"llmtest","object":"model","owned_by":"oxios"}]}`)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// ReadScript reads a JSON array of turns.
func ReadScript(path string) ([]Turn, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t []Turn
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Push appends turns to the script.
func (s *Server) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turn) == 0 && len(turns) > 0 {
		s.left = max(turns[0].Repeat, 1)
	}
	s.turn = append(s.turn, turns...)
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Started returns how many requests have begun (answered or not).
func (s *Server) Started() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// Busy returns the time the server spent answering, delays included.
func (s *Server) Busy() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// next takes the next scripted turn.
func (s *Server) next() (Turn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.turn) == 0 {
		return Turn{}, false
	}
	t := s.turn[0]
	if t.Repeat >= 0 {
		s.left--
		if s.left <= 0 {
			s.turn = s.turn[1:]
			if len(s.turn) > 0 {
				s.left = max(s.turn[0].Repeat, 1)
			}
		}
	}
	return t, true
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.mu.Lock()
	s.got++
	s.mu.Unlock()
	status := http.StatusOK
	var req openai.ChatCompletionRequest
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	// The request is on record before its answer is written: a client
	// that has its answer finds it in Requests.
	s.mu.Lock()
	idx := len(s.reqs)
	s.reqs = append(s.reqs, Request{Body: req, Raw: body, Auth: r.Header.Get("Authorization")})
	s.mu.Unlock()
	defer func() {
		took := time.Since(start)
		s.mu.Lock()
		s.reqs[idx].Status, s.reqs[idx].Took = status, took
		s.busy += took
		s.mu.Unlock()
	}()
	if err != nil {
		status = http.StatusBadRequest
		apiError(w, status, "invalid_request_error", "request body: "+err.Error())
		return
	}
	s.mu.Lock()
	window := s.ctx
	s.mu.Unlock()
	if window > 0 && promptTokens(body) > window {
		status = http.StatusBadRequest
		apiError(w, status, "exceed_context_size_error", ContextError)
		return
	}
	t, ok := s.next()
	if !ok {
		status = http.StatusBadRequest
		apiError(w, status, "invalid_request_error", "llmtest: the script has no turn left")
		return
	}
	if t.Delay > 0 {
		select {
		case <-time.After(time.Duration(t.Delay)):
		case <-r.Context().Done():
			return
		}
	}
	if t.Status != 0 {
		status = t.Status
		msg := t.Error
		if msg == "" {
			msg = http.StatusText(t.Status)
		}
		if t.RetryAfter != "" {
			w.Header().Set("Retry-After", t.RetryAfter)
		}
		apiError(w, status, "server_error", msg)
		return
	}
	s.mu.Lock()
	s.n++
	id := fmt.Sprintf("chatcmpl-%d", s.n)
	s.mu.Unlock()
	usage := openai.Usage{PromptTokens: t.PromptTokens, CompletionTokens: t.CompletionTokens}
	if usage.PromptTokens == 0 {
		usage.PromptTokens = promptTokens(body)
	}
	if usage.CompletionTokens == 0 {
		n := len(t.Content)
		for _, c := range t.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
		usage.CompletionTokens = max(1, n/4)
	}
	finish := openai.FinishReasonStop
	if len(t.ToolCalls) > 0 {
		finish = openai.FinishReasonToolCalls
	}
	if mt := req.MaxTokens; mt > 0 && usage.CompletionTokens > mt {
		// As a real server does: the answer stops at max_tokens.
		keep := len(t.Content) * mt / usage.CompletionTokens
		for keep > 0 && keep < len(t.Content) && !isRuneStart(t.Content[keep]) {
			keep--
		}
		t.Content, t.ToolCalls = t.Content[:keep], nil
		usage.CompletionTokens, finish = mt, openai.FinishReasonLength
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	model := req.Model
	if t.Model != "" {
		model = t.Model
	}
	if !req.Stream {
		msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: t.Content}
		for i, c := range t.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{ID: fmt.Sprintf("call_%d_%d", s.n, i), Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(openai.ChatCompletionResponse{ID: id, Object: "chat.completion", Created: time.Now().Unix(),
			Model: model, Choices: []openai.ChatCompletionChoice{{Message: msg, FinishReason: finish}}, Usage: usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(ch openai.ChatCompletionStreamResponse) {
		ch.ID, ch.Object, ch.Created, ch.Model = id, "chat.completion.chunk", time.Now().Unix(), model
		b, _ := json.Marshal(ch)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if t.Pace > 0 && fl != nil {
			fl.Flush()
		}
	}
	delta := func(d openai.ChatCompletionStreamChoiceDelta) openai.ChatCompletionStreamResponse {
		return openai.ChatCompletionStreamResponse{Choices: []openai.ChatCompletionStreamChoice{{Delta: d}}}
	}
	send(delta(openai.ChatCompletionStreamChoiceDelta{Role: openai.ChatMessageRoleAssistant}))
	if fl != nil {
		fl.Flush()
	}
	if t.Stall > 0 {
		select {
		case <-time.After(time.Duration(t.Stall)):
		case <-r.Context().Done():
			return
		}
	}
	for i, piece := range pieces(t.Content, 16) {
		if t.Pace > 0 && i > 0 {
			select {
			case <-time.After(time.Duration(t.Pace)):
			case <-r.Context().Done():
				return
			}
		}
		send(delta(openai.ChatCompletionStreamChoiceDelta{Content: piece}))
		if i == 0 {
			if fl != nil {
				fl.Flush()
			}
			s.mu.Lock()
			s.reqs[idx].FirstToken = time.Now()
			s.mu.Unlock()
		}
	}
	for i, c := range t.ToolCalls {
		idx := i
		send(delta(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{Index: &idx,
			ID: fmt.Sprintf("call_%d_%d", s.n, i), Type: openai.ToolTypeFunction, Function: openai.FunctionCall{Name: c.Name}}}}))
		for _, piece := range pieces(c.Arguments, 24) {
			send(delta(openai.ChatCompletionStreamChoiceDelta{ToolCalls: []openai.ToolCall{{Index: &idx,
				Function: openai.FunctionCall{Arguments: piece}}}}))
		}
	}
	if fl != nil {
		fl.Flush()
	}
	if t.StallAfter > 0 {
		select {
		case <-time.After(time.Duration(t.StallAfter)):
		case <-r.Context().Done():
			return
		}
	}
	if t.StreamError != "" {
		fmt.Fprintf(w, "data: {\"error\":{\"code\":500,\"message\":%q,\"type\":\"server_error\"}}\n\n", t.StreamError)
		if fl != nil {
			fl.Flush()
		}
		return
	}
	send(openai.ChatCompletionStreamResponse{Choices: []openai.ChatCompletionStreamChoice{{FinishReason: finish}}})
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !t.NoUsage {
		send(openai.ChatCompletionStreamResponse{Choices: []openai.ChatCompletionStreamChoice{}, Usage: &usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// promptTokens is the usage the server reports for a request body when the
// script does not say: 4 bytes a token.
func promptTokens(body []byte) int { return max(1, len(body)/4) }

// pieces cuts s in pieces of about n bytes, on rune boundaries, as a
// model's stream would.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && !isRuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
}

// Text returns the text of a request's messages, for tests that look for
// what reached the model.
func (r Request) Text() string {
	var b strings.Builder
	for _, m := range r.Body.Messages {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			b.WriteString(" [" + tc.Function.Name + " " + tc.Function.Arguments + "]")
		}
		b.WriteByte('\n')
	}
	return b.String()
}
