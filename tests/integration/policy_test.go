package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Policies: ox-policy show/set/check/test, and the kernel enforcing an
// agent's policy on its runs through the socket and the mount.

// strictPolicy's quota holds three small keys (each counts 256 bytes
// besides its value), not a fourth of 100 bytes.
const strictPolicy = `[state]
read = ["notes/**", "public/*"]
write = ["notes/**"]
quota = "1100"

[memory]
kinds = ["episodic"]

[exec]
allow = ["echo"]
`

// runOutput runs a shell script as a process run of agent and returns its
// output lines joined.
func runOutput(t *testing.T, d *daemon, agent, script string) string {
	t.Helper()
	r := d.ox("", "ox-spawn", "-a", agent, "--", "/bin/sh", "-c", script)
	var lines []string
	for _, o := range ofType(records(t, r.stdout), "output") {
		lines = append(lines, o["text"].(string))
	}
	return strings.Join(lines, "\n")
}

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "p.toml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestPolicySetAndEnforce(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	// Before any policy: the default one (of an agent that exists).
	d.ox("", "ox-state", "save", "-a", "ops", "seed", "x")
	s := d.ox("", "ox-policy", "show", "-a", "ops", "--json")
	if s.code != 0 || !strings.Contains(s.stdout, `"source":"default"`) {
		t.Fatalf("show: %d %s %s", s.code, s.stdout, s.stderr)
	}
	// A broken policy is refused with its line; the old one stays.
	bad := writePolicy(t, "[state]\nread = [\"**\"]\nwrit = [\"**\"]\n")
	if r := d.ox("", "ox-policy", "set", "-a", "ops", bad); r.code != 1 || !strings.Contains(r.stderr, "line 3") || !strings.Contains(r.stderr, "writ") {
		t.Fatalf("broken policy: %d %s", r.code, r.stderr)
	}
	if r := d.ox("", "ox-policy", "set", "-a", "ops", writePolicy(t, strictPolicy)); r.code != 0 {
		t.Fatalf("set: %d %s", r.code, r.stderr)
	}
	if s := d.ox("", "ox-policy", "show", "-a", "ops"); s.stdout != strictPolicy {
		t.Fatalf("show after set: %q", s.stdout)
	}
	d.ox("", "ox-state", "save", "-a", "ops", "secret/key", "hunter2")
	d.ox("", "ox-state", "save", "-a", "ops", "public/motd", "hi")
	out := runOutput(t, d, "ops", `
ox-state save notes/a "small"; echo "write-notes=$?"
ox-state save etc/a x; echo "write-etc=$?"
ox-state load secret/key; echo "read-secret=$?"
ox-state load public/motd; echo; echo "read-public=$?"
ox-state ls | grep -c secret; echo "ls-secret"
ox-state save notes/big "$(head -c 100 /dev/zero | tr '\0' x)"; echo "quota=$?"
ox-remember --kind semantic fact; echo "remember-semantic=$?"
ox-remember --kind episodic event >/dev/null; echo "remember-episodic=$?"
ox-exec -- cat /etc/passwd; echo "exec-cat=$?"
ox-exec -- echo allowed; echo "exec-echo=$?"
ox-policy set -a ops /dev/null; echo "set-own=$?"
`)
	for _, want := range []string{"write-notes=0", "write-etc=77", "read-secret=77", "hi\nread-public=0", "0\nls-secret",
		"quota=77", "remember-semantic=77", "remember-episodic=0", "exec-cat=77", "allowed\nexec-echo=0", "set-own=77"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	// Each refusal is on the audit log with the rule that refused it.
	au := d.ox("", "ox-audit", "log", "-a", "ops", "--json").stdout
	for _, rule := range []string{"[state.write]", "[state.read]", "[state.quota]", "[memory.kinds]", "[exec.allow]"} {
		if !strings.Contains(au, rule) {
			t.Errorf("no audited refusal by %s:\n%s", rule, au)
		}
	}
	// The admin is not bound for state; the policy file is not state.
	if r := d.ox("", "ox-state", "load", "-a", "ops", "secret/key"); r.stdout != "hunter2" {
		t.Errorf("admin load: %q %s", r.stdout, r.stderr)
	}
	// check: a dry run, with its rule.
	c := d.ox("", "ox-policy", "check", "-a", "ops", "--json", "state.save", "etc/passwd")
	if c.code != 77 || !strings.Contains(c.stdout, `"allowed":false`) || !strings.Contains(c.stdout, `"rule":"state.write"`) {
		t.Errorf("check: %d %s %s", c.code, c.stdout, c.stderr)
	}
	if c := d.ox("", "ox-policy", "check", "-a", "ops", "exec", "echo", "hi"); c.code != 0 {
		t.Errorf("check exec echo: %d %s", c.code, c.stdout)
	}
	if c := d.ox("", "ox-policy", "check", "-a", "ops", "exec", "echo hi; rm -rf /"); c.code != 77 || !strings.Contains(c.stdout, "exec.shell") {
		t.Errorf("check exec with ;: %d %s", c.code, c.stdout)
	}
}

