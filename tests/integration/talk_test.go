package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/share"
)

// sectionPolicy is the default policy with section [name] replaced by
// body.
func sectionPolicy(t *testing.T, sections map[string]string) string {
	t.Helper()
	out := string(share.DefaultPolicy) + "\n["
	for name, body := range sections {
		re := regexp.MustCompile(`(?s)\n\[` + name + `\]\n.*?\n\[`)
		next := re.ReplaceAllString(out, "\n["+name+"]\n"+body+"\n\n[")
		if next == out {
			t.Fatalf("default policy has no [%s]", name)
		}
		out = next
	}
	return writePolicy(t, strings.TrimSuffix(out, "\n["))
}

func stateKeys(t *testing.T, d *daemon, agent string) map[string]string {
	t.Helper()
	r := d.ox("", "ox-state", "ls", "-a", agent, "--json")
	keys := map[string]string{}
	for _, rec := range records(t, r.stdout) {
		k := rec["key"].(string)
		keys[k] = strings.TrimSpace(d.mustOx(t, "", "ox-state", "load", "-a", agent, k))
	}
	return keys
}

// TestForkDivergeDiffRemove forks at HEAD and at an older commit,
// diverges, diffs both ways and removes the fork, checking the
// repository with git after each step.
func TestForkDivergeDiffRemove(t *testing.T) {
	t.Parallel()
	needGit(t)
	d := startDaemon(t, daemonOpts{})
	repo := filepath.Join(d.data, "repo")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/a.md", "alpha")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/b.md", "beta")
	d.mustOx(t, "", "ox-remember", "-a", "ops", "the deploy key lives in vault")
	old := parseCommit(t, d.mustOx(t, "", "ox-commit", "-a", "ops", "--json"))
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/a.md", "alpha 2")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/c.md", "gamma") // uncommitted

	// At the state now: the uncommitted change is committed first.
	var rec proto.ForkRecord
	if err := json.Unmarshal([]byte(d.mustOx(t, "", "ox-fork", "--json", "ops", "exp")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Agent != "exp" || rec.From != "ops" || rec.Commit == "" || rec.Files < 4 {
		t.Fatalf("fork record: %+v", rec)
	}
	want := map[string]string{"notes/a.md": "alpha 2", "notes/b.md": "beta", "notes/c.md": "gamma"}
	if got := stateKeys(t, d, "exp"); !equalMaps(got, want) {
		t.Fatalf("exp's state: %v, want %v", got, want)
	}
	if r := d.mustOx(t, "", "ox-recall", "-a", "exp", "deploy key"); !strings.Contains(r, "vault") {
		t.Fatalf("exp's memory: %q", r)
	}
	// The fork commit's trailers name the fork point, and git agrees the
	// trees are one object. git's files get the commit in the
	// background, milliseconds after the reply (ox-fork(1)).
	waitFor(t, "the fork's commit in git's files", func() bool {
		return exec.Command("git", "-C", repo, "cat-file", "-e", rec.Commit).Run() == nil
	})
	msg := git(t, repo, "log", "-1", "--format=%B", rec.Commit+"~0")
	if !strings.Contains(git(t, repo, "log", "--format=%B"), "Oxios-Fork-Point: "+rec.Point) {
		t.Fatalf("no fork trailer in the log; last: %s", msg)
	}
	if a, b := git(t, repo, "rev-parse", rec.Point+":agents/ops/state"), git(t, repo, "rev-parse", "HEAD:agents/exp/state"); a != b {
		t.Fatalf("state trees differ: %s %s", a, b)
	}
	git(t, repo, "fsck", "--strict")

	// At an older commit.
	d.mustOx(t, "", "ox-fork", "-r", old.Commit, "ops", "old")
	if got := stateKeys(t, d, "old"); !equalMaps(got, map[string]string{"notes/a.md": "alpha", "notes/b.md": "beta"}) {
		t.Fatalf("old's state: %v", got)
	}

	// Diverge (uncommitted), then diff against the fork point and ops.
	d.mustOx(t, "", "ox-state", "save", "-a", "exp", "notes/a.md", "experiment")
	d.mustOx(t, "", "ox-state", "rm", "-a", "exp", "notes/b.md")
	d.mustOx(t, "", "ox-state", "save", "-a", "exp", "notes/d.md", "delta")
	diff := d.mustOx(t, "", "ox-fork", "diff", "--json", "exp")
	for _, w := range []string{`"path":"state/notes/a.md","action":"modified"`, `"path":"state/notes/b.md","action":"deleted"`, `"path":"state/notes/d.md","action":"added"`} {
		if !strings.Contains(diff, w) {
			t.Errorf("diff exp (fork point) lacks %s:\n%s", w, diff)
		}
	}
	if n := len(records(t, diff)); n != 3 {
		t.Errorf("diff exp: %d records, want 3:\n%s", n, diff)
	}
	// ops moved on too: against ops now, c.md is the same on both sides.
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/e.md", "only ops")
	diff = d.mustOx(t, "", "ox-fork", "diff", "--json", "exp", "ops")
	if !strings.Contains(diff, `"path":"state/notes/e.md","action":"deleted"`) || strings.Contains(diff, "notes/c.md") {
		t.Errorf("diff exp ops:\n%s", diff)
	}
	patch := d.mustOx(t, "", "ox-fork", "diff", "-p", "exp")
	if !strings.Contains(patch, "-alpha 2") || !strings.Contains(patch, "+experiment") {
		t.Errorf("patch:\n%s", patch)
	}

	// Refusals: a taken name, a bad name, an unknown agent or revision.
	if r := d.ox("", "ox-fork", "ops", "old"); r.code != 1 || !strings.Contains(r.stderr, "EEXIST") {
		t.Errorf("fork onto an existing agent: %+v", r)
	}
	if r := d.ox("", "ox-fork", "ops", "../x"); r.code != 2 {
		t.Errorf("fork to ../x: %+v", r)
	}
	if r := d.ox("", "ox-fork", "nobody", "x2"); r.code == 0 {
		t.Errorf("fork of nobody: %+v", r)
	}
	if r := d.ox("", "ox-fork", "-r", "deadbeef", "ops", "x3"); r.code == 0 {
		t.Errorf("fork at an unknown revision: %+v", r)
	}
	if r := d.ox("", "ox-fork", "diff", "ops"); r.code == 0 || !strings.Contains(r.stderr, "not a fork") {
		t.Errorf("diff of a non-fork: %+v", r)
	}

	// Removing the experiment is one command; history keeps it.
	d.mustOx(t, "", "ox-fork", "rm", "exp")
	if got := stateKeys(t, d, "exp"); len(got) != 0 {
		t.Fatalf("exp after rm: %v", got)
	}
	if out := git(t, repo, "ls-tree", "HEAD", "agents/"); strings.Contains(out, "exp") {
		t.Fatalf("agents/exp still in HEAD:\n%s", out)
	}
	if r := d.ox("", "ox-fork", "rm", "exp"); r.code == 0 {
		t.Error("removing exp twice")
	}
	// The name is free again; ops is untouched.
	d.mustOx(t, "", "ox-fork", "ops", "exp")
	if got := stateKeys(t, d, "ops"); got["notes/a.md"] != "alpha 2" || got["notes/e.md"] != "only ops" {
		t.Fatalf("ops: %v", got)
	}
	git(t, repo, "fsck", "--strict")
	if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
	for _, op := range []string{"agent.fork", "agent.remove"} {
		if r := d.mustOx(t, "", "ox-audit", "log", "--json"); !strings.Contains(r, `"op":"`+op+`"`) {
			t.Errorf("no %s entry in the audit log", op)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMessagesBetweenRuns: runs of two agents talk; the policy refuses
// what it does not grant; an unread message survives kill -9.
func TestMessagesBetweenRuns(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, a := range []string{"alice", "bob", "eve"} {
		d.mustOx(t, "", "ox-state", "save", "-a", a, "hello", a)
	}
	d.mustOx(t, "", "ox-policy", "set", "-a", "bob", sectionPolicy(t, map[string]string{"msg": "send = [\"alice\"]\naccept = [\"alice\"]"}))
	d.mustOx(t, "", "ox-policy", "set", "-a", "eve", sectionPolicy(t, map[string]string{"msg": "send = []\naccept = [\"*\"]"}))

	// bob's run waits for a message; alice's run sends one with a record
	// attached; bob's run answers.
	bobDone := make(chan result, 1)
	go func() {
		bobDone <- d.ox("", "ox-spawn", "-a", "bob", "--", "/bin/sh", "-c",
			`m=$(ox-msg recv --json -n 1 -f); echo "got: $m"; id=$(echo "$m" | jq -r .id); ox-msg send -r "$id" alice "thanks"`)
	}()
	time.Sleep(300 * time.Millisecond)
	r := d.ox("", "ox-spawn", "-a", "alice", "--", "/bin/sh", "-c", `echo '{"type":"memory","text":"deploy at 5"}' | ox-msg send bob "please deploy"`)
	if r.code != 0 {
		t.Fatalf("alice's run: %+v", r)
	}
	var br result
	select {
	case br = <-bobDone:
	case <-time.After(60 * time.Second):
		t.Fatal("bob's run did not receive within 60s")
	}
	if br.code != 0 || !strings.Contains(br.stdout, "please deploy") || !strings.Contains(br.stdout, `deploy at 5`) || !strings.Contains(br.stdout, `\"from\":\"alice\"`) {
		t.Fatalf("bob's run: %+v", br)
	}
	var reply proto.MsgRecord
	out := d.mustOx(t, "", "ox-msg", "recv", "-a", "alice", "--json")
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &reply); err != nil || reply.Text != "thanks" || reply.From != "bob" || reply.ReplyTo == "" {
		t.Fatalf("alice's inbox: %q %v", out, err)
	}
	// Received once: a second recv has nothing.
	if out := d.mustOx(t, "", "ox-msg", "recv", "-a", "alice", "--json"); out != "" {
		t.Fatalf("received twice: %q", out)
	}

	// Refused by policy: bob may not send to eve, eve to anyone; eve's
	// message to alice and bob's to eve are audited refusals.
	r = d.ox("", "ox-spawn", "-a", "bob", "--", "ox-msg", "send", "eve", "psst")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "msg.send") {
		t.Fatalf("bob to eve: %+v", r)
	}
	r = d.ox("", "ox-spawn", "-a", "eve", "--", "ox-msg", "send", "alice", "hi")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "msg.send") {
		t.Fatalf("eve to alice: %+v", r)
	}
	// alice may send to anyone but bob accepts only alice: eve -> bob is
	// refused by eve's send; an operator as eve too.
	if r := d.ox("", "ox-msg", "send", "-a", "eve", "bob", "x"); r.code != 77 {
		t.Fatalf("operator as eve to bob: %+v", r)
	}
	// A run may not send as another agent, nor read another's inbox.
	r = d.ox("", "ox-spawn", "-a", "eve", "--", "ox-msg", "send", "-a", "alice", "bob", "forged")
	if r.code == 0 {
		t.Fatalf("eve sending as alice: %+v", r)
	}
	r = d.ox("", "ox-spawn", "-a", "eve", "--", "ox-msg", "ls", "-a", "bob")
	if r.code == 0 {
		t.Fatalf("eve reading bob's inbox: %+v", r)
	}
	if r := d.ox("", "ox-msg", "send", "nobody", "x"); r.code == 0 {
		t.Fatal("sent to an agent that does not exist")
	}
	audit := d.mustOx(t, "", "ox-audit", "log", "--json")
	if !strings.Contains(audit, "bob:msg from alice") || !strings.Contains(audit, "eve:msg from bob [msg.send]") {
		t.Fatalf("sends and refusals not audited:\n%s", audit)
	}

	// An operator's message, unread at a kill -9, is there after it.
	sent := d.mustOx(t, "", "ox-msg", "send", "--json", "bob", "survive this")
	var m proto.MsgRecord
	json.Unmarshal([]byte(sent), &m)
	d.kill9()
	d2 := startDaemon(t, daemonOpts{dir: d.dir})
	out = d2.mustOx(t, "", "ox-msg", "recv", "-a", "bob", "--json")
	if !strings.Contains(out, "survive this") || !strings.Contains(out, m.ID) {
		t.Fatalf("after kill -9: %q", out)
	}
	if r := d2.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestAskPausesExec: an ask rule holds a run's exec until an operator
// approves it, denies it, or its time runs out into the default.
func TestAskPausesExec(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"ask": "exec = [\"wc\", \"uniq\"]\ntimeout = \"60s\"\ndefault = \"deny\""}))

	pending := func() proto.ApprovalRecord {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			out := d.mustOx(t, "", "ox-approve", "ls", "--json")
			if strings.TrimSpace(out) != "" {
				var a proto.ApprovalRecord
				if err := json.Unmarshal([]byte(strings.Split(strings.TrimSpace(out), "\n")[0]), &a); err != nil {
					t.Fatal(err)
				}
				return a
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("no pending approval within 30s")
		return proto.ApprovalRecord{}
	}
	// Approved: the run waits, says so, then the exec runs.
	done := make(chan result, 1)
	go func() {
		done <- d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", "ox-exec -- wc -c /dev/null && echo after-wc")
	}()
	a := pending()
	if a.Agent != "ops" || a.Rule != "ask.exec" || a.State != "pending" || !strings.Contains(a.What, "wc") {
		t.Fatalf("request: %+v", a)
	}
	// A run may not approve its own request.
	if r := d.ox("", "ox-spawn", "-a", "ops", "--", "ox-approve", "yes", a.ID); r.code == 0 {
		t.Fatalf("a run approved: %+v", r)
	}
	d.mustOx(t, "", "ox-approve", "yes", "-m", "fine by me", a.ID)
	r := <-done
	if r.code != 0 || !strings.Contains(r.stdout, "after-wc") || !strings.Contains(r.stdout, `"type":"approval"`) {
		t.Fatalf("approved run: %+v", r)
	}
	if r := d.ox("", "ox-approve", "no", a.ID); r.code == 0 {
		t.Fatal("decided twice")
	}
	// Denied: the exec fails with EPERM, the run goes on.
	go func() {
		done <- d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", "ox-exec -- uniq /dev/null; echo status=$?")
	}()
	a = pending()
	d.mustOx(t, "", "ox-approve", "no", "-m", "not today", a.ID)
	r = <-done
	if !strings.Contains(r.stdout, "status=77") || !strings.Contains(r.stdout, "not today") {
		t.Fatalf("denied run: %+v", r)
	}
	// Timed out into the default (deny) after 2s.
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"ask": "exec = [\"wc\", \"uniq\"]\ntimeout = \"2s\"\ndefault = \"deny\""}))
	start := time.Now()
	r = d.ox("", "ox-spawn", "-a", "ops", "--", "/bin/sh", "-c", "ox-exec -- wc -c /dev/null; echo status=$?")
	if !strings.Contains(r.stdout, "status=77") || time.Since(start) < 2*time.Second || !strings.Contains(r.stdout, "timeout") {
		t.Fatalf("timed-out run: %+v", r)
	}
	all := d.mustOx(t, "", "ox-approve", "ls", "--all", "--json")
	for _, w := range []string{`"state":"approved"`, `"state":"denied"`, `"decided_by":"timeout"`, `"reason":"fine by me"`} {
		if !strings.Contains(all, w) {
			t.Errorf("ls --all lacks %s:\n%s", w, all)
		}
	}
	audit := d.mustOx(t, "", "ox-audit", "log", "--json")
	if !strings.Contains(audit, `"op":"approve.ask"`) || !strings.Contains(audit, "approved by uid=") || !strings.Contains(audit, "denied by timeout") {
		t.Fatalf("approvals not audited:\n%s", audit)
	}
	// ox-policy test reports what would have asked.
	log := d.mustOx(t, "", "ox-audit", "log", "--json")
	pt := d.ox(log, "ox-policy", "test", "-a", "ops", "--json", sectionPolicy(t, map[string]string{"ask": "exec = [\"echo\", \"wc\"]"}))
	if !strings.Contains(pt.stdout, `"change":"ask"`) || !strings.Contains(pt.stderr, "would ask") {
		t.Fatalf("policy test: %+v", pt)
	}
	if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestFUSEInboxApprovals: messages and approvals on a real mount. An
