package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// The LLM runner as people use one (issue 20): conversations, personas,
// options, streaming, errors by class, the daemon's breaker, a refused
// config said where the user looks. Real oxiosd, real ox-agent, the
// OpenAI wire-format test server.

// userTexts returns the user messages of a request.
func userTexts(q llmtest.Request) []string {
	var out []string
	for _, m := range q.Body.Messages {
		if m.Role == "user" {
			out = append(out, m.Content)
		}
	}
	return out
}

func TestLLMConversationContinue(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{Content: "Hello Ada."},
		llmtest.Turn{Content: "Your name is Ada."},
		llmtest.Turn{Content: "Still Ada."},
	)
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "my name is Ada")
	if r.code != 0 {
		t.Fatalf("first run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	first := records(t, r.stdout)[0]["id"].(string)
	r = d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--continue", "what is my name?")
	if r.code != 0 {
		t.Fatalf("--continue: %d %s %s", r.code, r.stdout, r.stderr)
	}
	second := records(t, r.stdout)[0]["id"].(string)
	q := s.Requests()[1]
	txt := q.Text()
	if !strings.Contains(txt, "user: my name is Ada") || !strings.Contains(txt, "assistant: Hello Ada.") || !strings.HasSuffix(strings.TrimSpace(txt), "user: what is my name?") {
		t.Errorf("the continued run did not send the conversation:\n%s", txt)
	}
	if n := strings.Count(txt, "You are ops, an agent running under Oxios"); n != 1 {
		t.Errorf("the built-in prompt is in the continued conversation %d times", n)
	}
	// Both conversations are kept, versioned in the agent's state.
	ls := d.ox("", "ox-state", "ls", "-a", "ops", "--json", "conversations/")
	if !strings.Contains(ls.stdout, "conversations/"+first) || !strings.Contains(ls.stdout, "conversations/"+second) {
		t.Fatalf("conversations kept: %s %s", ls.stdout, ls.stderr)
	}
	// A named one: the first, not the latest.
	r = d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--conversation", first, "and now?")
	if r.code != 0 {
		t.Fatalf("--conversation: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if u := userTexts(s.Requests()[2]); len(u) != 2 || u[0] != "my name is Ada" || u[1] != "and now?" {
		t.Errorf("--conversation %s sent the user messages %q", first, u)
	}
	// One that is not there: refused before the endpoint is asked, and
	// removed ones are gone.
	d.ox("", "ox-state", "rm", "-a", "ops", "conversations/"+second)
	n := s.Started()
	for _, bad := range [][]string{{"--conversation", second}, {"--conversation", "../policy"}, {"--continue", "--conversation", first}} {
		r = d.ox("", "ox-spawn", append(append([]string{"-a", "ops"}, bad...), "hi")...)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "conversation") {
			t.Errorf("%v: exit %d\n%s%s", bad, r.code, r.stdout, r.stderr)
		}
	}
	// An agent that has nothing yet has no conversation to continue
	// (issue 47: it said "no agent").
	r = d.ox("", "ox-spawn", "-a", "fresh", "-c", "hi")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "no conversation to continue") || strings.Contains(r.stdout+r.stderr, "no agent") {
		t.Errorf("ox-spawn -a fresh -c: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if s.Started() != n {
		t.Errorf("the endpoint was asked for a conversation that is not there")
	}
	// Options of LLM runs are refused for a command.
	if r := d.ox("", "ox-spawn", "-a", "ops", "--continue", "--", "true"); r.code != 2 {
		t.Errorf("--continue with a command: exit %d %s", r.code, r.stderr)
	}
}

func TestLLMPersonaAndOptions(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: "LGTM.", Repeat: -1})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--persona", "reviewer", "--max-tokens", "64", "--temperature", "0.7", "review this")
	if r.code != 0 {
		t.Fatalf("%d %s %s", r.code, r.stdout, r.stderr)
	}
	q := s.Requests()[0].Body
	sys := ""
	for _, m := range q.Messages {
		if m.Role == "system" {
			sys += m.Content + "\n"
		}
	}
	if !strings.Contains(sys, "You review code") {
		t.Errorf("the persona's prompt is not sent:\n%s", sys)
	}
	var tools []string
	for _, tl := range q.Tools {
		tools = append(tools, tl.Function.Name)
	}
	if got := strings.Join(tools, ","); got != "state_read,state_list,recall,finish" {
		t.Errorf("tools offered %s, want the persona's", got)
	}
	// The command line beats the persona (reviewer says 0.1).
	if q.MaxTokens != 64 || q.Temperature < 0.69 || q.Temperature > 0.71 {
		t.Errorf("max_tokens %d temperature %v", q.MaxTokens, q.Temperature)
	}
	// The agent's own persona comes before the shipped one of that name.
	if r := d.ox("system = \"You are the ops agent of this very test.\"\ntemperature = 0.0\n", "ox-state", "save", "-a", "ops", "personas/reviewer"); r.code != 0 {
		t.Fatalf("ox-state save: %d %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "-P", "reviewer", "--system", "Answer in French.", "review again")
	if r.code != 0 {
		t.Fatalf("%d %s %s", r.code, r.stdout, r.stderr)
	}
	q = s.Requests()[1].Body
	sys = ""
	for _, m := range q.Messages {
		if m.Role == "system" {
			sys += m.Content + "\n"
		}
	}
	if !strings.Contains(sys, "Answer in French.") || strings.Contains(sys, "very test") || strings.Contains(sys, "You review code") {
		t.Errorf("--system should replace the agent's persona's prompt:\n%s", sys)
	}
	if q.Temperature > 1e-6 || len(q.Tools) < 5 {
		t.Errorf("the agent's persona: temperature %v, %d tools", q.Temperature, len(q.Tools))
	}
	// An unknown persona or a bad one: refused, saying what there is.
	for _, c := range []struct{ persona, want string }{{"nope", "reviewer"}, {"../x", "want a name"}} {
		r = d.ox("", "ox-spawn", "-a", "ops", "-P", c.persona, "x")
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("persona %q: %d %s %s", c.persona, r.code, r.stdout, r.stderr)
		}
	}
	d.ox("temprature = 1\n", "ox-state", "save", "-a", "ops", "personas/typo")
	if r = d.ox("", "ox-spawn", "-a", "ops", "-P", "typo", "x"); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "unknown key temprature") {
		t.Errorf("a persona with a typo: %d %s %s", r.code, r.stdout, r.stderr)
	}
	for _, bad := range [][]string{{"--temperature", "3"}, {"--max-tokens", "-1"}} {
		if r := d.ox("", "ox-spawn", append(append([]string{"-a", "ops"}, bad...), "x")...); r.code != 2 {
			t.Errorf("%v: exit %d %s", bad, r.code, r.stderr)
		}
	}
	// ox-agent lists them, where each is from, and a broken one with why.
	r = d.ox("", "ox-agent", "-a", "ops", "--personas", "--json")
	from := map[string]any{}
	for _, p := range records(t, r.stdout) {
		from[p["name"].(string)] = p["from"]
		if p["name"] == "typo" && !strings.Contains(p["error"].(string), "temprature") {
			t.Errorf("the broken persona: %v", p)
		}
	}
	if from["ops"] != "shipped" || from["reviewer"] != "agent" || from["terse"] != "shipped" || from["default"] != "shipped" {
		t.Errorf("--personas: %v\n%s", from, r.stderr)
	}
}

