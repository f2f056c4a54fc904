package work

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conflict is a file of the host folder that changed under one the run
// changed, since the run started.
type Conflict struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func (c Conflict) String() string { return c.Path + ": " + c.Why }

// Conflicts are the paths of m's changes whose host files changed since
// the run started: a ctime after its start, or content not what it was
// when the run exited, or a file where the run added one.
func Conflicts(m *Meta) []Conflict {
	var out []Conflict
	for _, c := range m.Changes {
		p := filepath.Join(m.Dir, c.Path)
		fi, err := os.Lstat(p)
		switch c.Op {
		case OpAdd:
			if err == nil && !fi.IsDir() {
				out = append(out, Conflict{c.Path, "the folder has this file now, the run added it"})
			}
		case OpModify, OpDelete:
			if err != nil {
				out = append(out, Conflict{c.Path, "deleted in the folder since the run started"})
				continue
			}
			if changedSince(fi, m.Started) {
				out = append(out, Conflict{c.Path, "changed in the folder since the run started (ctime " + ctime(fi).UTC().Format(time.RFC3339Nano) + ")"})
				continue
			}
			if digestOf(p, fi) != c.Base {
				out = append(out, Conflict{c.Path, "changed in the folder since the run exited"})
			}
		}
	}
	return out
}

func ctime(fi fs.FileInfo) time.Time {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}
	}
	return time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
}

func changedSince(fi fs.FileInfo, t time.Time) bool { return ctime(fi).After(t) }

// Apply writes m's changes to the host folder, unless a file conflicts
// (Conflicts) and not force: then nothing is written and the conflicts
// are returned. A file written is owned as the one it replaces, or as
// its folder. m is then applied.
func (s Store) Apply(m *Meta, force bool, now time.Time) ([]Conflict, error) {
	if m.State != Pending {
		return nil, fmt.Errorf("the work of %s is %s, not pending", m.Run, m.State)
	}
	if fi, err := os.Stat(m.Dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("the folder %s of the work of %s: not a folder now (%v)", m.Dir, m.Run, err)
	}
	if cs := Conflicts(m); len(cs) > 0 && !force {
		return cs, nil
	}
	b := filepath.Join(s.dir(m.Run), "b")
	var rmdirs []string
	for _, c := range m.Changes {
		dst := filepath.Join(m.Dir, c.Path)
		if !inside(m.Dir, dst) {
			return nil, fmt.Errorf("the change of %q is outside the folder", c.Path)
		}
		var err error
		switch c.Op {
		case OpDelete:
			err = os.Remove(dst)
			if os.IsNotExist(err) {
				err = nil
			}
		case OpRmdir:
			rmdirs = append(rmdirs, dst)
		case OpMkdir:
			err = mkdirOwned(m.Dir, dst)
		case OpAdd, OpModify:
			err = place(m.Dir, filepath.Join(b, c.Path), dst)
		}
		if err != nil {
			return nil, fmt.Errorf("applying %s of %s: %w", c.Op, c.Path, err)
		}
	}
	// Folders the run removed, deepest first, once their files are.
	sort.Slice(rmdirs, func(i, j int) bool { return len(rmdirs[i]) > len(rmdirs[j]) })
	for _, d := range rmdirs {
		if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
			if fi, serr := os.Lstat(d); serr == nil && !fi.IsDir() {
				continue // the run put a file there (an add)
			}
			return nil, fmt.Errorf("removing the folder %s: %w", d, err)
		}
	}
	for _, d := range []string{"a", "b"} {
		os.RemoveAll(filepath.Join(s.dir(m.Run), d))
	}
	m.State, m.Done = Applied, &now
	return nil, s.save(m)
}

func inside(dir, p string) bool {
	return strings.HasPrefix(filepath.Clean(p), filepath.Clean(dir)+"/")
}

// owner is who owns p, or, when p does not exist, its nearest folder.
func owner(root, p string) (int, int) {
	for {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			return int(st.Uid), int(st.Gid)
		}
		if p == root || p == "/" || p == "." {
			return -1, -1
		}
		p = filepath.Dir(p)
	}
}

// mkdirOwned makes dir and its missing parents, owned as their parent.
func mkdirOwned(root, dir string) error {
	if fi, err := os.Lstat(dir); err == nil {
		if fi.IsDir() {
			return nil
		}
		if err := os.Remove(dir); err != nil {
			return err
		}
	}
	if err := mkdirOwned(root, filepath.Dir(dir)); err != nil {
		return err
	}
	uid, gid := owner(root, filepath.Dir(dir))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	if uid >= 0 {
		os.Lchown(dir, uid, gid)
	}
	return nil
}

// place puts the file or link src at dst: a new file beside it, synced,
// then renamed over it, owned as dst was (or its folder).
func place(root, src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := mkdirOwned(root, filepath.Dir(dst)); err != nil {
		return err
	}
	uid, gid := owner(root, dst)
	if dfi, err := os.Lstat(dst); err == nil && dfi.IsDir() {
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
		uid, gid = owner(root, filepath.Dir(dst))
	}
	tmp := filepath.Join(filepath.Dir(dst), ".oxios-work-"+filepath.Base(dst))
	os.Remove(tmp)
	if err := copyEntry(src, tmp, fi); err != nil {
		os.Remove(tmp)
		return err
	}
	if fi.Mode().IsRegular() {
		if f, err := os.Open(tmp); err == nil {
			f.Sync()
			f.Close()
		}
	}
	if uid >= 0 {
		os.Lchown(tmp, uid, gid)
		if fi.Mode().IsRegular() {
			os.Chmod(tmp, fi.Mode().Perm()) // chown clears setuid bits, not ours
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
