package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// forkSource saves n keys of agent (one value too large for the store's
// cache), waits until they are in their files, then saves a few more
// that are not yet when the fork comes: the fork copies both kinds.
func forkSource(t *testing.T, d *daemon, c *client.Client, agent string, n int) map[string]string {
	t.Helper()
	ctx := context.Background()
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("d%02d/k%03d", i%7, i), fmt.Sprint("value ", i)
		if i == 0 {
			v = strings.Repeat("big ", 3000)
		}
		if _, err := c.StateSave(ctx, agent, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	d.mustOx(t, "", "ox-remember", "-a", agent, "the deploy key lives in vault")
	time.Sleep(2500 * time.Millisecond) // the applier's delay: in files now
	for i := range 3 {
		k := fmt.Sprintf("late/k%d", i)
		if _, err := c.StateSave(ctx, agent, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		want[k] = k
	}
	return want
}

func wantState(t *testing.T, c *client.Client, agent string, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	err := c.StateList(context.Background(), agent, "", func(r proto.StateRecord) error {
		v, _, err := c.StateLoad(context.Background(), agent, r.Key)
		if err != nil {
			return err
		}
		got[r.Key] = string(v)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", agent, err)
	}
	if len(got) != len(want) {
		t.Errorf("%s has %d keys, want %d", agent, len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s/%s = %.30q, want %.30q", agent, k, got[k], w)
		}
	}
}

// TestForkKill9 kills oxiosd with SIGKILL as soon as a fork returns,
// before the fork's files are in its tree: after the restart the fork
// has every value of its origin at the fork point, its memory too, and
// stays apart from the origin.
func TestForkKill9(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	want := forkSource(t, d, c, "orig", 60)
	if _, err := c.Fork(ctx, proto.ForkArgs{Agent: "orig", Name: "copy"}); err != nil {
		t.Fatal(err)
	}
	// Acknowledged after the fork: a change of each side.
	if _, err := c.StateSave(ctx, "orig", "d01/k001", []byte("orig after")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StateSave(ctx, "copy", "d02/k002", []byte("copy after")); err != nil {
		t.Fatal(err)
	}
	d.kill9()

	d = startDaemon(t, daemonOpts{dir: dir})
	c = d.client(t)
	orig, fork := map[string]string{}, map[string]string{}
	for k, v := range want {
		orig[k], fork[k] = v, v
	}
	orig["d01/k001"], fork["d02/k002"] = "orig after", "copy after"
	wantState(t, c, "orig", orig)
	wantState(t, c, "copy", fork)
	if r := d.mustOx(t, "", "ox-recall", "-a", "copy", "deploy key"); !strings.Contains(r, "vault") {
		t.Errorf("copy's memory after the restart: %q", r)
	}
	// Once the applier has linked the fork's files, a change of the
	// origin's file does not reach the fork's, in memory or on disk.
	time.Sleep(2500 * time.Millisecond)
	if _, err := c.StateSave(ctx, "orig", "d03/k003", []byte("orig later")); err != nil {
		t.Fatal(err)
	}
	orig["d03/k003"] = "orig later"
	wantState(t, c, "copy", fork)
	d.stop()
	for k, v := range fork {
		b, err := os.ReadFile(filepath.Join(dir, "data", "repo", "agents", "copy", "state", k))
		if err != nil || string(b) != v {
			t.Errorf("copy's file %s = %.30q %v, want %.30q", k, b, err, v)
		}
	}
	d = startDaemon(t, daemonOpts{dir: dir})
	c = d.client(t)
	wantState(t, c, "orig", orig)
	wantState(t, c, "copy", fork)
}

// TestForkKill9BeforeItsCommitIsWritten forks while git's pack folder
// refuses every write (chattr +i, as root), so the fork's commit, made
// durable by the journal batch of its live copy, cannot reach a pack,
// then kills oxiosd with SIGKILL. After the restart the commit the fork
// acknowledged is HEAD's, in the files git reads, and the repository is
// whole.
func TestForkKill9BeforeItsCommitIsWritten(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	for i := range 20 {
		if _, err := c.StateSave(ctx, "orig", fmt.Sprintf("k%02d", i), []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	d.mustOx(t, "", "ox-commit", "-a", "orig", "-m", "before the fork")
	repo := filepath.Join(dir, "data", "repo")
	before := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD"))
	packs := filepath.Join(repo, ".git", "objects", "pack")
	if out, err := exec.Command("chattr", "+i", packs).CombinedOutput(); err != nil {
		t.Skipf("chattr +i %s: %v %s (needs root and a file system with the flag)", packs, err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", packs).Run() })

	rec, err := c.Fork(ctx, proto.ForkArgs{Agent: "orig", Name: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	// Acknowledged and HEAD for the daemon's readers, in no file yet.
	if !strings.Contains(d.mustOx(t, "", "ox-commit", "log", "-a", "copy", "-n", "1", "--json"), rec.Commit) {
		t.Errorf("ox-commit log does not show the fork's commit %s", rec.Commit)
	}
	if h := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD")); h != before {
		t.Fatalf("git's HEAD moved to %s with its pack folder immutable", h)
	}
	waitFor(t, "the background write of the fork's commit to fail", func() bool {
		return strings.Contains(d.stderr.String(), "writing a published commit failed")
	})
	d.kill9()
	if out, err := exec.Command("chattr", "-i", packs).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v %s", err, out)
	}

	d = startDaemon(t, daemonOpts{dir: dir})
	c = d.client(t)
	if !strings.Contains(d.stderr.String(), "a commit the journal held was published again") {
		t.Errorf("the restart did not replay the fork's commit; stderr:\n%s", d.stderr.String())
	}
	if h := strings.TrimSpace(git(t, repo, "rev-parse", "HEAD")); h != rec.Commit {
		t.Fatalf("git's HEAD after the restart is %s, the fork acknowledged %s (before it: %s)", h, rec.Commit, before)
	}
	if of := git(t, repo, "log", "-1", "--format=%(trailers:key=Oxios-Fork-Of,valueonly)", rec.Commit); strings.TrimSpace(of) != "orig" {
		t.Errorf("the fork commit's Oxios-Fork-Of: %q", of)
	}
	git(t, repo, "fsck", "--strict", "--no-dangling")
	// The fork goes on from its commit.
	if _, err := c.StateSave(ctx, "copy", "k00", []byte("copy's")); err != nil {
		t.Fatal(err)
	}
	next := parseCommit(t, d.mustOx(t, "", "ox-commit", "-a", "copy", "-m", "after"))
	if next.Parent != rec.Commit || next.changed() != "m agents/copy/state/k00" {
		t.Errorf("the fork's next commit: %+v", next)
	}
	if v, _, err := c.StateLoad(ctx, "copy", "k19"); err != nil || string(v) != "v19" {
		t.Errorf("copy/k19 = %q %v", v, err)
	}
}

// TestForkIsolation changes the origin and the fork after a fork, before
// and after the fork's files are linked, and removes the fork: neither
// side sees the other's changes, in memory, after a restart, or on disk.
func TestForkIsolation(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	want := forkSource(t, d, c, "orig", 40)
	rec, err := c.Fork(ctx, proto.ForkArgs{Agent: "orig", Name: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Files < len(want) {
		t.Errorf("fork record counts %d files, want at least %d", rec.Files, len(want))
	}
	orig, fork := map[string]string{}, map[string]string{}
	for k, v := range want {
		orig[k], fork[k] = v, v
	}
	step := func(agent, key, v string) {
		t.Helper()
		m := orig
		if agent == "copy" {
			m = fork
		}
		if v == "" {
			if _, err := c.StateDelete(ctx, agent, key); err != nil {
				t.Fatal(err)
			}
			delete(m, key)
			return
		}
		if _, err := c.StateSave(ctx, agent, key, []byte(v)); err != nil {
			t.Fatal(err)
		}
		m[key] = v
	}
	// Before the links are made.
	step("orig", "d00/k000", "orig 1")
	step("orig", "d01/k001", "")
	step("copy", "d02/k002", "copy 1")
	step("copy", "late/k0", "")
	wantState(t, c, "orig", orig)
	wantState(t, c, "copy", fork)
	// After.
	time.Sleep(2500 * time.Millisecond)
	step("orig", "d03/k003", "orig 2")
	step("copy", "d04/k004", "copy 2")
	step("copy", "d05/k005", "")
	step("orig", "late/k1", "")
	wantState(t, c, "orig", orig)
	wantState(t, c, "copy", fork)

	d.stop()
	for agent, m := range map[string]map[string]string{"orig": orig, "copy": fork} {
		for k, v := range m {
			b, err := os.ReadFile(filepath.Join(dir, "data", "repo", "agents", agent, "state", k))
			if err != nil || string(b) != v {
				t.Errorf("%s's file %s = %.30q %v, want %.30q", agent, k, b, err, v)
			}
		}
	}
	d = startDaemon(t, daemonOpts{dir: dir})
	c = d.client(t)
	wantState(t, c, "orig", orig)
	wantState(t, c, "copy", fork)

	// The fork goes; the origin stays, and the name can be forked again.
	d.mustOx(t, "", "ox-fork", "rm", "copy")
	if r := d.ox("", "ox-state", "ls", "-a", "copy", "--json"); len(records(t, r.stdout)) != 0 {
		t.Errorf("copy after rm: %s", r.stdout)
	}
	wantState(t, c, "orig", orig)
	if _, err := c.Fork(ctx, proto.ForkArgs{Agent: "orig", Name: "copy"}); err != nil {
		t.Fatal(err)
	}
	wantState(t, c, "copy", orig)
}

// TestForkRefusals: a fork is refused, with the reason and the way out,
// when its name is taken (live, or only in HEAD: every key deleted and
// not committed yet), when the agent had nothing at the point, and at a
// revision that does not exist; a refused fork commits nothing, leaves no
// agent behind, and is audited.
func TestForkRefusals(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{dir: shortTempDir(t)})
	c := d.client(t)
	ctx := context.Background()
	for _, a := range []string{"src", "taken", "gone"} {
		if _, err := c.StateSave(ctx, a, "k", []byte(a)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := c.Commit(ctx, proto.CommitArgs{Message: "three agents"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StateSave(ctx, "late", "k", []byte("after the first commit")); err != nil {
		t.Fatal(err)
	}
	second, err := c.Commit(ctx, proto.CommitArgs{Message: "one more"})
	if err != nil {
		t.Fatal(err)
	}
	// gone's only key is deleted, and src changed: neither is committed.
	if _, err := c.StateDelete(ctx, "gone", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StateSave(ctx, "src", "k", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args proto.ForkArgs
		code string
		says string
	}{
		{proto.ForkArgs{Agent: "src", Name: "taken"}, proto.EEXIST, `agent "taken" exists; pick another name, or remove it first (ox-fork rm taken)`},
		{proto.ForkArgs{Agent: "src", Name: "gone"}, proto.EEXIST, `agent "gone" exists`},
		{proto.ForkArgs{Agent: "late", Name: "x", Rev: first.Commit}, proto.ENOENT, `agent "late" has nothing committed at ` + first.Commit},
		{proto.ForkArgs{Agent: "src", Name: "x", Rev: "nosuchrev"}, proto.ENOENT, "nosuchrev"},
		{proto.ForkArgs{Agent: "src", Name: "src"}, proto.EEXIST, "a fork needs a new name"},
	} {
		_, err := c.Fork(ctx, tc.args)
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != tc.code || !strings.Contains(pe.Message, tc.says) {
			t.Errorf("fork %+v: %v; want %s saying %q", tc.args, err, tc.code, tc.says)
		}
	}
	if head := headOf(t, c); head != second.Commit {
		t.Errorf("a refused fork committed: HEAD %s, want %s", head, second.Commit)
	}
	// With nothing uncommitted of the agent forked, the graft itself
	// finds the name in HEAD.
	third, err := c.Commit(ctx, proto.CommitArgs{Agent: "src", Message: "src changed"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Fork(ctx, proto.ForkArgs{Agent: "src", Name: "gone"})
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.EEXIST || !strings.Contains(pe.Message, `agent "gone" exists`) {
		t.Errorf("fork over an agent only HEAD has: %v", err)
	}
	if head := headOf(t, c); head != third.Commit {
		t.Errorf("a refused fork committed: HEAD %s, want %s", head, third.Commit)
	}
	for _, a := range []string{"x", "gone"} {
		n := 0
		c.StateList(ctx, a, "", func(proto.StateRecord) error { n++; return nil })
		if n != 0 {
			t.Errorf("a refused fork left %d keys of %s", n, a)
		}
	}
	if v, _, err := c.StateLoad(ctx, "taken", "k"); err != nil || string(v) != "taken" {
		t.Errorf("the agent a fork was refused over: %q %v", v, err)
	}
	out := d.mustOx(t, "", "ox-audit", "log", "--op", "agent.fork")
	if got := strings.Count(out, "\n"); got != 6 {
		t.Errorf("%d fork refusals audited, want 6:\n%s", got, out)
	}
}

// headOf is the newest commit.
func headOf(t *testing.T, c *client.Client) string {
	t.Helper()
	var head string
	err := c.CommitLog(context.Background(), proto.CommitLogArgs{N: 1}, func(r proto.CommitRecord) error {
		head = r.Commit
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return head
}

// TestForkReplayedFromItsPoint is issue 45's repro: a key saved in the
// origin after its forks, in its file before the crash, and deleted (the
// delete not yet in the files) reaches neither fork after a SIGKILL, and
// a fork removed before stays removed.
func TestForkReplayedFromItsPoint(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	if _, err := c.StateSave(ctx, "src", "k0", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dst", "gone"} {
		if _, err := c.Fork(ctx, proto.ForkArgs{Agent: "src", Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AgentRemove(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StateSave(ctx, "src", "k1", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	// Until the applier has written k1's file (no timed assertion: a
	// wait for the file).
	k1 := filepath.Join(dir, "data", "repo", "agents", "src", "state", "k1")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(k1); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("k1 never reached its file")
		}
	}
	if _, err := c.StateDelete(ctx, "src", "k1"); err != nil {
		t.Fatal(err)
	}
	d.kill9()
	if _, err := os.Stat(k1); err != nil {
		// The applier removed it before the kill: put it back, as a
		// kill a moment earlier would have left it.
		os.WriteFile(k1, []byte("v1"), 0o644)
	}

	d = startDaemon(t, daemonOpts{dir: dir})
	c = d.client(t)
	wantState(t, c, "src", map[string]string{"k0": "v0"})
	wantState(t, c, "dst", map[string]string{"k0": "v0"})
	err := c.AgentList(ctx, func(r proto.AgentRecord) error {
		if r.Agent == "gone" {
			t.Errorf("the removed fork came back: %+v", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.StateLoad(ctx, "gone", "k1"); err == nil {
		t.Error("the removed fork has k1")
	}
}
