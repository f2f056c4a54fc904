package wasm

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tetratelabs/wazero"
)

// MaxCacheBytes bounds the compiled tools kept on disk: a folder past it
// is emptied when a runner opens it (each new build of a tool adds an
// entry, and nothing else removes the old ones). It holds dozens of
// tools: a tool of 3.4 MB compiles to about 13 MB.
const MaxCacheBytes = 512 << 20

// CheckCache reports whether dir may hold compiled tools: code that runs
// inside the process that loads it, so whoever can write there can run
// code as that process. dir, if it exists, must be a folder of the
// process's own user that no one else may write; each folder above it
// must belong to that user or root and be writable by no one else
// either, unless it is sticky (/tmp), where others cannot move or
// replace what is ours. A symbolic link on the way must belong to that
// user or root too, and the folders it leads to pass the same checks.
// What does not exist yet is made, 0700, at first use.
func CheckCache(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s: not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	if err := checkChain(dir, dir); err != nil {
		return err
	}
	// The folders the links lead to: the longest part of dir that
	// exists, resolved, and the rest of dir under it.
	base, rest := dir, ""
	for {
		if _, err := os.Lstat(base); err == nil || base == filepath.Dir(base) {
			break
		}
		base, rest = filepath.Dir(base), filepath.Join(filepath.Base(base), rest)
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		return err
	}
	if real = filepath.Join(real, rest); real != dir {
		return checkChain(real, dir)
	}
	return nil
}

// checkChain checks p and the folders above it for CheckCache, which was
// asked about dir.
func checkChain(p, dir string) error {
	uid := uint32(os.Geteuid())
	for own := true; ; p, own = filepath.Dir(p), false {
		// own: the cache folder itself; the rest are the folders above it.
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Made 0700 with what is missing below it.
		case err != nil:
			return err
		default:
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Errorf("%s: cannot read its owner", p)
			}
			mode := fi.Mode()
			switch {
			case mode&fs.ModeSymlink != 0 && st.Uid != uid && st.Uid != 0:
				return fmt.Errorf("%s (on the way to %s): a link owned by uid %d, who can point it elsewhere", p, dir, st.Uid)
			case mode&fs.ModeSymlink != 0:
				// Where it leads is checked on its own (CheckCache); the
				// folder it is in, next.
			case !mode.IsDir():
				return fmt.Errorf("%s: not a folder (%v)", p, mode.Type())
			case own && st.Uid != uid:
				return fmt.Errorf("%s: owned by uid %d, not by oxiosd's uid %d: compiled tools run inside oxiosd, so their folder must be its own (chown)", p, st.Uid, uid)
			case !own && st.Uid != uid && st.Uid != 0:
				return fmt.Errorf("%s (above %s): owned by uid %d: whoever owns a folder above the tools' cache can replace it (choose a folder owned by root or uid %d)", p, dir, st.Uid, uid)
			case mode.Perm()&0o022 != 0 && (own || mode&fs.ModeSticky == 0):
				return fmt.Errorf("%s: mode %04o lets others write there: compiled tools run inside oxiosd, so no one else may change them (chmod go-w)", p, mode.Perm())
			}
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// openCache is the compilation cache of a runner: on disk in dir (made
// 0700 if need be, its entries removed if past MaxCacheBytes), or in memory when dir
// is "" or cannot be used, which is logged (calls then compile each tool
// once per runner, as with no dir).
func openCache(dir string) wazero.CompilationCache {
	if dir == "" {
		return wazero.NewCompilationCache()
	}
	err := CheckCache(dir)
	if err == nil && cacheSize(dir) > MaxCacheBytes {
		err = empty(dir)
	}
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err == nil {
		// Again, now that it exists: under a sticky folder (/tmp) another
		// user may have made it between the first check and MkdirAll,
		// which takes a folder that is there as it is.
		err = CheckCache(dir)
	}
	if err == nil {
		var c wazero.CompilationCache
		if c, err = wazero.NewCompilationCacheWithDir(dir); err == nil {
			return c
		}
	}
	slog.Warn("wasm: tools are compiled again at each start: the cache folder cannot be used", "dir", dir, "err", err)
	return wazero.NewCompilationCache()
}

// empty removes what dir holds and keeps dir itself: its mode, and a
// link an operator made to it.
func empty(dir string) error {
	es, err := os.ReadDir(dir)
	for _, e := range es {
		if err == nil {
			err = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return err
}

// cacheSize is the bytes of the files under dir, a link to a folder
// included (0 if it cannot be read).
func cacheSize(dir string) int64 {
	var n int64
	root, err := filepath.EvalSymlinks(dir) // WalkDir does not follow a link at its root
	if err != nil {
		return 0
	}
	filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
