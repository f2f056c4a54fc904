package version

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/oxios/oxios/pkg/durable"
)

var (
	// ErrNothingToCommit is returned by Tx.Commit when the transaction
	// changes no file and CommitOptions.AllowEmpty is false.
	ErrNothingToCommit = errors.New("nothing to commit")
	// ErrUnknownRevision is returned when a revision names no commit.
	ErrUnknownRevision = errors.New("unknown revision")
	// ErrAmbiguous is returned when an abbreviated hash matches more than
	// one commit.
	ErrAmbiguous = errors.New("ambiguous revision")
	// ErrExists is returned when creating a tag that already exists.
	ErrExists = errors.New("already exists")
	// ErrBadName is returned for a path or tag name git cannot store.
	ErrBadName = errors.New("invalid name")
	// ErrBusy is returned by Begin while another transaction is open.
	ErrBusy = errors.New("a transaction is already open")
	// ErrTxDone is returned by the calls of a transaction that has ended.
	ErrTxDone = errors.New("transaction has ended")
	// ErrClosed is returned by the calls of a closed Repo.
	ErrClosed = errors.New("repository is closed")
)

// defaultMaxPacks is how many packs may exist before the small ones are
// merged (see odb.rollup). Git itself starts to repack at 50 packs
// (gc.autoPackLimit).
const defaultMaxPacks = 50

// Repo is an open repository. Its read calls may be used from many
// goroutines at once, also while a transaction is open; one transaction
// at a time writes.
type Repo struct {
	dir    string // the work tree
	gitDir string
	branch string // the ref HEAD names, "refs/heads/main"
	db     *odb
	trees  treeCache

	// tx is held by the open transaction. The fields below it belong to
	// the transaction's holder.
	tx       sync.Mutex
	root     *dirNode // the tree of rootFor, loaded lazily; nil: not yet
	rootFor  oid      // the commit the committer's cache describes
	maxPacks int

	refMu sync.Mutex // serializes ref writes
	// The commits published and not yet written (pending.go): the head
	// they lead to (zero: none) and their objects, in order.
	pendMu   sync.Mutex
	pendHead oid
	pendObjs []object
	flushing bool
	flushes  sync.WaitGroup
	tagMu    sync.Mutex
	tagCache map[string][]string // commit -> tags; nil: not read yet
	mu       sync.RWMutex
	closed   bool
}

// Open opens the git repository of the work tree dir (dir/.git), creating
// it if it does not exist: a non-bare repository whose HEAD names the
// branch refs/heads/main. Commits go to the branch HEAD names.
func Open(dir string) (*Repo, error) {
	gitDir := filepath.Join(dir, ".git")
	if _, err := os.Stat(gitDir); errors.Is(err, fs.ErrNotExist) {
		if err := initRepo(dir); err != nil {
			return nil, fmt.Errorf("create repository %s: %w", dir, err)
		}
	} else if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	branch, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: ")
	if !ok || !strings.HasPrefix(branch, "refs/heads/") {
		return nil, fmt.Errorf("open repository %s: HEAD is %q, not a branch (detached?)", dir, strings.TrimSpace(string(b)))
	}
	// What a crash left behind. The daemon is the only writer, so these
	// are ours and nobody is using them.
	tmps, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "tmp_*"))
	for _, t := range tmps {
		os.Remove(t)
	}
	// A pack whose index is gone is the rest of a merge cut short (the
	// index is removed first); git ignores it, and so does this package.
	packs, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.pack"))
	for _, p := range packs {
		if _, err := os.Stat(strings.TrimSuffix(p, ".pack") + ".idx"); errors.Is(err, fs.ErrNotExist) {
			os.Remove(p)
		}
	}
	os.Remove(filepath.Join(gitDir, filepath.FromSlash(branch)) + ".lock")

	db, err := openODB(filepath.Join(gitDir, "objects"))
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	r := &Repo{dir: dir, gitDir: gitDir, branch: branch, db: db, maxPacks: defaultMaxPacks}
	r.trees.max = 1 << 14
	if r.rootFor, _, err = r.readRef(branch); err != nil {
		db.close()
		return nil, fmt.Errorf("open repository %s: %w", dir, err)
	}
	return r, nil
}

// initRepo creates dir/.git in a temporary folder and renames it into
// place, so a crash leaves either no repository or a whole one.
func initRepo(dir string) error {
	if err := durable.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".git.init")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	dirs := []string{"", "objects", "objects/pack", "objects/info", "refs", "refs/heads", "refs/tags"}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"HEAD":   "ref: refs/heads/main\n",
		"config": "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n",
		"description": "oxiosd's versioned data: agents' state, memory and policy. " +
			"Written by oxiosd only (no index is kept: use git log, git show, git diff REV REV).\n",
	}
	for name, content := range files {
		f, err := os.Create(filepath.Join(tmp, name))
		if err != nil {
			return err
		}
		_, err = f.WriteString(content)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if err := durable.SyncDir(filepath.Join(tmp, d)); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, filepath.Join(dir, ".git")); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// Close closes the repository's files. The Repo must not be in use.
func (r *Repo) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	// What was published is written before the files close.
	r.flushes.Wait()
	ferr := r.Flush()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	if err := r.db.close(); ferr == nil {
		ferr = err
	}
	return ferr
}

func (r *Repo) checkOpen() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return ErrClosed
	}
	return nil
}

// Head returns the hash of the commit HEAD's branch points at, or "" when
// the branch has no commit yet.
func (r *Repo) Head() (string, error) {
	if err := r.checkOpen(); err != nil {
		return "", err
	}
	id, _, err := r.readRef(r.branch)
	return id.str(), err
}

// Dir returns the work tree the repository versions.
func (r *Repo) Dir() string { return r.dir }