func TestLLMStreamDeltas(t *testing.T) {
	t.Parallel()
	answer := "Streaming, piece by piece — with “unicode” and 日本語 too, long enough to be cut in pieces."
	d, _ := llmDaemon(t, "", llmtest.Turn{Content: answer, Pace: llmtest.Duration(30 * time.Millisecond)}, llmtest.Turn{Content: "plain"})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--verbose", "stream")
	if r.code != 0 {
		t.Fatalf("%d %s %s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	var joined strings.Builder
	deltas := ofType(recs, "delta")
	for _, dr := range deltas {
		joined.WriteString(dr["text"].(string))
		if dr["run"] != recs[0]["id"] {
			t.Errorf("delta not stamped with its run: %v", dr)
		}
	}
	if len(deltas) < 2 || joined.String() != answer {
		t.Errorf("%d deltas make %q", len(deltas), joined.String())
	}
	// The message record holds the whole answer, after its deltas.
	msgs := ofType(recs, "message")
	if msgs[len(msgs)-1]["text"] != answer {
		t.Errorf("last message %v", msgs[len(msgs)-1])
	}
	// Off a terminal, without --verbose, records stay as they were: no
	// deltas, in a live run and in a replay.
	r = d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "again")
	if strings.Contains(r.stdout, `"type":"delta"`) || !strings.Contains(r.stdout, `"text":"plain"`) {
		t.Errorf("deltas off a terminal:\n%s", r.stdout)
	}
	a := d.ox("", "ox-attach", recs[0]["id"].(string))
	if strings.Contains(a.stdout, `"type":"delta"`) || !strings.Contains(a.stdout, answer) {
		t.Errorf("replay:\n%s", a.stdout)
	}
}

func TestLLMEndpointErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		turn llmtest.Turn
		code string
		want []string
	}{
		{"auth", llmtest.Turn{Status: 401, Error: "Incorrect API key provided: sk-xx"}, "EACCES", []string{"HTTP 401", "API key"}},
		{"notfound", llmtest.Turn{Status: 404, Error: "page not found"}, "ENOENT", []string{"HTTP 404", "/v1/chat/completions"}},
		{"refused", llmtest.Turn{Status: 501, Error: "chat completions are not implemented here"}, "EINVAL", []string{"HTTP 501", "not implemented"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, s := llmDaemon(t, "", c.turn, llmtest.Turn{Content: "must not be asked"})
			r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "x")
			if r.code != 4 {
				t.Fatalf("exit %d, want 4 (the endpoint failed)\n%s%s", r.code, r.stdout, r.stderr)
			}
			e := ofType(records(t, r.stdout), "error")
			if len(e) != 1 || e[0]["code"] != c.code {
				t.Fatalf("error records %v", e)
			}
			for _, w := range c.want {
				if !strings.Contains(e[0]["text"].(string), w) {
					t.Errorf("%q does not say %q", e[0]["text"], w)
				}
			}
			if n := s.Started(); n != 1 {
				t.Errorf("%d requests: a refusal is not retried", n)
			}
		})
	}
}

