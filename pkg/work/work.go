// Package work keeps the pending work of runs that worked on a host
// folder through an overlay (ox-spawn --work, issue 48): what a run
// changed, read from its upper layer once it has exited, kept under
// DATA/work-pending/RUN until an operator applies it to the folder or
// discards it; its patch (a diff git applies), and the conflicts that
// refuse an apply.
//
// The upper layer lives on the run's own size-limited workspace (a tmpfs
// when oxiosd is root), so --work obeys the run's disk limit, and the
// workspace dies with the run. What it holds is therefore copied out
// when the run exits (Harvest), onto DATA's disk, where it survives a
// restart: the changed files as they are now (b/), the host's files they
// replace or delete as the run found them (a/), a record of each change
// (work.json) and the patch between the two (work.patch). Keeping the
// upper layer itself on DATA's disk instead would have needed a quota of
// its own (project quotas, which ext4 and XFS have only when made with
// them) to obey the disk limit; the copy costs what the run changed,
// which that limit bounds.
//
// Conflicts are found cheaply: nothing is read of the host folder when
// the run starts. A file the run changed conflicts when the host's has
// a ctime after the run's start (the kernel sets ctime on any change and
// nobody can set it back), or when its content is not what it was when
// the run exited.
package work

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/durable"
)

// The states of a run's work.
const (
	Running   = "running"   // the run works
	Pending   = "pending"   // harvested, waiting for apply or discard
	Applied   = "applied"   // written to the host folder
	Discarded = "discarded" // thrown away
	Lost      = "lost"      // the run's upper layer was lost (oxiosd stopped while it ran)
)

// The kinds of change.
const (
	OpAdd    = "add"
	OpModify = "modify"
	OpDelete = "delete"
	OpMkdir  = "mkdir"
	OpRmdir  = "rmdir"
)

// Change is one path the run changed, relative to the folder.
type Change struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	// Base is the BLAKE3 digest of the host's file as the run exited
	// ("" when there was none, or a folder).
	Base string `json:"base,omitempty"`
}

// Meta is the record of a run's work (work.json).
type Meta struct {
	Run     string    `json:"run"`
	Agent   string    `json:"agent"`
	Dir     string    `json:"dir"`
	State   string    `json:"state"`
	Started time.Time `json:"started"`
	// Ended is when the run's work was harvested.
	Ended *time.Time `json:"ended,omitempty"`
	// Done is when it was applied or discarded.
	Done    *time.Time `json:"done,omitempty"`
	Changes []Change   `json:"changes,omitempty"`
	// Digest is the BLAKE3 digest of work.patch.
	Digest string `json:"digest,omitempty"`
	// Skipped names what the run made that a patch cannot carry
	// (fifos, sockets, devices).
	Skipped []string `json:"skipped,omitempty"`
}

// Store is the pending work under a root (DATA/work-pending).
type Store struct{ Root string }

func (s Store) dir(run string) string { return filepath.Join(s.Root, run) }

// Path is the folder of run's work.
func (s Store) Path(run string) string { return s.dir(run) }

// Begin records that run of agent starts working on dir.
func (s Store) Begin(run, agent, dir string, started time.Time) error {
	if err := os.MkdirAll(s.dir(run), 0o700); err != nil {
		return err
	}
	// Not synced: a record lost in a crash is of a run whose upper
	// layer is lost with it; the harvest's record is synced.
	b, err := json.MarshalIndent(&Meta{Run: run, Agent: agent, Dir: dir, State: Running, Started: started}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir(run), "work.json"), append(b, '\n'), 0o600)
}

func (s Store) save(m *Meta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	p := filepath.Join(s.dir(m.Run), "work.json")
	return durable.WriteFile(p, p+".tmp", append(b, '\n'), 0o600)
}

// Load reads run's record; ENOENT (fs.ErrNotExist) when it has none.
func (s Store) Load(run string) (*Meta, error) {
	if run == "" || strings.ContainsAny(run, "/\x00") || run == "." || run == ".." {
		return nil, fs.ErrNotExist
	}
	b, err := os.ReadFile(filepath.Join(s.dir(run), "work.json"))
	if err != nil {
		return nil, err
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("the work of %s: %w", run, err)
	}
	return &m, nil
}