// operator writes into an inbox; a run of another agent (unsandboxed, so
// it sees the mount) sends through the slot of the recipient's inbox, or
// is refused with EACCES where the policy does not grant it (audited); a
// pending approval is a file under /approvals until decided.
func TestFUSEInboxApprovals(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	for _, a := range []string{"alice", "bob", "eve"} {
		m.mustOx(t, "", "ox-state", "save", "-a", a, "hello", a)
	}
	m.mustOx(t, "", "ox-policy", "set", "-a", "bob", sectionPolicy(t, map[string]string{"msg": "send = []\naccept = [\"alice\"]"}))
	m.mustOx(t, "", "ox-policy", "set", "-a", "alice", sectionPolicy(t, map[string]string{"sandbox": "isolation = \"none\"", "msg": "send = [\"bob\"]\naccept = [\"*\"]"}))
	m.mustOx(t, "", "ox-policy", "set", "-a", "eve", sectionPolicy(t, map[string]string{"sandbox": "isolation = \"none\"", "msg": "send = [\"*\"]\naccept = [\"*\"]"}))
	inbox := func(agent string) []proto.MsgRecord {
		t.Helper()
		var out []proto.MsgRecord
		for _, l := range strings.Split(strings.TrimSpace(m.mustOx(t, "", "ox-msg", "ls", "-a", agent, "--json")), "\n") {
			if l == "" {
				continue
			}
			var r proto.MsgRecord
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}

	// The operator: a file written is a message, named by its id once sent.
	m.sh(t, "echo 'deploy at 5' > agent/bob/inbox/new.md")
	got := inbox("bob")
	if len(got) != 1 || got[0].Text != "deploy at 5" || got[0].From != "" {
		t.Fatalf("bob's inbox after the operator's write: %+v", got)
	}
	id := got[0].ID
	if ls := m.sh(t, "ls agent/bob/inbox"); ls != id+".md\n" {
		t.Fatalf("ls inbox: %q, want %s.md", ls, id)
	}
	cat := m.sh(t, "cat agent/bob/inbox/"+id+".md")
	for _, w := range []string{"id: " + id, "from: operator", "to: bob", "read: false", "---\ndeploy at 5\n"} {
		if !strings.Contains(cat, w) {
			t.Errorf("message file lacks %q:\n%s", w, cat)
		}
	}
	// A reply through the front matter; an unknown key and a bad id are
	// refused at close, and nothing is sent.
	m.sh(t, "printf -- '---\\nreply_to: "+id+"\\n---\\nnoted\\n' > agent/bob/inbox/re.md")
	if got := inbox("bob"); len(got) != 2 || got[1].ReplyTo != id || got[1].Text != "noted" {
		t.Fatalf("reply: %+v", got)
	}
	for _, bad := range []string{`---\nsubject: x\n---\nhi\n`, `---\nreply_to: nope\n---\nhi\n`} {
		// cat reports what close(2) says (a shell's redirection does not).
		if r := sh(t, m.mnt, "printf -- '"+bad+"' | cat > agent/bob/inbox/bad.md", nil); r.code == 0 || !strings.Contains(r.stderr, "Invalid argument") {
			t.Errorf("%q: %+v", bad, r)
		}
	}
	if r := sh(t, m.mnt, "rm agent/bob/inbox/"+id+".md", nil); r.code == 0 {
		t.Errorf("rm of a message: %+v", r)
	}
	if n := len(inbox("bob")); n != 2 {
		t.Fatalf("bob has %d messages, want 2", n)
	}
	// Reading through the mount does not receive.
	if out := m.mustOx(t, "", "ox-msg", "recv", "-a", "bob", "--json"); !strings.Contains(out, "deploy at 5") {
		t.Fatalf("recv after reading the files: %q", out)
	}
	if cat := m.sh(t, "cat agent/bob/inbox/"+id+".md"); !strings.Contains(cat, "read: true") {
		t.Errorf("a received message's file:\n%s", cat)
	}

	// alice's run sends through bob's slot; it sees nothing else of bob.
	run := func(agent, script string) result {
		return m.ox("", "ox-spawn", "-a", agent, "--", "/bin/sh", "-c", strings.ReplaceAll(script, "MNT", m.mnt))
	}
	said := func(r result, text string) bool { return strings.Contains(r.stdout, `"text":"`+text+`"`) }
	r := run("alice", `ls MNT/agent/bob; printf 'from alice' | cat > MNT/agent/bob/inbox/x.md && echo sent; ls MNT/agent/bob/inbox && echo listed; cat MNT/agent/bob/inbox/`+id+`.md && echo read; cat MNT/agent/bob/state/hello && echo stole; true`)
	if !said(r, "inbox") || said(r, "state") || !said(r, "sent") || said(r, "listed") || said(r, "read") || said(r, "stole") ||
		!strings.Contains(r.stdout, "inbox': Permission denied") {
		t.Fatalf("alice's run: %+v", r)
	}
	got = inbox("bob")
	if last := got[len(got)-1]; last.From != "alice" || last.Text != "from alice" {
		t.Fatalf("alice's message: %+v", last)
	}
	// eve's send is refused by bob's accept rule: EACCES at the create
	// (the shell's > reports it), audited, nothing sent. A name that is
	// no agent is absent.
	r = run("eve", `printf 'psst' | cat > MNT/agent/bob/inbox/x.md; echo status=$?; ls MNT/agent/nobody; true`)
	if !said(r, "status=2") || !strings.Contains(r.stdout, "cannot create") || !strings.Contains(r.stdout, "Permission denied") || !strings.Contains(r.stdout, "No such file") {
		t.Fatalf("eve's run: %+v", r)
	}
	if n := len(inbox("bob")); n != len(got) {
		t.Fatalf("eve's refused message arrived")
	}
	if audit := m.mustOx(t, "", "ox-audit", "log", "--json"); !strings.Contains(audit, "bob:msg from eve [msg.accept]") || !strings.Contains(audit, "bob:msg from alice") {
		t.Fatalf("the mount's sends are not audited:\n%s", audit)
	}

	// Approvals: a pending request is a file until an operator decides.
	m.mustOx(t, "", "ox-policy", "set", "-a", "alice", sectionPolicy(t, map[string]string{"sandbox": "isolation = \"none\"", "ask": "exec = [\"wc\"]\ntimeout = \"60s\""}))
	done := make(chan result, 1)
	go func() { done <- run("alice", "ox-exec -- wc -c /dev/null && echo after-wc") }()
	var aid string
	eventually(t, "a file under /approvals", func() bool {
		aid = strings.TrimSpace(sh(t, m.mnt, "ls approvals", nil).stdout)
		return aid != ""
	})
	var rec proto.ApprovalRecord
	if err := json.Unmarshal([]byte(m.sh(t, "cat approvals/"+aid)), &rec); err != nil || rec.State != "pending" || rec.Agent != "alice" || !strings.Contains(rec.Text, "ox-approve yes "+aid) {
		t.Fatalf("approvals/%s: %+v %v", aid, rec, err)
	}
	if r := sh(t, m.mnt, "echo yes > approvals/"+aid, nil); r.code == 0 {
		t.Fatalf("wrote an approval: %+v", r)
	}
	// A run of another agent sees nothing of alice's requests.
	if r := run("eve", "ls MNT/approvals; cat MNT/approvals/"+aid+" && echo read; true"); said(r, aid) || said(r, "read") || !strings.Contains(r.stdout, "approvals/"+aid+": ") {
		t.Fatalf("eve sees alice's approval: %+v", r)
	}
	m.mustOx(t, "", "ox-approve", "yes", aid)
	if r := <-done; r.code != 0 || !said(r, "after-wc") {
		t.Fatalf("approved run: %+v", r)
	}
	if ls := m.sh(t, "ls approvals"); ls != "" {
		t.Fatalf("decided, still listed: %q", ls)
	}
	if r := m.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestApprovalAcrossRestart: a request pending at a kill -9 is resolved
// at the next start into the policy's default, by "oxiosd restart", and
// audited; a clean stop cancels the calls that wait instead of waiting
// for them.
func TestApprovalAcrossRestart(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"ask": "exec = [\"wc\"]\ntimeout = \"10m\"\ndefault = \"deny\""}))
	pending := func(d *daemon) proto.ApprovalRecord {
		t.Helper()
		var a proto.ApprovalRecord
		eventually(t, "a pending approval", func() bool {
			out := strings.TrimSpace(d.mustOx(t, "", "ox-approve", "ls", "--json"))
			return out != "" && json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &a) == nil
		})
		return a
	}
	d.mustOx(t, "", "ox-spawn", "-d", "-a", "ops", "--", "ox-exec", "--", "wc", "-c", "/dev/null")
	a := pending(d)
	d.kill9()

	d2 := startDaemon(t, daemonOpts{dir: d.dir})
	if out := d2.mustOx(t, "", "ox-approve", "ls", "--json"); strings.TrimSpace(out) != "" {
		t.Fatalf("still pending after kill -9: %s", out)
	}
	var got proto.ApprovalRecord
	for _, l := range strings.Split(strings.TrimSpace(d2.mustOx(t, "", "ox-approve", "ls", "--all", "--json")), "\n") {
		var r proto.ApprovalRecord
		if json.Unmarshal([]byte(l), &r) == nil && r.ID == a.ID {
			got = r
		}
	}
	if got.State != "denied" || got.DecidedBy != "oxiosd restart" || got.Op != "exec" {
		t.Fatalf("%s after kill -9: %+v", a.ID, got)
	}
	if r := d2.ox("", "ox-approve", "yes", a.ID); r.code == 0 {
		t.Fatalf("approved a request resolved at restart: %+v", r)
	}
	audit := d2.mustOx(t, "", "ox-audit", "log", "--json")
	if !strings.Contains(audit, "ops:"+a.ID+" denied by oxiosd restart") {
		t.Fatalf("the resolution is not audited:\n%s", audit)
	}
	// A new request gets a new id, and a clean stop does not wait for it.
	d2.mustOx(t, "", "ox-spawn", "-d", "-a", "ops", "--", "ox-exec", "--", "wc", "-c", "/dev/null")
	b := pending(d2)
	if b.ID == a.ID {
		t.Fatalf("id %s given twice", a.ID)
	}
	d2.stop()
	if strings.Contains(d2.stderr.String(), "did not finish in time") {
		t.Fatalf("the stop waited for the pending call:\n%s", d2.stderr.String())
	}
	d3 := startDaemon(t, daemonOpts{dir: d.dir})
	audit = d3.mustOx(t, "", "ox-audit", "log", "--json")
	if !strings.Contains(audit, "ops:"+b.ID+" cancelled") || strings.Contains(audit, b.ID+" denied by oxiosd restart") {
		t.Fatalf("the clean stop's cancel:\n%s", audit)
	}
	if r := d3.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestScheduleOnMessages: a job fires a run per message, another a run
