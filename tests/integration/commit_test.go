package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

type commitRec struct {
	Type    string `json:"type"`
	Commit  string `json:"commit"`
	Parent  string `json:"parent"`
	Message string `json:"message"`
	Tags    []string
	Changed []struct {
		Path   string `json:"path"`
		Action string `json:"action"`
	} `json:"changed"`
	AuditHead *struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	} `json:"audit_head"`
	AuditSeq uint64 `json:"audit_seq"`
}

func parseCommit(t *testing.T, out string) commitRec {
	t.Helper()
	var c commitRec
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.Type != "commit" {
		t.Fatalf("not a commit record: %q (%v)", out, err)
	}
	return c
}

func (c commitRec) changed() string {
	var s []string
	for _, ch := range c.Changed {
		s = append(s, ch.Action[:1]+" "+ch.Path)
	}
	return strings.Join(s, ", ")
}

// git runs the git CLI on the daemon's repository.
func git(t *testing.T, repo string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func needGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
}

// TestCommitRestoreRoundTrip commits, changes, diffs, tags and restores,
// and checks the repository with git itself after each step.
func TestCommitRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	needGit(t)
	d := startDaemon(t, daemonOpts{})
	repo := filepath.Join(d.data, "repo")
	if r := d.ox("", "ox-commit", "log"); r.code != 0 || r.stdout != "" {
		t.Fatalf("log with no commits: %+v", r)
	}
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/a.md", "alpha\n")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/b.md", "beta\n")
	d.mustOx(t, "", "ox-state", "save", "-a", "dev", "x", "dev's\n")

	c1 := parseCommit(t, d.mustOx(t, "", "ox-commit", "-a", "ops", "-m", "first", "--tag", "v1"))
	if c1.Parent != "" || c1.changed() != "a agents/ops/state/notes/a.md, a agents/ops/state/notes/b.md" {
		t.Fatalf("first commit: %+v", c1)
	}
	// The trailer carries the audit head at commit time, and the commit
	// is itself the next entry.
	if c1.AuditHead == nil || c1.AuditHead.Seq != 3 || c1.AuditSeq != 4 {
		t.Fatalf("first commit audit links: head %+v entry %d", c1.AuditHead, c1.AuditSeq)
	}
	trailer := git(t, repo, "log", "-1", "--format=%(trailers:key=Oxios-Audit-Seq,valueonly)%(trailers:key=Oxios-Audit-Hash,valueonly)", c1.Commit)
	show := parseAudit(t, d.mustOx(t, "", "ox-audit", "show", "3"))[0]
	if got := strings.Fields(trailer); len(got) != 2 || got[0] != "3" || got[1] != show.Hash {
		t.Fatalf("trailer %q, audit entry 3 has hash %s", trailer, show.Hash)
	}
	entry := parseAudit(t, d.mustOx(t, "", "ox-audit", "show", "4"))[0]
	if entry.Op != "version.commit" || entry.Target != "ops:"+c1.Commit || entry.Result != "ok" {
		t.Fatalf("commit entry: %+v", entry)
	}
	if r := d.ox("", "ox-commit", "-a", "ops"); r.code != 0 || !strings.Contains(r.stdout, `"message":"nothing to commit"`) {
		t.Fatalf("commit with nothing changed: %+v", r)
	}
	// --tag with nothing to commit names HEAD, whose state is the current one.
	if tagged := parseCommit(t, d.mustOx(t, "", "ox-commit", "-a", "ops", "--tag", "same")); tagged.Commit != c1.Commit || strings.Join(tagged.Tags, ",") != "same,v1" {
		t.Fatalf("--tag with nothing to commit: %+v", tagged)
	}

	// dev's key is still uncommitted; ops changes.
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/a.md", "alpha 2\n")
	d.mustOx(t, "", "ox-state", "rm", "-a", "ops", "notes/b.md")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "c/d/e", "deep\n")
	diff := d.mustOx(t, "", "ox-commit", "diff", "-a", "ops", "v1")
	for _, want := range []string{`"path":"agents/ops/state/c/d/e","action":"added"`, `"path":"agents/ops/state/notes/a.md","action":"modified"`, `"path":"agents/ops/state/notes/b.md","action":"deleted"`} {
		if !strings.Contains(diff, want) {
			t.Fatalf("diff against the live state lacks %s:\n%s", want, diff)
		}
	}
	patch := d.mustOx(t, "", "ox-commit", "diff", "-a", "ops", "-p", "v1")
	if !strings.Contains(patch, "-alpha\n+alpha 2\n") || !strings.Contains(patch, "diff --git a/agents/ops/state/notes/a.md b/agents/ops/state/notes/a.md") {
		t.Fatalf("patch:\n%s", patch)
	}
	c2 := parseCommit(t, d.mustOx(t, "", "ox-commit", "-m", "second"))
	if c2.Parent != c1.Commit || c2.changed() != "a agents/dev/state/x, a agents/ops/state/c/d/e, m agents/ops/state/notes/a.md, d agents/ops/state/notes/b.md" {
		t.Fatalf("second commit: %s parent %s", c2.changed(), c2.Parent)
	}
	// Between two commits, git agrees with ox-commit diff.
	names := git(t, repo, "diff", "--name-status", c1.Commit, c2.Commit)
	if strings.Count(names, "\n") != 4 {
		t.Fatalf("git diff --name-status:\n%s", names)
	}
	git(t, repo, "fsck", "--strict", "--no-dangling")

	// Restore ops to v1: a new change and a new commit; history is kept.
	c3 := parseCommit(t, d.mustOx(t, "", "ox-commit", "restore", "-a", "ops", "v1"))
	if c3.Parent != c2.Commit || c3.changed() != "d agents/ops/state/c/d/e, m agents/ops/state/notes/a.md, a agents/ops/state/notes/b.md" {
		t.Fatalf("restore commit: %s parent %s", c3.changed(), c3.Parent)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "ops", "notes/a.md"); v != "alpha\n" {
		t.Fatalf("restored value %q", v)
	}
	if r := d.ox("", "ox-state", "load", "-a", "ops", "c/d/e"); r.code != 1 {
		t.Fatalf("key added after v1 survived the restore: %+v", r)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "dev", "x"); v != "dev's\n" {
		t.Fatalf("restore of ops touched dev: %q", v)
	}
	// The restore's changes are audited like saves and deletes.
	restored := parseAudit(t, d.mustOx(t, "", "ox-audit", "log", "-a", "ops", "--since", strconv.FormatUint(c2.AuditSeq+1, 10)))
	ops := []string{}
	for _, e := range restored {
		ops = append(ops, e.Op+" "+e.Target)
	}
	if len(ops) != 4 || ops[0] != "state.delete ops:c/d/e" || !strings.HasPrefix(ops[3], "version.commit ops:"+c3.Commit) {
		t.Fatalf("audit of the restore: %q", ops)
	}
	if tree := git(t, repo, "rev-parse", c3.Commit+":agents/ops"); tree != git(t, repo, "rev-parse", "v1:agents/ops") {
		t.Fatalf("ops tree after restore %s differs from v1's", tree)
	}

	// git sees a normal history: log, tags, fsck.
	git(t, repo, "fsck", "--strict", "--no-dangling")
	if n := strings.Count(git(t, repo, "log", "--oneline"), "\n"); n != 3 {
		t.Fatalf("git log shows %d commits, want 3", n)
	}
	if got := strings.TrimSpace(git(t, repo, "rev-parse", "v1^{commit}")); got != c1.Commit {
		t.Fatalf("tag v1 -> %s, want %s", got, c1.Commit)
	}

	// log and show.
	var logged []commitRec
	for _, l := range strings.Split(strings.TrimSpace(d.mustOx(t, "", "ox-commit", "log", "-a", "dev")), "\n") {
		logged = append(logged, parseCommit(t, l))
	}
	if len(logged) != 1 || logged[0].Commit != c2.Commit {
		t.Fatalf("log -a dev: %+v", logged)
	}
	if out := d.mustOx(t, "", "ox-commit", "log", "-n", "2"); strings.Count(out, "\n") != 2 {
		t.Fatalf("log -n 2:\n%s", out)
	}
	s := parseCommit(t, d.mustOx(t, "", "ox-commit", "show", c2.Commit[:8]))
	if s.Commit != c2.Commit || s.Message != "second" || len(s.Changed) != 4 {
		t.Fatalf("show: %+v", s)
	}
	if r := d.ox("", "ox-commit", "show", "nosuchrev"); r.code != 1 || !strings.Contains(r.stderr, "nosuchrev") {
		t.Fatalf("show of an unknown rev: %+v", r)
	}
	tag := parseCommit(t, d.mustOx(t, "", "ox-commit", "tag", "before-restore", c2.Commit))
	if tag.Commit != c2.Commit {
		t.Fatalf("tag: %+v", tag)
	}
	if r := d.ox("", "ox-commit", "tag", "before-restore"); r.code != 1 || !strings.Contains(r.stderr, "EEXIST") {
		t.Fatalf("existing tag: %+v", r)
	}
	if r := d.ox("", "ox-commit", "tag", "bad..name"); r.code != 1 || !strings.Contains(r.stderr, "EINVAL") {
		t.Fatalf("bad tag name: %+v", r)
	}
	git(t, repo, "fsck", "--strict", "--no-dangling")
}

