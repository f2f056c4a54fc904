package work

import (
	"errors"
	"fmt"
	"io"
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
	gone := map[string]bool{} // what the run deleted: it may be in the way
	for _, c := range m.Changes {
		if c.Op == OpDelete || c.Op == OpRmdir {
			gone[c.Path] = true
		}
	}
	for _, c := range m.Changes {
		p := filepath.Join(m.Dir, c.Path)
		fi, err := os.Lstat(p)
		switch c.Op {
		case OpAdd:
			if err == nil && !gone[c.Path] {
				out = append(out, Conflict{c.Path, "the folder has this path now, the run added it"})
			}
		case OpMkdir:
			if err == nil && !fi.IsDir() && !gone[c.Path] {
				out = append(out, Conflict{c.Path, "the folder has a file here now, the run made a folder"})
			}
		case OpRmdir:
			if err != nil || !fi.IsDir() {
				continue
			}
			ents, _ := os.ReadDir(p)
			for _, e := range ents {
				if !gone[filepath.Join(c.Path, e.Name())] {
					out = append(out, Conflict{filepath.Join(c.Path, e.Name()), "added in the folder since the run started, in a folder the run removed"})
				}
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
//
// oxiosd applies as root, in a folder whose owner may be someone else:
// every path is resolved from the folder by openat2 with no symbolic
// link followed and nothing outside it reached, so that a link put in
// the folder (before or during the apply) cannot make it write
// elsewhere; files are written beside their place and renamed over it.
// The deletions come first, then the folders the run removed, deepest
// first, then what it made, in order of path.
func (s Store) Apply(m *Meta, force bool, now time.Time) ([]Conflict, error) {
	if m.State != Pending {
		return nil, fmt.Errorf("the work of %s is %s, not pending", m.Run, m.State)
	}
	t, err := openTree(m.Dir)
	if err != nil {
		return nil, fmt.Errorf("the folder %s of the work of %s: %w", m.Dir, m.Run, err)
	}
	defer t.close()
	if cs := Conflicts(m); len(cs) > 0 && !force {
		return cs, nil
	}
	b := filepath.Join(s.dir(m.Run), "b")
	var rmdirs []string
	for _, c := range m.Changes {
		if !local(c.Path) {
			return nil, fmt.Errorf("the change of %q is outside the folder", c.Path)
		}
		switch c.Op {
		case OpDelete:
			if err := t.remove(c.Path, 0); err != nil {
				return nil, fmt.Errorf("deleting %s: %w", c.Path, err)
			}
		case OpRmdir:
			rmdirs = append(rmdirs, c.Path)
		}
	}
	sort.Slice(rmdirs, func(i, j int) bool { return len(rmdirs[i]) > len(rmdirs[j]) })
	for _, d := range rmdirs {
		if err := t.remove(d, unix.AT_REMOVEDIR); err != nil {
			return nil, fmt.Errorf("removing the folder %s: %w", d, err)
		}
	}
	for _, c := range m.Changes {
		var err error
		switch c.Op {
		case OpMkdir:
			err = t.mkdirAll(c.Path)
		case OpAdd, OpModify:
			err = t.place(filepath.Join(b, c.Path), c.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("applying %s of %s: %w", c.Op, c.Path, err)
		}
	}
	for _, d := range []string{"a", "b"} {
		os.RemoveAll(filepath.Join(s.dir(m.Run), d))
	}
	m.State, m.Done = Applied, &now
	return nil, s.save(m)
}

// local reports whether rel is a path inside a folder.
func local(rel string) bool {
	return rel != "" && filepath.IsLocal(rel) && !strings.HasPrefix(rel, "/")
}

// tree is a host folder that Apply writes, held open.
type tree struct{ root int }

func openTree(dir string) (*tree, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &tree{root: fd}, nil
}

func (t *tree) close() { unix.Close(t.root) }

// dir opens the folder rel of the tree ("." for its root), following no
// link and leaving it nowhere.
func (t *tree) dir(rel string) (int, error) {
	return unix.Openat2(t.root, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// remove unlinks rel (a folder with AT_REMOVEDIR); one already gone is
// not an error.
func (t *tree) remove(rel string, flags int) error {
	pfd, err := t.dir(filepath.Dir(rel))
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := unix.Unlinkat(pfd, filepath.Base(rel), flags); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// owner is who owns name in the folder pfd, or, when there is none,
// the folder.
func owner(pfd int, name string) (uid, gid int) {
	var st unix.Stat_t
	if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		if unix.Fstat(pfd, &st) != nil {
			return -1, -1
		}
	}
	return int(st.Uid), int(st.Gid)
}

// mkdirAll makes the folder rel and its missing parents, each owned as
// its parent; a file in the way of one is replaced.
func (t *tree) mkdirAll(rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	if err := t.mkdirAll(filepath.Dir(rel)); err != nil {
		return err
	}
	pfd, err := t.dir(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	name := filepath.Base(rel)
	var st unix.Stat_t
	if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
		if err := unix.Unlinkat(pfd, name, 0); err != nil {
			return err
		}
	}
	uid, gid := owner(pfd, ".")
	if err := unix.Mkdirat(pfd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	if uid >= 0 {
		unix.Fchownat(pfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// place puts the file or link src at rel: written beside it, synced,
// owned as the file it replaces (or its folder), renamed over it.
func (t *tree) place(src, rel string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if err := t.mkdirAll(filepath.Dir(rel)); err != nil {
		return err
	}
	pfd, err := t.dir(filepath.Dir(rel))
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	name := filepath.Base(rel)
	uid, gid := owner(pfd, name)
	tmp := ".oxios-work-" + name
	unix.Unlinkat(pfd, tmp, 0)
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		if err := unix.Symlinkat(target, pfd, tmp); err != nil {
			return err
		}
	} else {
		if err := writeAt(pfd, tmp, src, fi.Mode().Perm(), uid, gid); err != nil {
			unix.Unlinkat(pfd, tmp, 0)
			return err
		}
	}
	if uid >= 0 {
		unix.Fchownat(pfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err := unix.Renameat(pfd, tmp, pfd, name); err != nil {
		unix.Unlinkat(pfd, tmp, 0)
		return err
	}
	return nil
}

// writeAt writes a new file name in the folder pfd with src's bytes,
// mode perm, owned by uid and gid (-1: as made), synced.
func writeAt(pfd int, name, src string, perm fs.FileMode, uid, gid int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(pfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm))
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), name)
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if uid >= 0 {
		// Before the mode: a chown clears the setuid and setgid bits.
		if err := out.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := out.Chmod(perm); err != nil {
		return err
	}
	return out.Sync()
}
