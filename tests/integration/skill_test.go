package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// TestSkillCLI: ox-skill adds a shipped skill and a folder into the
// agent's versioned state, lists, shows and removes them; bad folders are
// refused whole.
func TestSkillCLI(t *testing.T) {
	t.Parallel()
	d, s := llmDaemon(t, "",
		llmtest.Turn{ToolCalls: []llmtest.Call{call("skill_load", `{"name":"incident-report"}`)}},
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_read", `{"key":"skills/incident-report/template.md"}`)}},
		llmtest.Turn{Content: "done"})

	if r := d.ox("", "ox-skill", "ls", "--shared"); r.code != 0 || !strings.Contains(r.stdout, `"name":"incident-report"`) || !strings.Contains(r.stdout, `"name":"remember-well"`) {
		t.Fatalf("ls --shared: %+v", r)
	}
	if r := d.ox("", "ox-skill", "add", "-a", "ops", "incident-report"); r.code != 0 || !strings.Contains(r.stdout, `"source":"shared"`) {
		t.Fatalf("add shipped: %+v", r)
	}
	if r := d.ox("", "ox-state", "load", "-a", "ops", "skills/incident-report/template.md"); r.code != 0 || !strings.Contains(r.stdout, "## Timeline") {
		t.Fatalf("the skill's file is not in the agent's state: %+v", r)
	}
	if r := d.ox("", "ox-skill", "add", "-a", "ops", "incident-report"); r.code != 1 || !strings.Contains(r.stderr, "EEXIST") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("second add: %+v", r)
	}

	// A folder of our own.
	dir := filepath.Join(t.TempDir(), "pg-vacuum")
	os.MkdirAll(filepath.Join(dir, "ref"), 0o755)
	os.MkdirAll(filepath.Join(dir, ".git"), 0o755)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: pg-vacuum\ndescription: |\n  Vacuum a bloated PostgreSQL table.\n---\nRun VACUUM (VERBOSE) on the table; see ref/howto.md.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "ref", "howto.md"), []byte("vacuum howto"), 0o644)
	os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: x"), 0o644)
	if r := d.ox("", "ox-skill", "add", "-a", "ops", dir); r.code != 0 {
		t.Fatalf("add folder: %+v", r)
	}
	ls := d.ox("", "ox-skill", "ls", "-a", "ops")
	if ls.code != 0 || !strings.Contains(ls.stdout, `"name":"pg-vacuum"`) || !strings.Contains(ls.stdout, `"files":["SKILL.md","ref/howto.md"]`) {
		t.Fatalf("ls: %+v", ls)
	}
	if r := d.ox("", "ox-skill", "show", "-a", "ops", "pg-vacuum"); !strings.HasPrefix(r.stdout, "---\nname: pg-vacuum") {
		t.Fatalf("show: %+v", r)
	}

	// Refused whole: a folder with a bad SKILL.md, a link out of it, a
	// name that is not a skill name; nothing of them is written.
	bad := filepath.Join(t.TempDir(), "bad")
	os.MkdirAll(bad, 0o755)
	os.WriteFile(filepath.Join(bad, "SKILL.md"), []byte("---\nname: Bad Name\ndescription: x\n---\n"), 0o644)
	if r := d.ox("", "ox-skill", "add", "-a", "ops", bad); r.code != 1 || !strings.Contains(r.stderr, "not allowed") {
		t.Fatalf("bad name: %+v", r)
	}
	link := filepath.Join(t.TempDir(), "link")
	os.MkdirAll(link, 0o755)
	os.WriteFile(filepath.Join(link, "SKILL.md"), []byte("---\nname: link\ndescription: x\n---\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(link, "passwd"))
	if r := d.ox("", "ox-skill", "add", "-a", "ops", link); r.code != 1 || !strings.Contains(r.stderr, "symbolic link") {
		t.Fatalf("symlink: %+v", r)
	}
	if r := d.ox("", "ox-skill", "add", "-a", "ops", "no-such-skill"); r.code != 1 || !strings.Contains(r.stderr, "ls --shared") {
		t.Fatalf("unknown name: %+v", r)
	}
	if r := d.ox("", "ox-state", "ls", "-a", "ops", "skills/"); strings.Contains(r.stdout, "skills/link") || strings.Contains(r.stdout, "skills/bad") {
		t.Fatalf("a refused add left keys: %s", r.stdout)
	}

	// An LLM run sees the skills by name and loads one when it asks.
	r := d.ox("", "ox-spawn", "-a", "ops", "the db went down, write it up")
	if r.code != 0 {
		t.Fatalf("ox-spawn: %+v", r)
	}
	reqs := s.Requests()
	if first := reqs[0].Text(); !strings.Contains(first, "- incident-report: Investigate a failure") || !strings.Contains(first, "- pg-vacuum: Vacuum a bloated") || strings.Contains(first, "Gather facts") {
		t.Fatalf("the first request does not list the skills (or shows a body):\n%s", first)
	}
	recs := records(t, r.stdout)
	if lr := toolResults(recs, "skill_load"); len(lr) != 1 || !strings.Contains(lr[0]["text"].(string), "Gather facts") || !strings.Contains(lr[0]["text"].(string), "skills/incident-report/template.md") {
		t.Fatalf("skill_load result: %v", lr)
	}
	if sr := toolResults(recs, "state_read"); len(sr) != 1 || !strings.Contains(sr[0]["text"].(string), "## Timeline") {
		t.Fatalf("reading the skill's file: %v", sr)
	}

	// Skills are versioned with the agent's state.
	d.ox("", "ox-commit", "-a", "ops", "-m", "skills")
	if r := d.ox("", "ox-skill", "rm", "-a", "ops", "pg-vacuum", "nope"); r.code != 1 || !strings.Contains(r.stdout, `"deleted":true`) || !strings.Contains(r.stderr, "no skill nope") {
		t.Fatalf("rm: %+v", r)
	}
	if r := d.ox("", "ox-skill", "ls", "-a", "ops"); strings.Contains(r.stdout, "pg-vacuum") {
		t.Fatalf("removed skill still listed: %s", r.stdout)
	}
	verifyAudit(t, d)
}