// TestCommitConsistentUnderSaves commits while writers save: every
// committed value is one a writer saved whole, and the keys a writer had
// saved before a commit started are in it.
func TestCommitConsistentUnderSaves(t *testing.T) {
	t.Parallel()
	needGit(t)
	d := startDaemon(t, daemonOpts{})
	repo := filepath.Join(d.data, "repo")
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := d.client(t)
			for i := 0; !stop.Load(); i++ {
				v := fmt.Sprintf("w%d-%d-%s", w, i, strings.Repeat("x", i%5000))
				if _, err := c.StateSave(context.Background(), "busy", fmt.Sprintf("w%d/k%d", w, i%20), []byte(v)); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	var commits []string
	c := d.client(t)
	for i := 0; i < 15; i++ {
		rec, err := c.Commit(context.Background(), proto.CommitArgs{Agent: "busy", Message: fmt.Sprint("c", i)})
		if err != nil {
			t.Fatal(err)
		}
		if rec.Commit != "" {
			commits = append(commits, rec.Commit)
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, cm := range commits {
		for _, line := range strings.Split(strings.TrimSpace(git(t, repo, "ls-tree", "-r", cm)), "\n") {
			f := strings.Fields(line)
			blob := git(t, repo, "cat-file", "blob", f[2])
			var w, i int
			var rest string
			if n, _ := fmt.Sscanf(blob, "w%d-%d-%s", &w, &i, &rest); n < 2 || len(blob) != len(fmt.Sprintf("w%d-%d-", w, i))+i%5000 {
				t.Fatalf("commit %s holds a value no writer saved whole at %s: %.40q (%d bytes)", cm, f[3], blob, len(blob))
			}
		}
	}
	git(t, repo, "fsck", "--strict", "--no-dangling")
}

// TestUncommittedSurviveRestart: changes acknowledged but not committed
// are committed after a kill -9 and a restart.
func TestUncommittedSurviveRestart(t *testing.T) {
	t.Parallel()
	needGit(t)
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "a", "1")
	d.mustOx(t, "", "ox-commit", "-m", "one")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "b", "2")
	d.stop() // checkpoint: b is known through DATA/index/uncommitted
	d = startDaemon(t, daemonOpts{dir: d.dir})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "c", "3")
	d.mustOx(t, "", "ox-state", "rm", "-a", "ops", "a")
	d.kill9() // c and the delete are known through the journal only
	d = startDaemon(t, daemonOpts{dir: d.dir})
	c := parseCommit(t, d.mustOx(t, "", "ox-commit", "-m", "two"))
	if got := c.changed(); got != "d agents/ops/state/a, a agents/ops/state/b, a agents/ops/state/c" {
		t.Fatalf("commit after restarts: %s", got)
	}
	// Without the list of uncommitted paths, a commit compares everything.
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "d", "4")
	d.stop()
	os.Remove(filepath.Join(d.data, "index", "uncommitted"))
	d = startDaemon(t, daemonOpts{dir: d.dir})
	c = parseCommit(t, d.mustOx(t, "", "ox-commit", "-m", "three"))
	if got := c.changed(); got != "a agents/ops/state/d" {
		t.Fatalf("commit after losing the uncommitted list: %s", got)
	}
	// Nor with one that is not a list: the next checkpoint and commit
	// must not stumble on it.
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "e", "5")
	d.stop()
	if err := os.WriteFile(filepath.Join(d.data, "index", "uncommitted"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "f", "6")
	d.stop() // a checkpoint writes the list again
	d = startDaemon(t, daemonOpts{dir: d.dir})
	c = parseCommit(t, d.mustOx(t, "", "ox-commit", "-m", "four"))
	if got := c.changed(); got != "a agents/ops/state/e, a agents/ops/state/f" {
		t.Fatalf("commit after a garbled uncommitted list: %s", got)
	}
	git(t, filepath.Join(d.data, "repo"), "fsck", "--strict", "--no-dangling")
}