// per batch; a fork copies the jobs disabled, and enabling one makes it
// fire on the fork's messages.
func TestScheduleOnMessages(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	var old proto.MsgRecord // before the jobs: fires nothing
	json.Unmarshal([]byte(d.mustOx(t, "", "ox-msg", "send", "--json", "ops", "old news")), &old)
	// each: a run per message, which records the message it woke for.
	d.mustOx(t, "", "ox-schedule", "add", "-a", "ops", "--name", "each", "--cron", "@message", "--overlap", "allow", "--",
		"/bin/sh", "-c", `ox-state save "each/$OXIOS_MSG" "$OXIOS_SCHEDULE"`)
	// batch: a run receives everything waiting, and keeps the texts.
	d.mustOx(t, "", "ox-schedule", "add", "-a", "ops", "--name", "batch", "--cron", "@messages", "--",
		"/bin/sh", "-c", `ox-msg recv --json | jq -r .text | while read -r t; do ox-state save "batch/$t" "$OXIOS_MSG"; done; sleep 0.3`)
	if r := d.ox("", "ox-schedule", "add", "-a", "ops", "--name", "bad", "--cron", "@message", "--tz", "UTC", "--", "true"); r.code != 2 && r.code != 1 {
		t.Fatalf("a message job with a time zone: %+v", r)
	}
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		var m proto.MsgRecord
		json.Unmarshal([]byte(d.mustOx(t, "", "ox-msg", "send", "--json", "ops", text)), &m)
		ids = append(ids, m.ID)
	}
	keys := func(agent, prefix string) map[string]string {
		got := map[string]string{}
		for k, v := range stateKeys(t, d, agent) {
			if strings.HasPrefix(k, prefix) {
				got[k] = v
			}
		}
		return got
	}
	eventually10 := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s; state: %v\nruns: %s", what, stateKeys(t, d, "ops"), d.ox("", "ox-ps", "--all", "--json").stdout)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	eventually10("a run per message", func() bool { return len(keys("ops", "each/")) == 3 })
	for _, id := range ids {
		if v := keys("ops", "each/")["each/"+id]; v != "each" {
			t.Errorf("no run of job each for %s: %v", id, keys("ops", "each/"))
		}
	}
	// The batch's recv takes every unread message, the old one too.
	eventually10("the batches", func() bool {
		b := keys("ops", "batch/")
		return b["batch/one"] != "" && b["batch/two"] != "" && b["batch/three"] != ""
	})
	if _, ok := keys("ops", "each/")["each/"+old.ID]; ok || len(keys("ops", "each/")) != 3 {
		t.Errorf("the message before the job fired it: %v", keys("ops", "each/"))
	}
	jobs := d.mustOx(t, "", "ox-schedule", "ls", "--json")
	if !strings.Contains(jobs, `"last_msg":"`+ids[2]+`"`) {
		t.Errorf("jobs do not record the last message:\n%s", jobs)
	}
	eventually10("the firings audited", func() bool {
		return strings.Count(d.mustOx(t, "", "ox-audit", "log", "--json"), `"op":"schedule.fire"`) >= 4
	})

	// The fork's copies are disabled: a message to the fork fires nothing
	// until its job is enabled.
	d.mustOx(t, "", "ox-fork", "ops", "exp")
	var copyRec proto.JobRecord
	for _, l := range strings.Split(strings.TrimSpace(d.mustOx(t, "", "ox-schedule", "ls", "-a", "exp", "--json")), "\n") {
		var r proto.JobRecord
		if json.Unmarshal([]byte(l), &r) == nil && r.Name == "exp.each" {
			copyRec = r
		}
	}
	if copyRec.Agent != "exp" || !copyRec.Disabled || copyRec.LastMsg != "" {
		t.Fatalf("the fork's copy of each: %+v", copyRec)
	}
	d.mustOx(t, "", "ox-msg", "send", "exp", "ignored")
	time.Sleep(500 * time.Millisecond) // a disabled job firing would show within this
	if got := keys("exp", "each/"); len(got) != 3 {
		t.Fatalf("a disabled copy fired: %v", got)
	}
	rec := d.mustOx(t, "", "ox-schedule", "enable", "--json", "exp.each")
	if strings.Contains(rec, `"disabled":true`) {
		t.Fatalf("enable: %s", rec)
	}
	var m proto.MsgRecord
	json.Unmarshal([]byte(d.mustOx(t, "", "ox-msg", "send", "--json", "exp", "go")), &m)
	eventually10("the enabled copy fires", func() bool { return keys("exp", "each/")["each/"+m.ID] == "exp.each" })
	if got := keys("exp", "each/"); len(got) != 4 {
		t.Fatalf("the copy fired on the message sent while disabled: %v", got)
	}
	if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestAskPausesLLMToolCall: an ask rule holds an LLM run's tool call
