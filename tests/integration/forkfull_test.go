package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// TestForkOnFullDisk: a fork of the state now, of values in their files,
// needs no room for them (the fork's files are links to its origin's), so
// it succeeds on a disk that refuses saves; its commit names the audit
// log as it was just before the fork's own entry; the fork reads its
// origin's values and is committed whole; deleting frees space although
// the disk is over what was accepted, and the fork's files then reach its
// tree. (A fork of values not yet in files needs room for their copies:
// pkg/state's TestForkNeedsRoomForCopies.)
func TestForkOnFullDisk(t *testing.T) {
	t.Parallel()
	dir := smallFS(t, "5m")
	d := startDaemon(t, daemonOpts{dir: dir})
	ctx := context.Background()
	cl := d.client(t)
	val := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i%26)), 100<<10)) }
	for i := range 5 {
		if _, err := cl.StateSave(ctx, "ops", fmt.Sprintf("k%d", i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Commit(ctx, proto.CommitArgs{Agent: "ops", Message: "five"}); err != nil {
		t.Fatal(err)
	}
	// Its values in its files (the applier writes them once saves
	// pause): a fork of them costs links.
	origin := filepath.Join(dir, "data", "repo", "agents", "ops", "state")
	waitFor(t, "the origin's files", func() bool {
		for i := range 5 {
			if st, err := os.Stat(filepath.Join(origin, fmt.Sprintf("k%d", i))); err != nil || st.Size() != 100<<10 {
				return false
			}
		}
		return true
	})
	var filler []string
	var full error
	for i := 5; i < 200; i++ {
		k := fmt.Sprintf("k%d", i)
		if _, full = cl.StateSave(ctx, "filler", k, val(i)); full != nil {
			break
		}
		filler = append(filler, k)
	}
	if full == nil || !strings.Contains(full.Error(), "ENOSPC") {
		t.Fatalf("20 MiB of saves on a 5 MiB disk: %v", full)
	}

	r := d.ox(noStdin, "ox-fork", "ops", "ops2")
	if r.code != 0 {
		t.Fatalf("fork on a full disk: %+v", r)
	}
	var fk proto.ForkRecord
	if err := json.Unmarshal([]byte(r.stdout), &fk); err != nil || fk.Files != 5 {
		t.Fatalf("fork record %q: %v", r.stdout, err)
	}
	for i := range 5 {
		got, _, err := cl.StateLoad(ctx, "ops2", fmt.Sprintf("k%d", i))
		if err != nil || string(got) != string(val(i)) {
			t.Fatalf("ops2 k%d after a fork on a full disk: %d bytes, %v", i, len(got), err)
		}
	}
	// The fork's commit names the head right before its entry.
	r = d.ox(noStdin, "ox-commit", "log", "-n", "1", "--json")
	var cm proto.CommitRecord
	if err := json.Unmarshal([]byte(strings.SplitN(r.stdout, "\n", 2)[0]), &cm); err != nil {
		t.Fatalf("log %+v: %v", r, err)
	}
	if cm.Commit != fk.Commit || cm.AuditHead == nil || cm.AuditHead.Seq != fk.AuditSeq-1 {
		t.Fatalf("fork commit %s names audit head %+v; the fork's entry is %d (commit %s)", cm.Commit, cm.AuditHead, fk.AuditSeq, fk.Commit)
	}
	r = d.ox(noStdin, "ox-commit", "-a", "ops2", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, "nothing to commit") {
		t.Fatalf("the fork's live state differs from its commit: %+v", r)
	}
	// Space freed: the fork's files reach its tree.
	for _, k := range filler {
		if _, err := cl.StateDelete(ctx, "filler", k); err != nil {
			t.Fatal(err)
		}
	}
	tree := filepath.Join(dir, "data", "repo", "agents", "ops2", "state")
	waitFor(t, "the fork's files in its tree", func() bool {
		for i := range 5 {
			b, err := os.ReadFile(filepath.Join(tree, fmt.Sprintf("k%d", i)))
			if err != nil || string(b) != string(val(i)) {
				return false
			}
		}
		return true
	})
}
