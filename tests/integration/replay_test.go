package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// TestReplay: a run of the scripted model (a state write, a read, a
// final answer) replays with the endpoint gone to the same tool calls
// and results, in a fork that leaves the agent's state alone; once the
// agent's policy refuses the write, the replay names that step and exits
// 1.
func TestReplay(t *testing.T) {
	noRace(t)
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{ToolCalls: []llmtest.Call{
			call("state_write", `{"key":"notes/x","value":"hi"}`),
			call("state_read", `{"key":"notes/x"}`),
		}, PromptTokens: 100, CompletionTokens: 10},
		llmtest.Turn{Content: "Saved hi and read it back.", PromptTokens: 120, CompletionTokens: 8},
	)
	r := d.ox("", "ox-spawn", "-a", "rp", "keep", "hi")
	if r.code != 0 {
		t.Fatalf("ox-spawn: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	run := recs[0]["id"].(string)
	// What the run did is changed since: the replay must not touch it.
	d.mustOx(t, "later", "ox-state", "save", "-a", "rp", "notes/x")
	spent := usedTokens(t, d, "rp")
	calls := len(s.Requests())
	s.Close() // no model to ask: the replay serves the recorded answers

	rep := d.ox("", "ox-replay", "--json", run)
	if rep.code != 0 {
		t.Fatalf("ox-replay: exit %d\n%s\n%s", rep.code, rep.stdout, rep.stderr)
	}
	var got replayed
	if err := json.Unmarshal([]byte(rep.stdout), &got); err != nil {
		t.Fatalf("ox-replay --json: %v\n%s", err, rep.stdout)
	}
	if got.Type != "replay" || !got.Matched || got.Of != run || got.Answers != 2 || got.ToolCalls != 2 || got.Agent != "rp-replay-"+run {
		t.Fatalf("replay record %+v", got)
	}
	if n := len(s.Requests()); n != calls {
		t.Errorf("the replay asked the model: %d requests, %d before", n, calls)
	}
	if u := usedTokens(t, d, "rp"); u != spent {
		t.Errorf("the replay spent budget: %d tokens used, %d before", u, spent)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "rp", "notes/x"); v != "later" {
		t.Errorf("the replay changed the agent's state: notes/x = %q", v)
	}
	if ls := d.mustOx(t, "", "ox-agents", "ls", "--json"); strings.Contains(ls, "rp-replay") {
		t.Errorf("the fork was not removed:\n%s", ls)
	}

	// Today's policy refuses the write: the replay stops there.
	pol := writePolicy(t, "[state]\nread = [\"**\"]\nwrite = [\"other/**\"]\n")
	d.mustOx(t, "", "ox-policy", "set", "-a", "rp", pol)
	rep = d.ox("", "ox-replay", "--keep", run)
	got = replayed{}
	if err := json.Unmarshal([]byte(rep.stdout), &got); err != nil || rep.code != 1 {
		t.Fatalf("ox-replay after the policy change: exit %d %v\n%s\n%s", rep.code, err, rep.stdout, rep.stderr)
	}
	if got.Matched || got.Turn != 1 || got.Step != 1 || got.Tool != "state_write" || got.Want != "saved notes/x (2 bytes)" ||
		!strings.Contains(got.Got, "EPERM") || !strings.Contains(got.Text, "answer 1, tool call 1 (state_write") {
		t.Fatalf("divergence %+v", got)
	}
	// --keep kept the fork, under today's policy, without the write.
	if r := d.ox("", "ox-state", "load", "-a", "rp-replay-"+run, "notes/x"); r.stdout != "later" {
		t.Errorf("the kept fork: notes/x %q %s", r.stdout, r.stderr)
	}
	if r := d.ox("", "ox-replay", run); r.code != 1 || !strings.Contains(r.stderr, "exists") {
		t.Errorf("a replay into a kept fork's name: exit %d %s", r.code, r.stderr)
	}

	// Asked afresh, a model that now writes another key: the first
	// answer's call differs, and the replay says so.
	s2, err := llmtest.Listen(strings.TrimPrefix(strings.TrimSuffix(s.URL, "/v1"), "http://"),
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_write", `{"key":"other/y","value":"hi"}`)}},
		llmtest.Turn{Content: "Saved hi elsewhere."})
	if err != nil {
		t.Fatalf("the model's address again: %v", err)
	}
	defer s2.Close()
	rep = d.ox("", "ox-replay", "--as", "rp-afresh", "--model", "test-model", run)
	got = replayed{}
	if err := json.Unmarshal([]byte(rep.stdout), &got); err != nil || rep.code != 1 {
		t.Fatalf("ox-replay --model: exit %d %v\n%s\n%s", rep.code, err, rep.stdout, rep.stderr)
	}
	if got.Turn != 1 || got.Step != 1 || got.Want != `state_write {"key":"notes/x","value":"hi"}` || got.Got != `state_write {"key":"other/y","value":"hi"}` {
		t.Fatalf("afresh divergence %+v", got)
	}
	if n := len(s2.Requests()); n != 2 {
		t.Errorf("the model asked afresh %d times, want 2 (the run goes on to its own end)", n)
	}

	// A command run has no answers to replay.
	c := d.ox("", "ox-spawn", "-a", "rp", "--", "true")
	if c.code != 0 {
		t.Fatalf("ox-spawn: %s", c.stderr)
	}
	if r := d.ox("", "ox-replay", records(t, c.stdout)[0]["id"].(string)); r.code != 1 || !strings.Contains(r.stderr, "no answer of a model") {
		t.Errorf("replaying a command run: exit %d %s", r.code, r.stderr)
	}
	if v := d.mustOx(t, "", "ox-audit", "verify"); !strings.Contains(v, `"ok":true`) {
		t.Errorf("ox-audit verify: %s", v)
	}
}

// replayed is ox-replay's report (its replay record).
type replayed struct {
	Type      string `json:"type"`
	Of        string `json:"of"`
	Agent     string `json:"agent"`
	Matched   bool   `json:"matched"`
	Answers   int    `json:"answers"`
	ToolCalls int    `json:"tool_calls"`
	Turn      int    `json:"turn"`
	Step      int    `json:"step"`
	Tool      string `json:"tool"`
	Want      string `json:"want"`
	Got       string `json:"got"`
	Text      string `json:"text"`
}

// TestReplayWork: a run that worked on a folder (--work) replays on a
// copy-on-write workspace of it, whose changes are thrown away after; a
// file added to the folder since makes the replay's ls differ from the
// recorded one.
func TestReplayWork(t *testing.T) {
	noRace(t)
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{ToolCalls: []llmtest.Call{call("exec", `{"argv":["touch","new.txt"]}`), call("exec", `{"argv":["ls"]}`)}},
		llmtest.Turn{Content: "Two files: a.txt and new.txt."},
	)
	dir := filepath.Join(d.dir, "proj")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := strings.Replace(defaultPolicy(t), "None by default.\nallow = []", "None by default.\nallow = [\""+d.dir+"/**\"]", 1)
	pol = strings.Replace(pol, `allow = ["cat", `, `allow = ["touch", "cat", `, 1)
	d.mustOx(t, "", "ox-policy", "set", "-a", "wk", writePolicy(t, pol))
	r := d.ox("", "ox-spawn", "-a", "wk", "--work", dir, "list the files")
	if r.code != 0 {
		t.Fatalf("ox-spawn --work: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	run := records(t, r.stdout)[0]["id"].(string)
	s.Close()

	rep := d.ox("", "ox-replay", run)
	var got replayed
	if err := json.Unmarshal([]byte(rep.stdout), &got); err != nil || rep.code != 0 || !got.Matched {
		t.Fatalf("ox-replay of a run on a folder: exit %d %v\n%s\n%s", rep.code, err, rep.stdout, rep.stderr)
	}
	works := records(t, d.mustOx(t, "", "ox-work", "ls", "--json"))
	if len(works) != 2 {
		t.Fatalf("%d works, want the run's and the replay's: %v", len(works), works)
	}
	for _, w := range works {
		if want := map[bool]string{true: "pending", false: "discarded"}[w["agent"] == "wk"]; w["state"] != want || w["changes"] != 1.0 {
			t.Errorf("work of %s: %v, want %s with 1 change", w["agent"], w, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Error("the replay changed the folder")
	}

	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep = d.ox("", "ox-replay", run)
	got = replayed{}
	if err := json.Unmarshal([]byte(rep.stdout), &got); err != nil || rep.code != 1 {
		t.Fatalf("ox-replay after the folder changed: exit %d %v\n%s\n%s", rep.code, err, rep.stdout, rep.stderr)
	}
	if got.Turn != 1 || got.Step != 2 || got.Tool != "exec" || !strings.Contains(got.Want, "a.txt\nnew.txt") || !strings.Contains(got.Got, "a.txt\nb.txt\nnew.txt") {
		t.Fatalf("divergence %+v", got)
	}
}
