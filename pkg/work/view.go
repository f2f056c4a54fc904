package work

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// The view of a run's pending work (the mount's runs/RUN/work/): its
// folder as it is now with what the run changed over it, as the folder
// would be once the work is applied. A path the run added or modified is
// its copy (b/), one it deleted or whose folder it removed is not there,
// any other is the host folder's. Only folders and regular files are
// shown: links and other kinds are left out (the patch has the links the
// run made). Every path is resolved beneath its root following no link,
// so a link the run or anyone made leads nowhere outside.

// ViewEntry is a name in a folder of a view.
type ViewEntry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir,omitempty"`
	Size int64  `json:"size"`
	// Mode is the permission bits.
	Mode uint32 `json:"mode"`
}

// MaxViewFile is the largest file of a view that View reads (EFBIG
// beyond).
const MaxViewFile = 16 << 20

// ErrTooBig is View's error for a file over MaxViewFile.
var ErrTooBig = errors.New("the file is larger than a view reads")

// changes indexes m's changes by path.
type changes map[string]string // path: "file" (added or modified: b/), "dir" (made), "gone"

func indexOf(m *Meta) changes {
	ix := changes{}
	for _, c := range m.Changes {
		switch c.Op {
		case OpAdd, OpModify:
			ix[c.Path] = "file"
		case OpMkdir:
			ix[c.Path] = "dir"
		case OpDelete, OpRmdir:
			if ix[c.Path] == "" {
				ix[c.Path] = "gone"
			}
		}
	}
	return ix
}

// View is rel ("." for the top) of the view of m's work, which must be
// pending: the entries of a folder, sorted by name, or the content of a
// file (dir false). A path that is not there is fs.ErrNotExist.
func (s Store) View(m *Meta, rel string) (ents []ViewEntry, data []byte, dir bool, err error) {
	rel = filepath.Clean(rel)
	if rel != "." && !local(rel) || strings.ContainsRune(rel, 0) {
		return nil, nil, false, fs.ErrNotExist
	}
	ix := indexOf(m)
	b := filepath.Join(s.dir(m.Run), "b")
	if rel != "." {
		// Below a folder the run removed, or a file it put in its place.
		for p := filepath.Dir(rel); p != "."; p = filepath.Dir(p) {
			if ix[p] == "gone" || ix[p] == "file" {
				return nil, nil, false, fs.ErrNotExist
			}
		}
	}
	switch ix[rel] {
	case "gone":
		return nil, nil, false, fs.ErrNotExist
	case "file":
		data, err := readBeneath(b, rel)
		return nil, data, false, err
	}
	hostDir, err := isDirBeneath(m.Dir, rel)
	if err != nil {
		return nil, nil, false, err
	}
	if !hostDir && ix[rel] != "dir" {
		if _, err := statBeneath(b, rel); err == nil {
			// A folder of the run's files, in no change of its own.
			return s.list(m, ix, rel, false)
		}
		data, err := readBeneath(m.Dir, rel)
		return nil, data, false, err
	}
	return s.list(m, ix, rel, hostDir)
}

// list is the folder rel of the view: the host's entries (when host),
// the run's copies and the folders it made, less what it deleted.
func (s Store) list(m *Meta, ix changes, rel string, host bool) ([]ViewEntry, []byte, bool, error) {
	seen := map[string]ViewEntry{}
	add := func(root string) error {
		es, err := listBeneath(root, rel)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		for _, e := range es {
			p := e.Name
			if rel != "." {
				p = rel + "/" + e.Name
			}
			if ix[p] == "gone" || (root == m.Dir && ix[p] != "") {
				continue // deleted; or the run's, listed from b/
			}
			seen[e.Name] = e
		}
		return err
	}
	if host {
		if err := add(m.Dir); err != nil {
			return nil, nil, false, err
		}
	}
	if err := add(filepath.Join(s.dir(m.Run), "b")); err != nil {
		return nil, nil, false, err
	}
	for p, what := range ix {
		if what == "dir" && filepath.Dir(p) == rel {
			if _, ok := seen[filepath.Base(p)]; !ok {
				seen[filepath.Base(p)] = ViewEntry{Name: filepath.Base(p), Dir: true, Mode: 0o755}
			}
		}
	}
	ents := make([]ViewEntry, 0, len(seen))
	for _, e := range seen {
		ents = append(ents, e)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name < ents[j].Name })
	return ents, nil, true, nil
}

// openBeneath opens rel beneath the folder root with flags, following
// no link.
func openBeneath(root, rel string, flags int) (*os.File, error) {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, viewErr(err)
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, viewErr(err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

// viewErr is err as View says it: a link in the way, or a file where a
// folder was named, is a path that is not there.
func viewErr(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
		return fs.ErrNotExist
	}
	return err
}

func statBeneath(root, rel string) (fs.FileInfo, error) {
	f, err := openBeneath(root, rel, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// isDirBeneath reports whether rel beneath root is a folder.
func isDirBeneath(root, rel string) (bool, error) {
	fi, err := statBeneath(root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

// readBeneath reads the regular file rel beneath root.
func readBeneath(root, rel string) ([]byte, error) {
	// Not blocking on a fifo: anything but a regular file is not shown.
	f, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	if fi.Size() > MaxViewFile {
		return nil, ErrTooBig
	}
	return io.ReadAll(io.LimitReader(f, MaxViewFile+1))
}

// listBeneath lists the folders and regular files of the folder rel
// beneath root.
func listBeneath(root, rel string) ([]ViewEntry, error) {
	f, err := openBeneath(root, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var ents []ViewEntry
	for _, de := range des {
		fi, err := de.Info() // lstat: a link is a link
		if err != nil {
			continue // gone meanwhile
		}
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			continue
		}
		if strings.ContainsRune(de.Name(), '/') {
			continue
		}
		ents = append(ents, ViewEntry{Name: de.Name(), Dir: fi.IsDir(), Size: fi.Size(), Mode: uint32(fi.Mode().Perm())})
	}
	return ents, nil
}
