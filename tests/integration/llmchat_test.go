package integration

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// Model calls go through the kernel (llm.chat): the key stays in oxiosd,
// the budget holds whatever the endpoint does, and failures are said as
// what they are.

// llmDaemonEnv is llmDaemon with env added to oxiosd's environment.
func llmDaemonEnv(t *testing.T, extra string, env []string, turns ...llmtest.Turn) (*daemon, *llmtest.Server) {
	t.Helper()
	s := llmtest.New(turns...)
	t.Cleanup(s.Close)
	cfg := fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"test-model\"\ntimeout = \"5s\"\nretries = 4\nprompt_price = 1.0\ncompletion_price = 2.0\n%s", s.URL, extra)
	return startDaemon(t, daemonOpts{config: cfg, env: env}), s
}

// usedTokens is what ox-budget says agent used.
func usedTokens(t *testing.T, d *daemon, agent string) int64 {
	t.Helper()
	r := d.ox("", "ox-budget", "show", "-a", agent, "--json")
	var rec struct {
		Used struct {
			Tokens int64 `json:"tokens"`
		} `json:"used"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rec) != nil {
		t.Fatalf("ox-budget show: %d %s %s", r.code, r.stdout, r.stderr)
	}
	return rec.Used.Tokens
}

// descendants returns pid and every process below it.
func descendants(pid int) []int {
	out := []int{pid}
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 1 {
				parent[p], _ = strconv.Atoi(f[1])
			}
		}
	}
	for i := 0; i < len(out); i++ {
		for p, pp := range parent {
			if pp == out[i] {
				out = append(out, p)
			}
		}
	}
	return out
}

// TestLLMKeyNotInRun, tried as an attacker in an LLM run would: the
// endpoint's key is nowhere in the run's world (the environment and
// command line of its processes, its files, what its tools see), and a
// direct call to the endpoint from the run fails without the network.
// The kernel made the calls, with the key.
func TestLLMKeyNotInRun(t *testing.T) {
	t.Parallel()
	var rnd [12]byte
	rand.Read(rnd[:])
	key := "sk-oxios-" + hex.EncodeToString(rnd[:])
	probe := `env; echo ---; for p in /proc/[0-9]*; do tr '\0' '\n' < $p/environ; tr '\0' ' ' < $p/cmdline; echo; done 2>/dev/null; echo ---; grep -rs sk-oxios- $HOME /tmp /run /work 2>/dev/null; echo ---; ` +
		`perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $ARGV[0], Proto => "tcp", Timeout => 3) or die "connect: $!\n"; print "connected\n"' PORT; echo "net rc=$?"`
	s := llmtest.New()
	t.Cleanup(s.Close)
	port := s.URL[strings.LastIndexByte(s.URL, ':')+1 : strings.LastIndexByte(s.URL, '/')]
	probe = strings.ReplaceAll(probe, "PORT", port)
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", probe}})
	s.Push(llmtest.Turn{ToolCalls: []llmtest.Call{call("exec", string(args))}, Delay: llmtest.Duration(time.Second)},
		llmtest.Turn{Content: "done"})
	cfg := fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"test-model\"\nkey_env = \"OXIOS_TEST_LLM_KEY\"\n", s.URL)
	d := startDaemon(t, daemonOpts{config: cfg, env: []string{"OXIOS_TEST_LLM_KEY=" + key}})
	pol := writePolicy(t, "[exec]\nallow = [\"sh\", \"perl\", \"grep\", \"tr\", \"env\", \"cat\"]\nshell = true\n")
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", pol)

	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "-d", "look around")
	var run struct {
		ID  string
		PID int
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil {
		t.Fatalf("ox-spawn -d: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// While the runner waits in its first model call: its processes'
	// environments and command lines, and its workspace.
	waitFor(t, "the run to ask the model", func() bool { return s.Started() > 0 })
	for _, pid := range descendants(run.PID) {
		for _, f := range []string{"environ", "cmdline"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			if err == nil && (strings.Contains(string(b), key) || strings.Contains(string(b), s.URL)) {
				t.Errorf("the run's process %d has the endpoint or its key in its %s: %q", pid, f, b)
			}
		}
	}
	filepath.Walk(filepath.Join(d.data, "work", "ops"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), key) {
				t.Errorf("the key is in the run's file %s", p)
			}
		}
		return nil
	})
	w := d.ox("", "ox-wait", run.ID)
	a := d.ox("", "ox-attach", "--json", run.ID)
	if w.code != 0 {
		t.Fatalf("the run: exit %d\n%s", w.code, a.stdout)
	}
	res := toolResults(records(t, a.stdout), "exec")
	if len(res) != 1 {
		t.Fatalf("exec results %v", res)
	}
	out := res[0]["text"].(string)
	t.Logf("what the run's exec saw:\n%s", out)
	if strings.Contains(out, key) || strings.Contains(out, "OXIOS_LLM_KEY") || strings.Contains(out, "OXIOS_TEST_LLM_KEY") {
		t.Errorf("the key is in the run's world:\n%s", out)
	}
	if !strings.Contains(out, "net rc=") || strings.Contains(out, "\nconnected\n") || strings.Contains(out, "net rc=0") ||
		!strings.Contains(out, "unreachable") && !strings.Contains(out, "refused") {
		t.Errorf("a direct call to the endpoint from the run did not fail:\n%s", out)
	}
	// The kernel made both calls, with the key.
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	for _, q := range reqs {
		if q.Auth != "Bearer "+key {
			t.Errorf("a model call went with Authorization %q, not the key", q.Auth)
		}
	}
}

