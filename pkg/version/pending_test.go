package version

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// prepareFork prepares the fork of a as name on r, at HEAD.
func prepareFork(t *testing.T, r *Repo, name string) *Prepared {
	t.Helper()
	point, err := r.Resolve("HEAD")
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.PrepareFork(ForkOptions{From: "a", Name: name, Point: point,
		Trailers: []Trailer{{Key: TrailerForkOf, Value: "a"}, {Key: TrailerForkPoint, Value: point}},
		Author:   opts("").Author, When: testTime})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func gitHead(t *testing.T, r *Repo) string {
	return strings.TrimSpace(git(t, r.Dir(), "rev-parse", "HEAD"))
}

// A published commit is the branch's head for the Repo's readers at once
// and reaches the files in the background; one that is prepared and
// dropped leaves nothing.
func TestPublishedCommit(t *testing.T) {
	needGit(t)
	r := open(t)
	base := change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n")}, "one")

	dropped := prepareFork(t, r, "x")
	if h, _ := r.Head(); h != base.Hash {
		t.Fatalf("a prepared commit moved HEAD to %s", h)
	}
	dropped.Abort()

	p := prepareFork(t, r, "b")
	cm := p.Publish()
	if cm.Hash != p.Hash() || cm.Parent != base.Hash {
		t.Fatalf("published %+v, prepared %s", cm, p.Hash())
	}
	if h, _ := r.Head(); h != cm.Hash {
		t.Fatalf("HEAD %s after publishing %s", h, cm.Hash)
	}
	if fs := mustFiles(t, r, "HEAD", "agents/b/"); fs["agents/b/state/k"] != BlobHash([]byte("v\n")) {
		t.Fatalf("the published fork's files: %v", fs)
	}
	if h, err := r.Resolve(cm.Hash[:10]); err != nil || h != cm.Hash {
		t.Fatalf("abbreviated %s: %s %v", cm.Hash[:10], h, err)
	}
	if from, _, err := r.ForkPoint("b"); err != nil || from != "a" {
		t.Fatal(from, err)
	}
	r.flushes.Wait()
	if h := gitHead(t, r); h != cm.Hash {
		t.Fatalf("git sees HEAD %s after the flush, not %s", h, cm.Hash)
	}
	if len(r.pendingObjects()) != 0 || len(r.db.mem) != 0 {
		t.Fatal("objects still held after the flush")
	}
	fsck(t, r.Dir())
	tx, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Prepare(CommitOptions{Message: "m", Tag: "t", AllowEmpty: true}); !errors.Is(err, ErrBadName) {
		t.Fatalf("a prepared commit with a tag: %v", err)
	}
	if tx, err = r.Begin(); err != nil {
		t.Fatalf("the refused prepare left its transaction open: %v", err)
	}
	tx.Abort()
}

// After a crash the journal hands back the record of a commit that was
// published and not written: replayed, it is the same commit. The next
// commit writes it with its own objects, and a record the branch has
// passed is ignored; a damaged record is refused.
func TestReplayCommit(t *testing.T) {
	needGit(t)
	dir := filepath.Join(t.TempDir(), "repo")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n")}, "one")
	p := prepareFork(t, r, "b")
	rec, hash := p.Record(), p.Hash()
	p.Abort() // the crash: durable in the journal only
	r.Close()

	if r, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h := gitHead(t, r); h != base.Hash {
		t.Fatalf("git HEAD %s", h)
	}
	for _, bad := range [][]byte{rec[:len(rec)-3], append(append([]byte{}, rec[:len(rec)-1]...), rec[len(rec)-1]^1), []byte("{}")} {
		if ok, err := r.ReplayCommit(bad); ok || !errors.Is(err, errCorrupt) {
			t.Fatalf("damaged record: %v %v", ok, err)
		}
	}
	if ok, err := r.ReplayCommit(rec); !ok || err != nil {
		t.Fatalf("replay: %v %v", ok, err)
	}
	if h, _ := r.Head(); h != hash {
		t.Fatalf("HEAD %s after replay, want the acknowledged %s", h, hash)
	}
	// Not written yet (a replay starts no flush): the next commit writes
	// it in its own pack, as the parent of its own commit.
	if h := gitHead(t, r); h != base.Hash {
		t.Fatalf("git HEAD %s before any write", h)
	}
	next := change(t, r, map[string][]byte{"agents/b/state/k2": []byte("w\n")}, "two")
	if next.Parent != hash || gitHead(t, r) != next.Hash {
		t.Fatalf("next commit %+v, git HEAD %s", next, gitHead(t, r))
	}
	if got := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD~1")); got != hash {
		t.Fatalf("HEAD~1 is %s", got)
	}
	fsck(t, dir)
	if ok, err := r.ReplayCommit(rec); ok || err != nil {
		t.Fatalf("a written commit replayed again: %v %v", ok, err)
	}
}

// Close writes what was published.
func TestCloseWritesPublished(t *testing.T) {
	needGit(t)
	dir := filepath.Join(t.TempDir(), "repo")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n")}, "one")
	cm := prepareFork(t, r, "b").Publish()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h, _ := r.Head(); h != cm.Hash {
		t.Fatalf("HEAD %s after close, want %s", h, cm.Hash)
	}
	fsck(t, dir)
}

// Forks published one after another while the background flush writes
// the earlier ones: each is a commit on the one before, and git's files
// end at the last, whole.
func TestPublishedInARow(t *testing.T) {
	needGit(t)
	r := open(t)
	change(t, r, map[string][]byte{"agents/a/state/k": []byte("v\n")}, "one")
	var hashes []string
	for i := range 20 {
		cm := prepareFork(t, r, fmt.Sprint("f", i)).Publish()
		if len(hashes) > 0 && cm.Parent != hashes[len(hashes)-1] {
			t.Fatalf("fork %d: parent %s, want %s", i, cm.Parent, hashes[len(hashes)-1])
		}
		hashes = append(hashes, cm.Hash)
		if i == 10 {
			// A commit in the middle writes what is pending with its own.
			hashes = append(hashes, change(t, r, map[string][]byte{"agents/f3/state/k": []byte("w\n")}, "mid").Hash)
		}
	}
	r.flushes.Wait()
	if h := gitHead(t, r); h != hashes[len(hashes)-1] {
		t.Fatalf("git HEAD %s, want %s", h, hashes[len(hashes)-1])
	}
	if n := strings.Count(git(t, r.Dir(), "rev-list", "HEAD"), "\n"); n != len(hashes)+1 {
		t.Fatalf("%d commits in git's history, want %d", n, len(hashes)+1)
	}
	fsck(t, r.Dir())
	if fs := mustFiles(t, r, "HEAD", "agents/"); len(fs) != 21 || fs["agents/f3/state/k"] != BlobHash([]byte("w\n")) {
		t.Fatalf("files at HEAD: %v", fs)
	}
}