// List is every run's record, oldest first.
func (s Store) List() ([]*Meta, error) {
	ents, err := os.ReadDir(s.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Meta
	for _, e := range ents {
		if m, err := s.Load(e.Name()); err == nil {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}

// Patch is run's patch, as its harvest wrote it.
func (s Store) Patch(run string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.dir(run), "work.patch"))
}

// Digest is the hex BLAKE3 digest of b.
func Digest(b []byte) string {
	h := blake3.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Recover marks the work of runs that were running when oxiosd stopped
// as lost: their upper layers were on the workspaces, gone with them.
func (s Store) Recover() error {
	all, err := s.List()
	if err != nil {
		return err
	}
	for _, m := range all {
		if m.State == Running {
			m.State = Lost
			if err := s.save(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// Expire removes the work that was harvested, applied, discarded or
// lost longer than ttl before now (0: never), and returns the runs.
func (s Store) Expire(now time.Time, ttl time.Duration) ([]string, error) {
	if ttl <= 0 {
		return nil, nil
	}
	all, err := s.List()
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, m := range all {
		t := m.Started
		if m.Ended != nil {
			t = *m.Ended
		}
		if m.Done != nil {
			t = *m.Done
		}
		if m.State == Running || now.Sub(t) < ttl {
			continue
		}
		if err := os.RemoveAll(s.dir(m.Run)); err != nil {
			return gone, err
		}
		gone = append(gone, m.Run)
	}
	return gone, nil
}

// Remove removes run's work whatever its state.
func (s Store) Remove(run string) error { return os.RemoveAll(s.dir(run)) }

// Discard throws away run's pending work; its record stays, discarded.
func (s Store) Discard(m *Meta, now time.Time) error {
	if m.State != Pending {
		return fmt.Errorf("the work of %s is %s, not pending", m.Run, m.State)
	}
	for _, d := range []string{"a", "b"} {
		if err := os.RemoveAll(filepath.Join(s.dir(m.Run), d)); err != nil {
			return err
		}
	}
	m.State, m.Done = Discarded, &now
	return s.save(m)
}

// Overlay xattrs that mark a folder opaque (it hides the lower's): as
// root, and in a user namespace (userxattr).
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

func opaque(p string) bool {
	buf := make([]byte, 8)
	for _, x := range opaqueXattrs {
		if n, err := unix.Lgetxattr(p, x, buf); err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

func whiteout(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&fs.ModeCharDevice != 0 && st.Rdev == 0
}

// harvest is one harvest in progress.
type harvest struct {
	lower, upper, a, b string
	m                  *Meta
	seen               map[string]bool // paths already recorded
}

// Harvest reads run's upper layer (the run has exited) into its pending
// work: the changed files, the host's as they are, the changes and the
// patch; it returns the record, pending (or, with no change, applied:
// there is nothing to do).
func (s Store) Harvest(run, upper string, now time.Time) (*Meta, error) {
	m, err := s.Load(run)
	if err != nil {
		return nil, err
	}
	h := &harvest{lower: m.Dir, upper: upper, a: filepath.Join(s.dir(run), "a"), b: filepath.Join(s.dir(run), "b"), m: m, seen: map[string]bool{}}
	for _, d := range []string{h.a, h.b} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	m.Changes, m.Skipped = nil, nil
	err = filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return h.entry(rel, p, fi)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the work of %s: %w", run, err)
	}
	sort.SliceStable(m.Changes, func(i, j int) bool { return m.Changes[i].Path < m.Changes[j].Path })
	var patch []byte
	if len(m.Changes) > 0 { // no git for a run that changed nothing
		if patch, err = Diff(s.dir(run)); err != nil {
			return nil, err
		}
	}
	p := filepath.Join(s.dir(run), "work.patch")
	if err := durable.WriteFile(p, p+".tmp", patch, 0o600); err != nil {
		return nil, err
	}
	m.Digest = Digest(patch)
	m.State, m.Ended = Pending, &now
	if len(m.Changes) == 0 {
		m.State, m.Done = Applied, &now
	}
	return m, s.save(m)
}

// entry records the upper layer's rel (at p, fi).
func (h *harvest) entry(rel, p string, fi fs.FileInfo) error {
	lp := filepath.Join(h.lower, rel)
	lfi, lerr := os.Lstat(lp)
	switch {
	case fi.IsDir():
		if lerr == nil && lfi.IsDir() {
			if opaque(p) {
				// The run removed the folder and made it again: what
				// was in it is gone but what the upper holds.
				return h.removeTree(rel, lp, false, p)
			}
			return nil
		}
		if lerr == nil {
			if err := h.deleted(rel, lp, lfi); err != nil {
				return err
			}
		}
		h.add(Change{Path: rel, Op: OpMkdir})
		return nil
	case whiteout(fi):
		if lerr != nil {
			return nil
		}
		if lfi.IsDir() {
			return h.removeTree(rel, lp, true, "")
		}
		return h.deleted(rel, lp, lfi)
	case fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0:
		if err := copyEntry(p, filepath.Join(h.b, rel), fi); err != nil {
			return err
		}
		if lerr != nil {
			h.add(Change{Path: rel, Op: OpAdd})
			return nil
		}
		if lfi.IsDir() {
			if err := h.removeTree(rel, lp, true, ""); err != nil {
				return err
			}
			h.add(Change{Path: rel, Op: OpAdd})
			return nil
		}
		if same(p, fi, lp, lfi) {
			// Copied up but not changed (opened for writing, touched).
			return os.Remove(filepath.Join(h.b, rel))
		}
		if err := copyEntry(lp, filepath.Join(h.a, rel), lfi); err != nil {
			return err
		}
		h.add(Change{Path: rel, Op: OpModify, Base: digestOf(lp, lfi)})
		return nil
	}
	h.m.Skipped = append(h.m.Skipped, rel)
	return nil
}

func (h *harvest) add(c Change) {
	if h.seen[c.Path+"\x00"+c.Op] {
		return
	}
	h.seen[c.Path+"\x00"+c.Op] = true
	h.m.Changes = append(h.m.Changes, c)
}

// deleted records the host's file or link lp (rel) deleted.
func (h *harvest) deleted(rel, lp string, lfi fs.FileInfo) error {
	if lfi.IsDir() {
		return h.removeTree(rel, lp, true, "")
	}
	if !lfi.Mode().IsRegular() && lfi.Mode()&fs.ModeSymlink == 0 {
		h.m.Skipped = append(h.m.Skipped, rel)
		return nil
	}
	if err := copyEntry(lp, filepath.Join(h.a, rel), lfi); err != nil {
		return err
	}
	h.add(Change{Path: rel, Op: OpDelete, Base: digestOf(lp, lfi)})
	return nil
}

// removeTree records what the host's folder lp (rel) holds deleted,
// but what the upper layer (at upper, "" for none) has again, and the
// folder itself when self.
func (h *harvest) removeTree(rel, lp string, self bool, upper string) error {
	ents, err := os.ReadDir(lp)
	if err != nil {
		return err
	}
	for _, e := range ents {
		r, l := filepath.Join(rel, e.Name()), filepath.Join(lp, e.Name())
		if upper != "" {
			if _, err := os.Lstat(filepath.Join(upper, e.Name())); err == nil {
				continue // the walk of the upper layer records it
			}
		}
		fi, err := os.Lstat(l)
		if err != nil {
			return err
		}
		if err := h.deleted(r, l, fi); err != nil {
			return err
		}
	}
	if self {
		h.add(Change{Path: rel, Op: OpRmdir})
	}
	return nil
}

// same reports whether the files or links at a and b hold the same.
func same(a string, afi fs.FileInfo, b string, bfi fs.FileInfo) bool {
	if afi.Mode() != bfi.Mode() || afi.Size() != bfi.Size() {
		return false
	}
	if afi.Mode()&fs.ModeSymlink != 0 {
		x, _ := os.Readlink(a)
		y, _ := os.Readlink(b)
		return x == y
	}
	x, err := os.ReadFile(a)
	if err != nil {
		return false
	}
	y, err := os.ReadFile(b)
	return err == nil && bytes.Equal(x, y)
}

// digestOf is the digest of the file at p (of a link: of its target's
// name); "" for anything else or an error.
func digestOf(p string, fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(p)
		if err != nil {
			return ""
		}
		return "link:" + Digest([]byte(t))
	}
	if !fi.Mode().IsRegular() {
		return ""
	}
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := blake3.New(32, nil)
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// copyEntry copies the file or link src (fi) to dst, making dst's
// folders, with src's mode.
func copyEntry(src, dst string, fi fs.FileInfo) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := os.Readlink(src)
		if err != nil {
			return err
		}
		os.Remove(dst)
		return os.Symlink(t, dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(fi.Mode().Perm()); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Diff is the patch from dir/a to dir/b, as git makes it (binary files
// as git does), with a/ and b/ as its paths' prefixes.
func Diff(dir string) ([]byte, error) {
	cmd := exec.Command("git", "-c", "core.quotePath=false", "diff", "--no-index", "--no-prefix", "--binary", "--no-color", "--no-ext-diff", "--no-renames", "--full-index", "a", "b")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		err = nil // git diff's "they differ"
	}
	if err != nil {
		return nil, fmt.Errorf("git diff of the work: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Stat is the diffstat of patch, as git apply --stat prints it.
func Stat(patch []byte) ([]byte, error) {
	if len(patch) == 0 {
		return nil, nil
	}
	cmd := exec.Command("git", "apply", "--stat")
	cmd.Stdin = bytes.NewReader(patch)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "LC_ALL=C")
	cmd.Dir = os.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git apply --stat: %v %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