// TestLLMBudgetHoldsUnderStalls: an endpoint that streams all max_tokens
// allows and then stalls, without reporting usage, is retried; every
// attempt's max_tokens is what the budget has left then, each attempt is
// charged what it streamed, and the run ends over budget having spent no
// more than its budget and one answer's cap. The failed attempts' text is
// not shown as an answer.
func TestLLMBudgetHoldsUnderStalls(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "first_token_timeout = \"300ms\"\n",
		llmtest.Turn{Content: strings.Repeat("spend ", 8000), StallAfter: llmtest.Duration(time.Minute), NoUsage: true, Repeat: -1})
	d.mustOx(t, "", "ox-budget", "set", "-a", "ops", "--run-tokens", "5000")
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "--max-tokens", "1000", "write a lot")
	if r.code != 3 {
		t.Fatalf("exit %d, want 3 (over budget)\n%s%s", r.code, r.stdout, r.stderr)
	}
	reqs := s.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d attempts: want the stall retried", len(reqs))
	}
	maxCap := 0
	for i, q := range reqs {
		maxCap = max(maxCap, q.Body.MaxTokens)
		if i > 0 && q.Body.MaxTokens > reqs[i-1].Body.MaxTokens {
			t.Errorf("attempt %d asked max_tokens %d after %d: the budget left did not shrink", i+1, q.Body.MaxTokens, reqs[i-1].Body.MaxTokens)
		}
	}
	used := usedTokens(t, d, "ops")
	if used <= 0 || used > 5000+int64(maxCap) {
		t.Errorf("charged %d tokens for a run budget of 5000 (largest cap %d, %d attempts)", used, maxCap, len(reqs))
	}
	t.Logf("%d attempts, max_tokens %d first, %d last; %d tokens charged of 5000", len(reqs), reqs[0].Body.MaxTokens, reqs[len(reqs)-1].Body.MaxTokens, used)
	recs := records(t, r.stdout)
	for _, m := range ofType(recs, "message") {
		if m["role"] == "assistant" && strings.Contains(m["text"].(string), "spend spend") {
			t.Errorf("a failed attempt's text is shown as an answer")
		}
	}
	discarded := 0
	for _, e := range ofType(recs, "endpoint") {
		if e["event"] == "discarded" {
			discarded++
		}
	}
	if discarded == 0 {
		t.Errorf("no record says a failed attempt's text was discarded:\n%s", r.stdout)
	}
	if e := ofType(recs, "error"); len(e) != 1 || e[0]["code"] != "EDQUOT" {
		t.Errorf("error records %v", e)
	}
}

// TestLLMKilledMidStreamCharged: a run killed while its answer streams is
// charged what streamed (the server never said), and the call is audited.
func TestLLMKilledMidStreamCharged(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: strings.Repeat("slowly ", 400), Pace: llmtest.Duration(20 * time.Millisecond), NoUsage: true})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "-d", "talk")
	var run struct{ ID string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &run) != nil {
		t.Fatalf("ox-spawn -d: %d %s %s", r.code, r.stdout, r.stderr)
	}
	waitFor(t, "the answer to stream", func() bool { q := s.Requests(); return len(q) > 0 && !q[0].FirstToken.IsZero() })
	time.Sleep(300 * time.Millisecond)
	d.ox("", "ox-kill", "-s", "KILL", run.ID)
	if w := d.ox("", "ox-wait", run.ID); w.code != 137 {
		t.Fatalf("ox-wait after KILL: %d %s", w.code, w.stdout)
	}
	waitFor(t, "the streamed tokens to be charged", func() bool { return usedTokens(t, d, "ops") > 0 })
	au := d.ox("", "ox-audit", "log", "--op", "llm.chat")
	if !strings.Contains(au.stdout, "ECANCELED") || !strings.Contains(au.stdout, "ops:test-model") {
		t.Errorf("the killed call is not audited: %s", au.stdout)
	}
	// ox-budget show with no agent: every agent's use, one record each.
	all := d.ox("", "ox-budget", "show", "--json")
	recs := records(t, all.stdout)
	if all.code != 0 || len(recs) == 0 || recs[0]["agent"] != "ops" {
		t.Errorf("ox-budget show with no agent: %d %s %s", all.code, all.stdout, all.stderr)
	}
}

