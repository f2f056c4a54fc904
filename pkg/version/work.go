package version

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/uncommitted"
)

// The repository as the kernel keeps it: beside it, the set of paths
// changed since the last commit (package uncommitted), which says what
// a commit must look at; and the records of what the kernel's commits,
// logs and restores return.

// Versioning commits the work tree DATA/repo. What to commit comes from
// the set of paths changed since the last commit (the kernel's committer
// marks each accepted change), never from scanning the tree, so a commit
// costs what changed. The set survives restarts: each checkpoint saves it
// to DATA/index/uncommitted before the journal is recycled, and the
// journal's records of later changes are marked again when replayed.
// Without that file (deleted, unreadable) the first commit compares every
// key with HEAD instead: slower, never wrong.

// OpenData opens the repository of the data directory data, DATA/repo,
// with its set of uncommitted paths, DATA/index/uncommitted (OpenWork);
// a set that is unreadable is logged, and the first commit compares every
// key with HEAD.
func OpenData(data string, log *slog.Logger) (*Repo, *uncommitted.Set, error) {
	file := filepath.Join(data, "index", "uncommitted")
	repo, paths, warn, err := OpenWork(filepath.Join(data, "repo"), file)
	if err != nil {
		return nil, nil, fmt.Errorf("versioning: %w", err)
	}
	if warn != nil {
		log.Warn("the list of uncommitted changes is unreadable; the next commit compares every key with HEAD", "file", file, "err", warn)
	}
	return repo, paths, nil
}

// OpenWork opens the repository in dir and the set of its uncommitted
// paths saved in file. warn says the set was unreadable: it is then
// unknown, and the first commit compares every key with HEAD.
func OpenWork(dir, file string) (r *Repo, paths *uncommitted.Set, warn, err error) {
	r, err = Open(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	head, err := r.Head()
	if err != nil {
		r.Close()
		return nil, nil, nil, err
	}
	paths, warn = uncommitted.Open(file, head != "")
	if paths == nil {
		r.Close()
		return nil, nil, nil, warn
	}
	return r, paths, warn, nil
}

// MarkChanged marks in paths every difference between HEAD and st when
// the set is unknown (Rescan). It returns how many it marked, and false
// when the set was known and nothing was compared.
func (r *Repo) MarkChanged(st Store, paths *uncommitted.Set) (n int, scanned bool, err error) {
	if !paths.NeedRescan() {
		return 0, false, nil
	}
	dirty, err := r.Rescan(st)
	if err != nil {
		return 0, false, err
	}
	paths.Mark(dirty...)
	paths.Rescanned()
	return len(dirty), true, nil
}

// LiveFilesUnder is LiveFiles with the dirty paths below prefix taken
// from paths: the blob hash of every file below prefix as st holds it
// now, committed or not.
func (r *Repo) LiveFilesUnder(st Store, paths *uncommitted.Set, prefix string) (map[string]string, error) {
	dirty, err := paths.Under(prefix)
	if err != nil {
		return nil, err
	}
	return r.LiveFiles(st, prefix, dirty)
}

// NothingRecord is the record of a commit that found nothing to commit:
// HEAD (head) holds the state already.
func NothingRecord(head string, when time.Time) proto.CommitRecord {
	return proto.CommitRecord{Type: proto.RecordCommit, Commit: head, Time: when.Format(time.RFC3339Nano), Message: "nothing to commit", Changed: []proto.PathChange{}}
}

// History is Records from rev (HEAD when "") with n checked: a
// repository without commits has an empty history, not an unknown HEAD.
func (r *Repo) History(ctx context.Context, rev, prefix string, n int, emit func(*proto.CommitRecord) error) error {
	if n < 0 {
		return proto.Errorf(proto.EINVAL, "n must not be negative (got %d)", n)
	}
	head, err := r.Head()
	if err != nil {
		return err
	}
	if head == "" && rev == "" {
		return nil
	}
	if rev == "" {
		rev = "HEAD"
	}
	return r.Records(ctx, rev, prefix, n, emit)
}

// RestoreMessage is the message of the commit that restores agent to
// rev, which resolved to hash.
func RestoreMessage(agent, rev, hash string) string {
	short := hash
	if len(short) > 12 {
		short = short[:12]
	}
	return fmt.Sprintf("Restore the state of %s to %s (%s)", agent, rev, short)
}

// Saved is what SaveUncommitted did: a commit, or nothing when the
// paths held what HEAD (Head) holds.
type Saved struct {
	Commit  Commit
	Nothing bool
	Head    string // with Nothing: HEAD ("" in a repository without commits)
}

// SaveUncommitted commits the uncommitted paths of o.Agent (every agent's
// when "") as st holds them (Save) and cleans them from paths: once
// committed, and as well when they were saved back to what HEAD holds
// (then nothing is committed, and Saved says so).
func (r *Repo) SaveUncommitted(st Store, paths *uncommitted.Set, o SaveOptions) (Saved, error) {
	under, err := paths.Under(AgentPrefix(o.Agent))
	if err != nil {
		return Saved{}, err
	}
	cm, err := r.Save(st, under, o)
	if errors.Is(err, ErrNothingToCommit) {
		paths.Clean(under)
		head, _ := r.Head()
		return Saved{Nothing: true, Head: head}, nil
	}
	if err != nil {
		return Saved{}, err
	}
	paths.Clean(under)
	return Saved{Commit: cm}, nil
}

// PlanRestore is what makes agent's files in st equal to those of rev
// (RestorePlan), and the commit rev resolved to. rescan (MarkChanged)
// runs before the live files are read, so that paths is known.
func (r *Repo) PlanRestore(st Store, paths *uncommitted.Set, agent, rev string, rescan func() error) (hash string, plan []Restore, err error) {
	hash, err = r.Resolve(rev)
	if err != nil {
		return "", nil, err
	}
	prefix := AgentPrefix(agent)
	want, err := r.Files(hash, prefix)
	if err != nil {
		return "", nil, err
	}
	if err := rescan(); err != nil {
		return "", nil, err
	}
	have, err := r.LiveFilesUnder(st, paths, prefix)
	if err != nil {
		return "", nil, err
	}
	plan, err = r.RestorePlan(have, want)
	if err != nil {
		return "", nil, err
	}
	return hash, plan, nil
}