// until an operator approves it, denies it, or it times out into the
// default; a budget threshold asks once before the spending goes on.
func TestAskPausesLLMToolCall(t *testing.T) {
	t.Parallel()
	wc := llmtest.Turn{ToolCalls: []llmtest.Call{call("exec", `{"argv":["wc","-c","/dev/null"]}`)}, PromptTokens: 10, CompletionTokens: 5}
	d, s := llmDaemon(t, "",
		wc, llmtest.Turn{Content: "approved run done"},
		wc, llmtest.Turn{Content: "denied run done"},
		wc, llmtest.Turn{Content: "timed-out run done"},
		// The budget: the first answer passes the threshold; the next
		// model call asks.
		llmtest.Turn{ToolCalls: []llmtest.Call{call("state_list", `{}`)}, PromptTokens: 900, CompletionTokens: 100},
		llmtest.Turn{Content: "budget run done"},
	)
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	setAsk := func(body string) {
		d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"ask": body}))
	}
	setAsk("exec = [\"wc\"]\ntimeout = \"60s\"\ndefault = \"deny\"")
	pending := func() proto.ApprovalRecord {
		t.Helper()
		var a proto.ApprovalRecord
		eventually(t, "a pending approval", func() bool {
			out := strings.TrimSpace(d.mustOx(t, "", "ox-approve", "ls", "--json"))
			return out != "" && json.Unmarshal([]byte(strings.Split(out, "\n")[0]), &a) == nil
		})
		return a
	}
	spawn := func() chan result {
		done := make(chan result, 1)
		go func() { done <- d.ox("", "ox-spawn", "-a", "ops", "--json", "count the bytes of /dev/null") }()
		return done
	}
	execResult := func(r result) map[string]any {
		t.Helper()
		ex := toolResults(records(t, r.stdout), "exec")
		if len(ex) != 1 {
			t.Fatalf("exec results: %v\n%s", ex, r.stdout)
		}
		return ex[0]
	}

	// Approved: the run shows it waits, and the call runs once approved.
	done := spawn()
	a := pending()
	if a.Op != "exec" || a.Rule != "ask.exec" || !strings.Contains(a.What, "wc") {
		t.Fatalf("request: %+v", a)
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("the model was asked again while the tool call waited: %d requests", n)
	}
	d.mustOx(t, "", "ox-approve", "yes", "-m", "ok", a.ID)
	r := <-done
	if ex := execResult(r); r.code != 0 || ex["error"] != nil || !strings.Contains(ex["text"].(string), "0") ||
		!strings.Contains(r.stdout, `"type":"approval"`) || !strings.Contains(r.stdout, "approved run done") {
		t.Fatalf("approved run: %+v", r)
	}

	// Denied: the model is told EPERM with the reason, and the run goes on.
	done = spawn()
	a = pending()
	d.mustOx(t, "", "ox-approve", "no", "-m", "not on a friday", a.ID)
	r = <-done
	if ex := execResult(r); r.code != 0 || ex["code"] != "EPERM" || !strings.Contains(ex["text"].(string), "not on a friday") || !strings.Contains(r.stdout, "denied run done") {
		t.Fatalf("denied run: %+v", r)
	}
	reqs := s.Requests()
	var told string
	for _, m := range reqs[len(reqs)-1].Body.Messages {
		if m.Role == "tool" {
			told = m.Content
		}
	}
	if !strings.Contains(told, "not on a friday") {
		t.Errorf("the model was told %q", told)
	}

	// Timed out into the default.
	setAsk("exec = [\"wc\"]\ntimeout = \"1s\"\ndefault = \"deny\"")
	r = <-spawn()
	if ex := execResult(r); ex["code"] != "EPERM" || !strings.Contains(ex["text"].(string), "timeout") {
		t.Fatalf("timed-out run: %+v", r)
	}

	// The budget threshold: the second model call waits for approval.
	// The threshold: 500 tokens past what the runs above used.
	var b proto.BudgetRecord
	if err := json.Unmarshal([]byte(d.mustOx(t, "", "ox-budget", "show", "-a", "ops", "--json")), &b); err != nil {
		t.Fatal(err)
	}
	setAsk(fmt.Sprintf("tokens = %d\ntimeout = \"60s\"\ndefault = \"deny\"", b.Used.Tokens+500))
	before := len(s.Requests())
	done = spawn()
	a = pending()
	if a.Op != "budget.check" || a.Rule != "ask.tokens" {
		t.Fatalf("budget request: %+v", a)
	}
	if n := len(s.Requests()) - before; n != 1 {
		t.Fatalf("%d model calls before the approval, want 1", n)
	}
	d.mustOx(t, "", "ox-approve", "yes", a.ID)
	if r := <-done; r.code != 0 || !strings.Contains(r.stdout, "budget run done") {
		t.Fatalf("budget run: %+v", r)
	}
	audit := d.mustOx(t, "", "ox-audit", "log", "--json")
	for _, w := range []string{"approved by uid=", "denied by uid=", "denied by timeout"} {
		if !strings.Contains(audit, w) {
			t.Errorf("audit lacks %q", w)
		}
	}
}