// TestLLMSharedBreaker: the breaker lives in the daemon: once one run's
// failures open it, the next run waits for the cooldown instead of
// probing at once.
func TestLLMSharedBreaker(t *testing.T) {
	t.Parallel()
	// The first run's 5 attempts fail; the endpoint is back after.
	d, s := llmDaemon(t, "", llmtest.Turn{Status: 502, Error: "bad gateway", Repeat: 5}, llmtest.Turn{Content: "back"})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "first")
	if r.code != 4 {
		t.Fatalf("first run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st, err := d.client(t).Status(context.Background())
	if err != nil || st.LLMCircuit != "open" {
		t.Fatalf("status after the first run: circuit %q, %v", st.LLMCircuit, err)
	}
	// A run that finds it open fails at once (a cron job does not hang),
	// saying when the endpoint is tried again, and sends nothing.
	n := s.Started()
	r = d.ox("", "ox-spawn", "-a", "other", "--no-memory", "at once")
	if e := ofType(records(t, r.stdout), "error"); r.code != 4 || len(e) != 1 || !strings.Contains(e[0]["text"].(string), "next try at") || s.Started() != n {
		t.Fatalf("a run while the circuit is open: exit %d, %d requests\n%s%s", r.code, s.Started()-n, r.stdout, r.stderr)
	}
	// One that asks to wait does.
	r = d.ox("", "ox-spawn", "-a", "other", "--no-memory", "--wait-endpoint", "second")
	recs := records(t, r.stdout)
	ep := ofType(recs, "endpoint")
	if len(ep) == 0 || ep[0]["event"] != "retry" || !strings.Contains(ep[0]["text"].(string), "circuit open") {
		t.Errorf("the second run did not wait for the open circuit first: %v", ep)
	}
	if r.code != 0 {
		t.Errorf("the run that waited: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Each of its attempts was a probe after a cooldown, let through only
	// when the shared breaker allowed one.
	var probes int
	for _, e := range ep {
		if e["event"] == "half-open" {
			probes++
		}
	}
	if got := s.Started() - n; got != probes || got == 0 {
		t.Errorf("%d requests from the second run, %d probes", got, probes)
	}
}

// TestLLMConfigRefusedVisible: a config file the daemon refuses on reload
// is said by the run (an endpoint record) and by ox-status, not only in
// the daemon's log.
func TestLLMConfigRefusedVisible(t *testing.T) {
	t.Parallel()
	d, _ := llmDaemon(t, "", llmtest.Turn{Content: "ok", Repeat: -1})
	cf := filepath.Join(d.dir, "oxios.toml")
	if err := os.WriteFile(cf, []byte("[llm]\nbase_url = \"http://user:secret@localhost:1/v1\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// SIGHUP: the watcher may not be watching yet so soon after the start.
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the config to be refused", func() bool { return strings.Contains(d.stderr.String(), "config refused") })
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "x")
	if r.code != 0 {
		t.Fatalf("the run should go on with the config in force: %d %s %s", r.code, r.stdout, r.stderr)
	}
	var said bool
	for _, e := range ofType(records(t, r.stdout), "endpoint") {
		said = said || e["event"] == "config" && strings.Contains(e["text"].(string), "credentials")
	}
	if !said || strings.Contains(r.stdout, "secret") {
		t.Errorf("the run does not say the config was refused (or shows the password):\n%s", r.stdout)
	}
	st := d.ox("", "ox-status", "--json", "--config", cf)
	if !strings.Contains(st.stdout, `"check":"config-reload","ok":false`) {
		t.Errorf("ox-status:\n%s", st.stdout)
	}
}

// TestLLMByHand: ox-agent run by hand names its run (no "run":"").
func TestLLMByHand(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: "by hand", Model: "served-model-q4"})
	// By hand, the runner acts for an agent that exists (a run's spawn
	// creates it; a model call does not).
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/x", "y")
	r := run(t, []string{"OXIOS_SOCKET=" + d.sock, "OPENAI_BASE_URL=" + s.URL}, "", "ox-agent", "-a", "ops", "--no-memory", "hello")
	if r.code != 0 {
		t.Fatalf("%d %s %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, `"run":""`) || !strings.Contains(r.stdout, `"run":"hand-`) {
		t.Errorf("records of a run by hand:\n%s", r.stdout)
	}
	// The usage record names the model the server says answered.
	u := ofType(records(t, r.stdout), "usage")
	if len(u) != 1 || u[0]["model"] != "served-model-q4" {
		t.Errorf("usage %v", u)
	}
}

// TestLLMRealServer runs against a real OpenAI-compatible server when
// OXIOS_TEST_LLM_URL names one (a llama-server built from source, started
// with --jinja, for example), and is skipped otherwise.
func TestLLMRealServer(t *testing.T) {
	t.Parallel()
	url := os.Getenv("OXIOS_TEST_LLM_URL")
	if url == "" {
		t.Skip("no real model server: set OXIOS_TEST_LLM_URL (e.g. http://127.0.0.1:8080/v1 of llama-server --jinja) to run this")
	}
	d := startDaemon(t, daemonOpts{config: "[llm]\nbase_url = \"" + url + "\"\nmodel = \"any\"\nfirst_token_timeout = \"2m\"\n"})
	if r := d.ox("", "ox-budget", "set", "-a", "ops", "--run-tokens", "6000"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--max-tokens", "64", "-t", "0", "Say hello in three words, then call finish.")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	var used float64
	for _, u := range ofType(recs, "usage") {
		used = u["run_tokens"].(float64)
		if u["model"] == "" || u["completion_tokens"].(float64) > 64 {
			t.Errorf("usage %v", u)
		}
	}
	if used == 0 || used > 6000 {
		t.Errorf("the run used %v tokens of 6000", used)
	}
	// Continued, the conversation is sent again.
	if r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "-c", "--max-tokens", "64", "And in French?"); r.code != 0 {
		t.Errorf("--continue: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A chat off a terminal: a message a line, each answered in turn.
	r = d.ox("Say one word.\nSay another word.\n", "ox-spawn", "-a", "ops", "-i", "--no-memory", "--max-tokens", "32", "-t", "0")
	if r.code != 0 {
		t.Errorf("-i: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	} else if n := len(ofType(records(t, r.stdout), "usage")); n < 2 {
		t.Errorf("-i: %d answers to 2 messages\n%s", n, r.stdout)
	}
	// An answer of a known shape, which the server is asked for.
	schema := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r = d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--max-tokens", "64", "-t", "0", "--schema", schema, "Give one English word.")
	if res := ofType(records(t, r.stdout), "result"); r.code != 0 || len(res) != 1 {
		t.Errorf("--schema: exit %d, results %v\n%s%s", r.code, res, r.stdout, r.stderr)
	}
}

// TestLLMNoMemoryPileUp: identical runs do not pile up identical
// summaries, and so their prompts do not grow.
func TestLLMNoMemoryPileUp(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: "sda1 is at 91%, WAL files.", Repeat: -1})
	for i := range 3 {
		if r := d.ox("", "ox-spawn", "-a", "ops", "--no-keep", "check the disk"); r.code != 0 {
			t.Fatalf("run %d: %d %s %s", i, r.code, r.stdout, r.stderr)
		}
	}
	q := s.Requests()
	if len(q[1].Text()) != len(q[2].Text()) || !strings.Contains(q[1].Text(), "Outcome: sda1 is at 91%") {
		t.Errorf("the prompt grew from run 2 to run 3:\n%s\n---\n%s", q[1].Text(), q[2].Text())
	}
	r := d.ox("", "ox-recall", "-a", "ops", "--json", "check the disk")
	if n := strings.Count(r.stdout, "Outcome: sda1 is at 91%"); n != 1 {
		t.Errorf("%d identical summaries kept:\n%s", n, r.stdout)
	}
}