// TestRestoreThenRestart: a restore changes the work tree through the
// journal; whether the daemon is killed after it or stopped, the next
// start has the restored state. A clean stop leaves the key snapshot
// (DATA/index/state.keys) and the next start loads it. It stays, valid
// for the journal's generation: the start after a kill loads it again
// and the journal's replay of the restore brings it up to date, the
// folders the restore changed left out of its check.
func TestRestoreThenRestart(t *testing.T) {
	t.Parallel()
	needGit(t)
	d := startDaemon(t, daemonOpts{})
	snap := filepath.Join(d.data, "index", "state.keys")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "a", "one")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "dir/b", "two")
	d.mustOx(t, "", "ox-commit", "-a", "ops", "-m", "first", "--tag", "v1")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "a", "one, changed")
	d.mustOx(t, "", "ox-state", "rm", "-a", "ops", "dir/b")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "dir/c", "three")
	d.stop()
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no key snapshot after a clean stop: %v", err)
	}
	check := func(d *daemon, when string) {
		t.Helper()
		for key, want := range map[string]string{"a": "one", "dir/b": "two"} {
			if v := d.mustOx(t, "", "ox-state", "load", "-a", "ops", key); v != want {
				t.Fatalf("%s: %s = %q, want %q", when, key, v, want)
			}
		}
		if r := d.ox("", "ox-state", "load", "-a", "ops", "dir/c"); r.code != 1 {
			t.Fatalf("%s: a key added after v1 is back: %+v", when, r)
		}
		if ls := d.mustOx(t, "", "ox-state", "ls", "-a", "ops"); strings.Contains(ls, "dir/c") || !strings.Contains(ls, "dir/b") {
			t.Fatalf("%s: ls:\n%s", when, ls)
		}
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if !strings.Contains(d.stderr.String(), "from=snapshot") {
		t.Fatalf("the start after a clean stop walked the tree:\n%s", d.stderr.String())
	}
	d.mustOx(t, "", "ox-commit", "restore", "-a", "ops", "v1")
	check(d, "after the restore")
	d.kill9()
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if !strings.Contains(d.stderr.String(), "from=snapshot") {
		t.Fatalf("the start after a kill did not load the key snapshot:\n%s", d.stderr.String())
	}
	check(d, "after a kill")
	// Without a snapshot, the start walks, to the same state.
	d.kill9()
	if err := os.Remove(snap); err != nil {
		t.Fatal(err)
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if !strings.Contains(d.stderr.String(), "from=walk") {
		t.Fatalf("the start after a kill, its snapshot removed, did not walk the tree:\n%s", d.stderr.String())
	}
	check(d, "after a kill and a walk")
	d.stop()
	d = startDaemon(t, daemonOpts{dir: d.dir})
	if !strings.Contains(d.stderr.String(), "from=snapshot") {
		t.Fatalf("the start after a clean stop walked the tree:\n%s", d.stderr.String())
	}
	check(d, "after a stop")
}
