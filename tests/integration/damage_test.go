package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditTruncatedRefused: an audit segment cut short after a clean
// stop (acknowledged entries gone) refuses the start with exit 65, naming
// the log and the entry it lacks; nothing is changed by the refusal.
func TestAuditTruncatedRefused(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	saveAll(t, d, "ann", 30)
	d.stop()
	segs, _ := filepath.Glob(filepath.Join(dir, "data", "audit", "seg-*.jsonl"))
	if len(segs) == 0 {
		t.Fatal("no audit segment")
	}
	last := segs[len(segs)-1]
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(last, 0o600)
	if err := os.Truncate(last, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	out := startRefused(t, dir)
	for _, want := range []string{"audit log", "truncated or rewritten", filepath.Base(last)} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if st2, _ := os.Stat(last); st2.Size() != st.Size()/2 {
		t.Errorf("the refused start changed the segment: %d bytes, was %d", st2.Size(), st.Size()/2)
	}
	// The damage stays checked for by the test's end: not ours to verify.
	os.RemoveAll(filepath.Join(dir, "data", "audit"))
}

// TestRepoObjectDeleted: a pack of the repository deleted (objects HEAD
// reaches gone) refuses the start with exit 65, naming the missing
// objects and their paths; oxiosd --recover starts, records the damage
// in the audit log as repo.recover, and ox-status keeps naming it.
func TestRepoObjectDeleted(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir})
	d.mustOx(t, "", "ox-state", "save", "-a", "ann", "kept", "one")
	d.mustOx(t, "", "ox-commit", "-a", "ann")
	packs := func() []string {
		ps, _ := filepath.Glob(filepath.Join(dir, "data", "repo", ".git", "objects", "pack", "*.pack"))
		return ps
	}
	first := packs()
	if len(first) == 0 {
		t.Fatal("the first commit wrote no pack")
	}
	d.mustOx(t, "", "ox-state", "save", "-a", "ann", "new", "two")
	d.mustOx(t, "", "ox-commit", "-a", "ann")
	if r := d.ox("", "ox-status"); !strings.Contains(r.stdout, "repository is whole") {
		t.Errorf("ox-status of an intact repository does not say it is whole: exit %d\n%s", r.code, r.stdout)
	}
	d.stop()
	for _, p := range first {
		os.Remove(p)
		os.Remove(strings.TrimSuffix(p, ".pack") + ".idx")
	}
	out := startRefused(t, dir)
	for _, want := range []string{"repository", "missing", "agents/ann/state/kept", "oxiosd --recover"} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	d = startDaemon(t, daemonOpts{dir: dir, args: []string{"--recover"}})
	if log := d.mustOx(t, "", "ox-audit", "log", "--op", "repo.recover"); !strings.Contains(log, "repo.recover") {
		t.Errorf("no repo.recover entry in the audit log: %q", log)
	}
	r := d.ox("", "ox-status")
	if r.code == 0 || !strings.Contains(r.stdout, "damaged") || !strings.Contains(r.stdout, "agents/ann/state/kept") {
		t.Errorf("ox-status on a damaged repository: exit %d\n%s", r.code, r.stdout)
	}
	// The live state is whole: the key is served.
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "ann", "kept"); v != "one" {
		t.Errorf("ann:kept = %q", v)
	}
	d.stop()
	// git agrees there is damage (the check is not ours alone).
	if err := exec.Command("git", "-C", filepath.Join(dir, "data", "repo"), "fsck", "--connectivity-only").Run(); err == nil {
		t.Error("git fsck passes the repository with a pack deleted")
	}
}
