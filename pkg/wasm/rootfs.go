package wasm

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strconv"
	"sync"
	"syscall"
	"time"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// rootFS is a host folder as a guest sees it, every path resolved with
// os.Root so that no path, symlink or race leads out of it. wazero's own
// DirFS joins paths and lets the host follow a symlink anywhere: a link
// to /etc/passwd that the agent's processes left in its workspace would
// be read. Files are opened beneath the root, then reopened through
// /proc/self/fd (which names the file opened, not a path) to get wazero's
// file type, so the sandbox is Linux-only, as the daemon is.
type rootFS struct {
	experimentalsys.UnimplementedFS
	root  *os.Root
	proc  experimentalsys.FS
	guest string    // where the guest sees it
	ref   *refusals // escapes refused, for the call's Result
	owner int       // given what the guest creates (0: left to oxiosd)
}

// refusals are the guest paths a call was refused because they lead out
// of a mount (a symlink the agent left in its workspace, say). The kernel
// audits them.
type refusals struct {
	mu    sync.Mutex
	paths []string
}

// maxRefusals bounds the paths a call reports (a loop of opens would
// otherwise fill the log).
const maxRefusals = 8

func (r *refusals) add(p string) {
	r.mu.Lock()
	if len(r.paths) < maxRefusals {
		r.paths = append(r.paths, p)
	}
	r.mu.Unlock()
}

func (r *refusals) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

var _ experimentalsys.FS = (*rootFS)(nil)

func newRootFS(dir string) (*rootFS, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &rootFS{root: r, proc: sysfs.DirFS("/proc/self/fd")}, nil
}

func (r *rootFS) Close() error { return r.root.Close() }

func (r *rootFS) String() string { return r.root.Name() }

// errno is err as an errno; an escape from the root is EPERM.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	if errors.As(err, &en) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrPermission) {
		return experimentalsys.UnwrapOSError(err)
	}
	return experimentalsys.EPERM
}

func name(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func (r *rootFS) OpenFile(p string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	p = name(p)
	var of int
	switch flag & (experimentalsys.O_RDONLY | experimentalsys.O_RDWR | experimentalsys.O_WRONLY) {
	case experimentalsys.O_RDWR:
		of = os.O_RDWR
	case experimentalsys.O_WRONLY:
		of = os.O_WRONLY
	}
	for _, m := range []struct {
		o experimentalsys.Oflag
		f int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND}, {experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY}, {experimentalsys.O_DSYNC, syscall.O_DSYNC},
		{experimentalsys.O_EXCL, os.O_EXCL}, {experimentalsys.O_NONBLOCK, syscall.O_NONBLOCK},
		{experimentalsys.O_RSYNC, syscall.O_RSYNC}, {experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_TRUNC, os.O_TRUNC},
	} {
		if flag&m.o != 0 {
			of |= m.f
		}
	}
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		if fi, err := r.root.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, experimentalsys.ELOOP
		}
	}
	f, err := r.root.OpenFile(p, of, perm)
	if err != nil {
		e := errno(err)
		if e == experimentalsys.EPERM && r.ref != nil {
			r.ref.add(path.Join(r.guest, p)) // out of the root
		}
		return nil, e
	}
	defer f.Close()
	if r.owner != 0 && flag&experimentalsys.O_CREAT != 0 {
		f.Chown(r.owner, r.owner)
	}
	// What the first open did (create, truncate) is done; the reopen
	// takes the file as it is, and follows the /proc link to it.
	again := flag &^ (experimentalsys.O_CREAT | experimentalsys.O_EXCL | experimentalsys.O_TRUNC | experimentalsys.O_NOFOLLOW)
	return r.proc.OpenFile(strconv.Itoa(int(f.Fd())), again, perm)
}

func (r *rootFS) Lstat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Lstat(name(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

func (r *rootFS) Stat(p string) (sys.Stat_t, experimentalsys.Errno) {
	fi, err := r.root.Stat(name(p))
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

func (r *rootFS) Mkdir(p string, perm fs.FileMode) experimentalsys.Errno {
	e := errno(r.root.Mkdir(name(p), perm))
	if e == 0 && r.owner != 0 {
		r.root.Lchown(name(p), r.owner, r.owner)
	}
	if e == experimentalsys.ENOTDIR {
		e = experimentalsys.ENOENT
	}
	return e
}

func (r *rootFS) Chmod(p string, perm fs.FileMode) experimentalsys.Errno {
	return errno(r.root.Chmod(name(p), perm))
}

func (r *rootFS) Rename(from, to string) experimentalsys.Errno {
	return errno(r.root.Rename(name(from), name(to)))
}

func (r *rootFS) Rmdir(p string) experimentalsys.Errno {
	fi, err := r.root.Lstat(name(p))
	if err != nil {
		return errno(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errno(r.root.Remove(name(p)))
}

func (r *rootFS) Unlink(p string) experimentalsys.Errno {
	fi, err := r.root.Lstat(name(p))
	if err != nil {
		return errno(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return errno(r.root.Remove(name(p)))
}

func (r *rootFS) Link(oldPath, newPath string) experimentalsys.Errno {
	return errno(r.root.Link(name(oldPath), name(newPath)))
}

func (r *rootFS) Symlink(oldPath, link string) experimentalsys.Errno {
	// As wazero's DirFS: an absolute target is refused; a relative one is
	// resolved beneath the root when followed.
	if len(oldPath) > 0 && oldPath[0] == '/' {
		return experimentalsys.EPERM
	}
	return errno(r.root.Symlink(oldPath, name(link)))
}

func (r *rootFS) Readlink(p string) (string, experimentalsys.Errno) {
	s, err := r.root.Readlink(name(p))
	if err != nil {
		return "", errno(err)
	}
	return s, 0
}

func (r *rootFS) Utimens(p string, atim, mtim int64) experimentalsys.Errno {
	t := func(ns int64) time.Time {
		if ns == experimentalsys.UTIME_OMIT {
			return time.Time{}
		}
		return time.Unix(0, ns)
	}
	return errno(r.root.Chtimes(name(p), t(atim), t(mtim)))
}
