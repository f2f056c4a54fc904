package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// loseAuditTail does to the audit log of a stopped daemon what a power
// loss does: the entries past the last fsync of the log's own file are
// cut (the head file, written after each fsync, says where that was).
// The journal, synced before every acknowledgement, keeps them.
func loseAuditTail(t *testing.T, data string) (kept uint64) {
	t.Helper()
	dir := filepath.Join(data, "audit")
	b, err := os.ReadFile(filepath.Join(dir, "head"))
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		Seq, Seg uint64
		Off      int64
	}
	for slot := range 2 {
		line := strings.TrimSpace(string(b[slot*256 : (slot+1)*256]))
		var h struct {
			Seq, Seg uint64
			Off      int64
		}
		if json.Unmarshal([]byte(line), &h) == nil && h.Seq >= head.Seq {
			head = h
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		first, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".jsonl"), 10, 64)
		if err != nil || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		switch {
		case first == head.Seg:
			if err := os.Truncate(path, head.Off); err != nil {
				t.Fatal(err)
			}
		case first > head.Seg:
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	return head.Seq
}

// TestTrailersSurvivePowerLoss: a commit's and a fork's trailers name an
// audit entry that is durable when they are acknowledged, though the
// audit log's own file is not synced for them: after the log loses what
// it had not synced, the restarted daemon puts the entries back from
// its journal, with the hashes the trailers name.
func TestTrailersSurvivePowerLoss(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := shortTempDir(t)
	type named struct {
		what string
		seq  uint64
		hash string
	}
	var trailers []named
	cut := false
	for round := range 3 {
		d := startDaemon(t, daemonOpts{dir: dir})
		for i := range 20 {
			d.mustOx(t, "", "ox-state", "save", "-a", "src", fmt.Sprintf("r%d/k%d", round, i), "v")
		}
		c := parseCommit(t, d.mustOx(t, "", "ox-commit", "-a", "src", "-m", fmt.Sprint("round ", round)))
		if c.AuditHead == nil {
			t.Fatalf("commit record without audit head: %+v", c)
		}
		trailers = append(trailers, named{"commit " + c.Commit, c.AuditHead.Seq, c.AuditHead.Hash})
		d.mustOx(t, "", "ox-state", "save", "-a", "src", fmt.Sprintf("r%d/after", round), "v")
		out := d.mustOx(t, "", "ox-fork", "src", fmt.Sprint("copy", round))
		var fk struct{ Type, Commit string }
		if err := json.Unmarshal([]byte(out), &fk); err != nil || fk.Type != "fork" || fk.Commit == "" {
			t.Fatalf("not a fork record with its commit: %q (%v)", out, err)
		}
		// The daemon's view: git's files get the fork's commit in the
		// background (ox-fork(1)), and the kill below may come first.
		fc := parseCommit(t, d.mustOx(t, "", "ox-commit", "show", fk.Commit))
		if fc.Commit != fk.Commit || fc.AuditHead == nil {
			t.Fatalf("fork commit %s: %+v", fk.Commit, fc)
		}
		seq := fc.AuditHead.Seq
		trailers = append(trailers, named{"fork " + fk.Commit, seq, fc.AuditHead.Hash})
		d.kill9()
		if kept := loseAuditTail(t, d.data); kept < seq {
			cut = true
		}
	}
	if !cut {
		t.Fatal("the log had synced every named entry each time: nothing was tested")
	}
	d := startDaemon(t, daemonOpts{dir: dir})
	d.mustOx(t, "", "ox-audit", "verify")
	repo := filepath.Join(d.data, "repo")
	for _, n := range trailers {
		e := parseAudit(t, d.mustOx(t, "", "ox-audit", "show", strconv.FormatUint(n.seq, 10)))[0]
		if e.Hash != n.hash {
			t.Fatalf("%s names audit entry %d with hash %s; the log has %s", n.what, n.seq, n.hash, e.Hash)
		}
		// In git's own files too, whatever the kills cut short.
		_, hash, _ := strings.Cut(n.what, " ")
		got := strings.Fields(git(t, repo, "log", "-1", "--format=%(trailers:key=Oxios-Audit-Seq,valueonly)%(trailers:key=Oxios-Audit-Hash,valueonly)", hash))
		if len(got) != 2 || got[0] != strconv.FormatUint(n.seq, 10) || got[1] != n.hash {
			t.Fatalf("%s in git has the trailers %q, want %d %s", n.what, got, n.seq, n.hash)
		}
	}
}
