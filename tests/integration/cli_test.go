package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// jsonLines decodes each line of out into a map.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestFlagsAfterArgs runs every command with its flags after its
// arguments, the way git and kubectl users type them, and checks that the
// flags took effect (not that the command merely exited 0).
func TestFlagsAfterArgs(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	mustOK := func(r result, what string) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		return r
	}

	// ox-remember: the text is "note about", the kind semantic.
	r := mustOK(d.ox("", "ox-remember", "note about", "-a", "ops", "--kind", "semantic", "-t", "x"), "ox-remember")
	mem := jsonLines(t, r.stdout)[0]
	if mem["kind"] != "semantic" {
		t.Fatalf("ox-remember with flags last stored %v", mem)
	}
	d.ox("", "ox-remember", "-a", "ops", "cats sleep all day")
	d.ox("", "ox-remember", "-a", "ops", "dogs bark at night")

	// ox-recall: -k 1 limits, and is not part of the query.
	r = mustOK(d.ox("", "ox-recall", "note about", "-a", "ops", "-k", "1"), "ox-recall")
	if recs := jsonLines(t, r.stdout); len(recs) != 1 || recs[0]["text"] != "note about" {
		t.Fatalf("ox-recall QUERY -k 1 gave %d records:\n%s", len(recs), r.stdout)
	}

	// ox-state: every subcommand, the agent given last.
	mustOK(d.ox("", "ox-state", "save", "notes/today.md", "hello", "-a", "ops"), "ox-state save")
	r = mustOK(d.ox("", "ox-state", "load", "notes/today.md", "-a", "ops"), "ox-state load")
	if r.stdout != "hello" {
		t.Fatalf("ox-state load KEY -a ops = %q", r.stdout)
	}
	r = mustOK(d.ox("", "ox-state", "ls", "notes", "-a", "ops", "--json"), "ox-state ls")
	if !strings.Contains(r.stdout, `"notes/today.md"`) {
		t.Fatalf("ox-state ls PREFIX -a ops:\n%s", r.stdout)
	}
	// "--" ends the flags: a key that looks like a flag.
	mustOK(d.ox("", "ox-state", "save", "-a", "ops", "--", "-weird-key", "v"), "ox-state save -- -weird-key")
	r = mustOK(d.ox("", "ox-state", "rm", "-a", "ops", "--", "-weird-key"), "ox-state rm -- -weird-key")
	if !strings.Contains(r.stdout, `"-weird-key"`) {
		t.Fatalf("ox-state rm -- -weird-key:\n%s", r.stdout)
	}
	mustOK(d.ox("", "ox-state", "rm", "notes/today.md", "-a", "ops"), "ox-state rm")

	// ox-spawn: "--" keeps the command's own flags its own.
	r = mustOK(d.ox("", "ox-spawn", "-a", "ops", "-n", "--", "echo", "--flag", "-a", "x"), "ox-spawn --")
	if !strings.Contains(r.stdout, "--flag -a x") {
		t.Fatalf("ox-spawn -- echo --flag -a x:\n%s", r.stdout)
	}
	// A detached run, the flags after the command.
	r = mustOK(d.ox("", "ox-spawn", "-n", "-a", "ops", "-d", "--", "sleep", "60"), "ox-spawn -d")
	run := jsonLines(t, r.stdout)[0]["id"].(string)
	r = mustOK(d.ox("", "ox-ps", "-a", "ops", "--json"), "ox-ps")
	if !strings.Contains(r.stdout, run) {
		t.Fatalf("ox-ps does not list %s:\n%s", run, r.stdout)
	}
	r = mustOK(d.ox("", "ox-kill", run, "-s", "KILL"), "ox-kill RUN -s KILL")
	r = d.ox("", "ox-wait", run, "--json")
	if !strings.Contains(r.stdout, `"signal":"KILL"`) && !strings.Contains(r.stdout, `"signal":9`) && !strings.Contains(r.stdout, "KILL") {
		t.Fatalf("ox-wait RUN --json after ox-kill RUN -s KILL (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = d.ox("", "ox-attach", run, "--json")
	if r.code == 2 {
		t.Fatalf("ox-attach RUN --json: usage error: %s", r.stderr)
	}

	// ox-exec: the command's flags after "--" are its own.
	r = mustOK(d.ox("", "ox-exec", "-a", "ops", "--", "echo", "-n", "x"), "ox-exec --")
	if r.stdout != "x" {
		t.Fatalf("ox-exec -- echo -n x:\n%s", r.stdout)
	}
	r = mustOK(d.ox("", "ox-exec", "echo", "hi", "-a", "ops"), "ox-exec COMMAND -a")
	if r.stdout != "hi\n" {
		t.Fatalf("ox-exec echo hi -a ops:\n%s", r.stdout)
	}

	// ox-commit: commit, then log with -n after the revision.
	mustOK(d.ox("", "ox-state", "save", "a", "1", "-a", "ops"), "save a")
	mustOK(d.ox("", "ox-commit", "-a", "ops", "-m", "one"), "ox-commit")
	mustOK(d.ox("", "ox-state", "save", "a", "2", "-a", "ops"), "save a")
	mustOK(d.ox("", "ox-commit", "-a", "ops", "-m", "two"), "ox-commit")
	r = mustOK(d.ox("", "ox-commit", "log", "HEAD", "-n", "1", "-a", "ops"), "ox-commit log REV -n 1")
	if recs := jsonLines(t, r.stdout); len(recs) != 1 {
		t.Fatalf("ox-commit log HEAD -n 1 gave %d records", len(recs))
	}
	r = mustOK(d.ox("", "ox-commit", "diff", "HEAD~1", "-a", "ops", "--patch"), "ox-commit diff REV --patch")
	if !strings.Contains(r.stdout, "+2") {
		t.Fatalf("ox-commit diff HEAD~1 --patch:\n%s", r.stdout)
	}

	// ox-policy: check OP ARG with the agent last.
	r = mustOK(d.ox("", "ox-policy", "check", "state.save", "notes/x", "-a", "ops"), "ox-policy check")
	if !strings.Contains(r.stdout, `"allowed":true`) {
		t.Fatalf("ox-policy check OP ARG -a ops:\n%s", r.stdout)
	}

	// ox-schedule: add with the flags after the task, rm NAME -a.
	// After "--" the flags are the command's: no --name was given.
	if r = d.ox("", "ox-schedule", "add", "-a", "ops", "--", "true", "--name", "j1", "--cron", "@daily"); r.code == 0 {
		t.Fatalf("ox-schedule add -- true --name j1 took --name as its own:\n%s", r.stdout)
	}
	mustOK(d.ox("", "ox-schedule", "add", "tidy", "up", "-a", "ops", "--name", "j2", "--cron", "@daily"), "ox-schedule add TASK --name")
	r = mustOK(d.ox("", "ox-schedule", "rm", "j2", "-a", "ops"), "ox-schedule rm NAME -a")

	// ox-forget: an id, then the agent.
	id := mem["id"].(string)
	r = mustOK(d.ox("", "ox-forget", id, "-a", "ops"), "ox-forget ID -a")
	if !strings.Contains(r.stdout, id) {
		t.Fatalf("ox-forget ID -a ops:\n%s", r.stdout)
	}

	// ox-audit: get SEQ --json.
	r = mustOK(d.ox("", "ox-audit", "show", "1", "--json"), "ox-audit show SEQ --json")
	if !strings.Contains(r.stdout, `"seq":1`) {
		t.Fatalf("ox-audit show 1 --json:\n%s", r.stdout)
	}
}