// TestLLMErrorInStreamNotDown: an error the server sends inside a 200
// answer (llama-server's tool-call parse error) fails the run as what it
// is (EPROTO, exit 4), is not retried, and leaves the breaker closed: the
// next run goes at once.
func TestLLMErrorInStreamNotDown(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: "x", StreamError: "Failed to parse tool call"}, llmtest.Turn{Content: "fine"})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "first")
	e := ofType(records(t, r.stdout), "error")
	if r.code != 4 || len(e) != 1 || e[0]["code"] != "EPROTO" || !strings.Contains(e[0]["text"].(string), "Failed to parse tool call") {
		t.Fatalf("exit %d, errors %v\n%s", r.code, e, r.stderr)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests: an error inside an answer is not retried", n)
	}
	st, err := d.client(t).Status(t.Context())
	if err != nil || st.LLMCircuit != "closed" {
		t.Errorf("circuit %q after an error inside an answer (%v)", st.LLMCircuit, err)
	}
	if r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "second"); r.code != 0 {
		t.Errorf("the next run: exit %d\n%s", r.code, r.stdout)
	}
}

// TestLLMNamedModels: [models.NAME] in oxios.toml names a model with its
// own endpoint, key, prices and options; ox-spawn -m NAME asks it, and
// ox-agent --models lists the models with their endpoints' health.
func TestLLMNamedModels(t *testing.T) {
	t.Parallel()
	big := llmtest.New(llmtest.Turn{Content: "a big answer", PromptTokens: 100, CompletionTokens: 10})
	t.Cleanup(big.Close)
	extra := fmt.Sprintf("\n[models.big]\nbase_url = %q\nmodel = \"big-model-v2\"\nkey_env = \"OXIOS_TEST_BIG_KEY\"\nprompt_price = 10.0\ncompletion_price = 20.0\nmax_tokens = 500\ntemperature = 0.0\n", big.URL)
	d, small := llmDaemonEnv(t, extra, []string{"OXIOS_TEST_BIG_KEY=sk-big"}, llmtest.Turn{Content: "small"})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "-m", "big", "think big")
	if r.code != 0 || !strings.Contains(r.stdout, "a big answer") {
		t.Fatalf("ox-spawn -m big: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(small.Requests()) != 0 || len(big.Requests()) != 1 {
		t.Fatalf("requests: %d to [llm]'s endpoint, %d to big's", len(small.Requests()), len(big.Requests()))
	}
	q := big.Requests()[0]
	if q.Body.Model != "big-model-v2" || q.Auth != "Bearer sk-big" || q.Body.MaxTokens != 500 || !strings.Contains(string(q.Raw), `"temperature":0,`) {
		t.Errorf("the call to big: model %q, auth %q, max_tokens %d, body %.200s", q.Body.Model, q.Auth, q.Body.MaxTokens, q.Raw)
	}
	// Priced at big's prices: 100 * 10 + 10 * 20 per million.
	b := d.ox("", "ox-budget", "show", "-a", "ops", "--json")
	if !strings.Contains(b.stdout, `"cost":0.0012`) {
		t.Errorf("budget after a call of big: %s", b.stdout)
	}
	m := d.ox("", "ox-agent", "--models", "--json")
	recs := records(t, m.stdout)
	if m.code != 0 || len(recs) != 2 || recs[0]["name"] != "test-model" || recs[0]["default"] != true ||
		recs[1]["name"] != "big" || recs[1]["model"] != "big-model-v2" || recs[1]["state"] != "closed" {
		t.Errorf("ox-agent --models: %d %s %s", m.code, m.stdout, m.stderr)
	}
}

// TestLLMPlainChatWithoutTools: an endpoint that refuses tools
// (llama-server without --jinja) is asked again without them, and the run
// answers as a plain chat.
func TestLLMPlainChatWithoutTools(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "", llmtest.Turn{Status: 500, Error: "tools param requires --jinja flag"}, llmtest.Turn{Content: "plain answer"})
	r := d.ox("", "ox-spawn", "-a", "ops", "--no-memory", "x")
	if r.code != 0 || !strings.Contains(r.stdout, "plain answer") || !strings.Contains(r.stdout, `"event":"no-tools"`) {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	q := s.Requests()
	if len(q) != 2 || len(q[0].Body.Tools) == 0 || strings.Contains(string(q[1].Raw), `"tools"`) {
		t.Errorf("%d requests; the second: %.300s", len(q), q[len(q)-1].Raw)
	}
}