func TestPolicyTestReplay(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	// Past actions under the default policy.
	out := runOutput(t, d, "ops", `
ox-state save notes/a 1 >/dev/null; ox-state save etc/b 2 >/dev/null; ox-state rm etc/b >/dev/null
ox-exec -- wc -c /dev/null >/dev/null; ox-exec -- echo hi >/dev/null; ox-exec -- rm -rf /tmp/nothing; echo "rm=$?"
ox-remember --kind semantic fact >/dev/null
`)
	if !strings.Contains(out, "rm=77") {
		t.Fatalf("setup run: %s", out)
	}
	log := d.ox("", "ox-audit", "export").stdout
	proposed := writePolicy(t, "[state]\nread = [\"**\"]\nwrite = [\"notes/**\"]\n[memory]\nkinds = [\"episodic\"]\n[exec]\nallow = [\"echo\", \"rm\"]\n")
	r := d.ox(log, "ox-policy", "test", "-a", "ops", "--json", proposed)
	if r.code != 1 {
		t.Fatalf("test: exit %d, want 1 (it would refuse past actions)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	recs := records(t, r.stdout)
	got := map[string]string{}
	for _, rec := range recs {
		rule, _ := rec["rule"].(string)
		got[rec["target"].(string)] = rec["change"].(string) + " " + rule
	}
	want := map[string]string{
		"ops:etc/b": "refuse state.write", // the save and the delete
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	var wcRefused, rmAllowed, semantic bool
	for _, rec := range recs {
		tg := rec["target"].(string)
		switch {
		case strings.HasPrefix(tg, "ops:exec wc"):
			wcRefused = rec["change"] == "refuse" && rec["rule"] == "exec.allow"
		case strings.HasPrefix(tg, "ops:exec rm -rf"):
			rmAllowed = rec["change"] == "allow"
		case strings.HasPrefix(tg, "ops:semantic/"):
			semantic = rec["change"] == "refuse" && rec["rule"] == "memory.kinds"
		case strings.HasPrefix(tg, "ops:notes/"), strings.HasPrefix(tg, "ops:exec echo"):
			t.Errorf("an action the policy allows is reported: %v", rec)
		}
	}
	if !wcRefused || !rmAllowed || !semantic {
		t.Errorf("wc refused %v, rm newly allowed %v, semantic refused %v:\n%s", wcRefused, rmAllowed, semantic, r.stdout)
	}
	if !strings.Contains(r.stderr, "would be refused, 1 newly allowed") {
		t.Errorf("summary: %s", r.stderr)
	}
	// The same log against the default policy: nothing changes.
	def := d.ox("", "ox-policy", "show", "-a", "ops").stdout
	if r := d.ox(log, "ox-policy", "test", "-a", "ops", writePolicy(t, def)); r.code != 0 || r.stdout != "" {
		t.Errorf("the policy in force judges its own log otherwise: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestPolicyMount(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	if r := m.ox("", "ox-policy", "set", "-a", "ops", writePolicy(t, strictPolicy)); r.code != 0 {
		t.Fatalf("set: %s", r.stderr)
	}
	m.ox("", "ox-state", "save", "-a", "ops", "secret/key", "hunter2")
	out := runOutput(t, m.daemon, "ops", `cd "$OXIOS_MNT/agent/ops"
cat policy | head -1
(echo x >> policy); echo "policy-write=$?"
cat state/secret/key; echo "read-secret=$?"
(echo hi > state/etc.txt); echo "write-etc=$?"
mkdir -p state/notes && (echo hi > state/notes/n.txt); echo "write-notes=$?"
ls state`)
	for _, want := range []string{"[state]", "policy-write=2", "read-secret=1", "write-etc=2", "write-notes=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2") || strings.Contains(out, "secret") && !strings.Contains(out, "read-secret") {
		t.Errorf("the run saw what its policy hides:\n%s", out)
	}
	// The admin writing the policy file through the mount: refused too
	// (ox-policy set is the way), and audited.
	if _, err := os.OpenFile(filepath.Join(m.mnt, "agent/ops/policy"), os.O_WRONLY, 0); err == nil {
		t.Error("the policy file opened for writing")
	}
	au := m.ox("", "ox-audit", "log", "--op", "policy.set", "--json").stdout
	if strings.Count(au, `"result":"EROFS"`) < 2 {
		t.Errorf("writes to the policy file not audited:\n%s", au)
	}
}

// startWithPolicies starts a daemon watching a policies folder that holds
// web.toml (strictPolicy) from the start.
func startWithPolicies(t *testing.T) (*daemon, string) {
	t.Helper()
	dir := shortTempDir(t)
	pdir := filepath.Join(dir, "policies")
	os.MkdirAll(pdir, 0o755)
	if err := os.WriteFile(filepath.Join(pdir, "web.toml"), []byte(strictPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, daemonOpts{dir: dir, config: fmt.Sprintf("policies = %q\n", pdir)}), pdir
}

func TestPolicyAndConfigHotReload(t *testing.T) {
	t.Parallel()
	// A policy file left while the daemon was down is in force at READY.
	d, pdir := startWithPolicies(t)
	dir := d.dir
	if s := d.ox("", "ox-policy", "show", "-a", "web"); s.stdout != strictPolicy {
		t.Fatalf("web's policy at start: %q %s", s.stdout, s.stderr)
	}
	// An edit is applied; editors replace the file by a rename.
	edited := strings.Replace(strictPolicy, `write = ["notes/**"]`, `write = ["notes/**", "tmp/**"]`, 1)
	tmp := filepath.Join(pdir, ".ops.toml.swp")
	os.WriteFile(tmp, []byte(edited), 0o644)
	os.Rename(tmp, filepath.Join(pdir, "ops.toml"))
	waitFor(t, "the new policy file to apply", func() bool {
		return d.ox("", "ox-policy", "show", "-a", "ops").stdout == edited
	})
	// A broken edit is refused with a log line; the policy in force stays.
	os.WriteFile(filepath.Join(pdir, "ops.toml"), []byte("[state]\nread = [\"**\"\n"), 0o644)
	waitFor(t, "the broken policy to be refused", func() bool {
		return strings.Contains(d.stderr.String(), "policy file refused")
	})
	if s := d.ox("", "ox-policy", "show", "-a", "ops"); s.stdout != edited {
		t.Fatalf("after a broken edit: %q", s.stdout)
	}
	au := d.ox("", "ox-audit", "log", "--op", "policy.set", "--json").stdout
	if strings.Count(au, `"result":"ok"`) != 2 || !strings.Contains(au, `"result":"EINVAL"`) {
		t.Errorf("policy changes on the audit log:\n%s", au)
	}
	// The config: [llm] comes and goes without a restart.
	if r := d.ox("", "ox-spawn", "-a", "ops", "a task"); r.code == 0 || !strings.Contains(r.stderr, "base_url") {
		t.Fatalf("LLM run without an endpoint: %d %s", r.code, r.stderr)
	}
	cf := filepath.Join(dir, "oxios.toml")
	os.WriteFile(cf, []byte(fmt.Sprintf("policies = %q\n[llm]\nbase_url = \"http://127.0.0.1:9/v1\"\nretries = 0\ntimeout = \"1s\"\n", pdir)), 0o600)
	waitFor(t, "the config to reload", func() bool { return strings.Contains(d.stderr.String(), "config reloaded: [llm]") })
	r := d.ox("", "ox-spawn", "-a", "ops", "a task")
	if strings.Contains(r.stderr, "base_url") || !strings.Contains(r.stdout, `"code":"EHOSTDOWN"`) {
		t.Fatalf("after the reload the run should reach (and fail on) the endpoint: %d %s %s", r.code, r.stdout, r.stderr)
	}
	// A config that does not load is refused; the one in force stays.
	os.WriteFile(cf, []byte("[llm]\nbase_url = \"ftp://nope\"\n"), 0o600)
	waitFor(t, "the broken config to be refused", func() bool { return strings.Contains(d.stderr.String(), "config refused") })
	if r := d.ox("", "ox-spawn", "-a", "ops", "a task"); strings.Contains(r.stderr, "base_url") {
		t.Fatalf("a broken config was applied: %s", r.stderr)
	}
}

// TestStateQuotaCountsKeys: a key counts against state.quota however
// small its value (state.KeyOverhead), so the quota bounds how many keys
// an agent makes: empty keys made in a loop stop at quota/256, refused
// and audited as state.quota.
func TestStateQuotaCountsKeys(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-policy", "set", "-a", "many", writePolicy(t, "[state]\nread = [\"**\"]\nwrite = [\"**\"]\nquota = \"4KiB\"\n"))
	out := runOutput(t, d, "many", `i=0; while ox-state save k$i "" 2>/dev/null >/dev/null; do i=$((i+1)); done; echo "made=$i"`)
	if !strings.Contains(out, "made=16") {
		t.Fatalf("empty keys made under a 4 KiB quota: %q, want 16 (4096/256)", out)
	}
	log := d.ox("", "ox-audit", "log", "-a", "many", "--json").stdout
	if !strings.Contains(log, "[state.quota]") {
		t.Fatalf("the refusal is not audited as state.quota:\n%s", log)
	}
}
