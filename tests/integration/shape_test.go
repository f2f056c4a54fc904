package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// TestAgentSchema: ox-spawn --schema FILE asks the endpoint for an answer
// of that shape (response_format), checks the final answer, asks again
// when it does not match, and prints the value as a result record; an
// answer that never matches ends the run with exit 1 naming the mismatch.
func TestAgentSchema(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{Content: `Sure! {"severity": "high"}`},
		llmtest.Turn{Content: "```json\n{\"severity\": \"high\", \"files\": [\"a.go\"]}\n```"},
		llmtest.Turn{Content: `{"severity": "medium"}`, Repeat: 3},
	)
	schema := filepath.Join(t.TempDir(), "finding.json")
	os.WriteFile(schema, []byte(`{"type":"object","properties":{"severity":{"enum":["low","high"]},"files":{"type":"array","items":{"type":"string"}}},"required":["severity"]}`), 0o644)
	r := d.ox("", "ox-spawn", "-a", "ops", "-n", "--schema", schema, "review", "this")
	if r.code != 0 {
		t.Fatalf("ox-spawn --schema: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	res := ofType(records(t, r.stdout), "result")
	if len(res) != 1 {
		t.Fatalf("%d result records, want 1:\n%s", len(res), r.stdout)
	}
	if v, _ := res[0]["value"].(map[string]any); v["severity"] != "high" || fmt.Sprint(v["files"]) != "[a.go]" {
		t.Fatalf("result value %v", res[0]["value"])
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2 (the first answer asked again)", len(reqs))
	}
	rf := reqs[0].Body.ResponseFormat
	if rf == nil || rf.Type != "json_schema" || rf.JSONSchema == nil || !strings.Contains(string(reqs[0].Raw), `"enum":["low","high"]`) {
		t.Fatalf("the schema was not asked of the endpoint: %s", reqs[0].Raw)
	}
	if txt := reqs[1].Text(); !strings.Contains(txt, "must be only a JSON value matching") || !strings.Contains(txt, "not JSON") {
		t.Fatalf("the second call does not say why the answer was refused:\n%s", txt)
	}
	// Three answers that do not match: exit 1, saying so.
	r = d.ox("", "ox-spawn", "-a", "ops", "-n", "--json", "--schema", schema, "review", "again")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "does not match the schema") {
		t.Fatalf("an answer that never matches: exit %d, want 1 saying so\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := len(ofType(records(t, r.stdout), "result")); n != 0 {
		t.Fatalf("%d result records of a run whose answer did not match", n)
	}
	// A schema that is none is refused before anything runs.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"type": 3}`), 0o644)
	if r := d.ox("", "ox-spawn", "-a", "ops", "-n", "--schema", bad, "x"); r.code != 2 || !strings.Contains(r.stderr, "--schema") {
		t.Fatalf("a bad schema: exit %d %q", r.code, r.stderr)
	}
}

// TestAgentFragmentsAndVars: -f FILE and -f URL add text to the prompt
// (the URL fetched by the run under its agent's [net] policy), and
// -v NAME=VALUE fills a persona's {{NAME}}; a {{NAME}} without a value,
// or a value without a place, is refused naming it.
func TestAgentFragmentsAndVars(t *testing.T) {
	t.Parallel()
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "the runbook says: restart the WAL archiver")
	}))
	defer page.Close()
	d, s := llmDaemon(t, "", llmtest.Turn{Content: "done", Repeat: -1})
	if r := d.ox("", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"net": "allow = [\"127.0.0.1\"]\ntimeout = \"5s\"\nmax_bytes = \"1MiB\""})); r.code != 0 {
		t.Fatalf("ox-policy set: %d %s", r.code, r.stderr)
	}
	frag := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(frag, []byte("sda1 is at 91%\n"), 0o644)
	d.ox("[persona]\n", "ox-state", "save", "-a", "ops", "personas/rev", "system = \"Review {{lang}} code, strictly.\"\n")
	r := d.ox("", "ox-spawn", "-a", "ops", "-n", "-f", frag, "-f", page.URL+"/runbook", "-P", "rev", "--var", "lang=go", "what", "now")
	if r.code != 0 {
		t.Fatalf("ox-spawn -f -f -P -v: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	txt := s.Requests()[0].Text()
	for _, want := range []string{"Fragment " + frag + ":\nsda1 is at 91%", "Fragment " + page.URL + "/runbook:\nthe runbook says", "Review go code, strictly."} {
		if !strings.Contains(txt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, txt)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-P", "rev"}, "give --var lang=VALUE"},
		{[]string{"-P", "rev", "--var", "lang=go", "--var", "lnag=go"}, "has no {{lnag}}"},
		{[]string{"--var", "lang=go"}, "no persona"},
		{[]string{"-f", "http://10.255.255.1/x"}, "fragment http://10.255.255.1/x"},
	} {
		r := d.ox("", "ox-spawn", append(append([]string{"-a", "ops", "-n"}, c.args...), "go")...)
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("ox-spawn %v: exit %d, want a failure saying %q\n%s\n%s", c.args, r.code, c.want, r.stdout, r.stderr)
		}
	}
}
