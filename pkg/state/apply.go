package state

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// applierNice is the nice value of the applier's thread. Its work is
// behind the journal: nothing waits for a file but a checkpoint and, past
// MaxPendingBytes, new batches. Running at 10 it yields the cores to the
// syscalls that someone waits for (a recall while a bulk load's hundred
// thousand files are written), as RocksDB lowers the priority of its
// compaction threads.
const applierNice = 10

// background locks the calling goroutine to its thread, for good, and
// lowers the thread's priority to applierNice. The thread ends with the
// goroutine; a failure leaves the priority as it was.
func background() {
	runtime.LockOSThread()
	if err := unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), applierNice); err != nil {
		slog.Debug("state: cannot lower the applier's priority", "err", err)
	}
}

// applier writes published changes into the work tree, in publication
// order, one at a time. Only it touches the files of the tree, so the file
// operations need no locks of their own. A queued change whose key has
// changed again since is skipped: the later change is queued behind it and
// writes the newest value once.
func (s *Store) applier() {
	defer close(s.done)
	background()
	for range s.kick {
		for {
			s.qmu.Lock()
			q := s.queue
			s.queue = nil
			s.busy = len(q) > 0
			s.qmu.Unlock()
			if len(q) == 0 {
				break
			}
			var freed int64
			for _, r := range q {
				freed += s.apply(r)
			}
			s.qmu.Lock()
			s.pending -= freed
			s.busy = false
			s.qcond.Broadcast()
			s.qmu.Unlock()
		}
		if err := s.checkpoint(false); err != nil {
			slog.Error("state checkpoint failed", "err", err)
		}
	}
}

// apply materializes one queued change and returns the overlay bytes it
// released (see overlayCost).
func (s *Store) apply(r ref) int64 {
	a := r.a
	a.mu.RLock()
	e := a.keys[r.key]
	var value []byte
	write := e != nil && e.version() == r.ver && e.pending()
	var mod int64
	if write {
		value, mod = e.val, e.mod
	}
	tomb := !write && e == nil && a.tombs[r.key] == r.ver
	a.mu.RUnlock()

	switch {
	case write:
		err := s.writeFile(a.name, r.key, value, mod)
		if err != nil {
			// The value stays in the overlay (readers are right) and the
			// journal keeps it durable: no checkpoint recycles the journal
			// until the write is retried and succeeds (see checkpoint).
			slog.Error("state: writing key to work tree", "agent", a.name, "key", r.key, "err", err)
			s.qmu.Lock()
			s.retry = append(s.retry, r)
			s.retryErr = err
			s.qmu.Unlock()
		}
		freed := int64(overlayPerChange)
		a.mu.Lock()
		if cur := a.keys[r.key]; cur == e && err == nil {
			freed += int64(cap(value))
			e.ver &^= pendBit
			e.val = nil
			if len(value) <= cacheMaxValue && s.cache.Add(int64(len(value))) <= s.opts.CacheBytes {
				e.val = value
			} else if len(value) <= cacheMaxValue {
				s.cache.Add(-int64(len(value)))
			}
		}
		a.mu.Unlock()
		return freed
	case tomb:
		if err := s.removeFile(a.name, r.key); err != nil {
			slog.Error("state: removing key from work tree", "agent", a.name, "key", r.key, "err", err)
		}
		a.mu.Lock()
		if a.tombs[r.key] == r.ver {
			delete(a.tombs, r.key)
		}
		a.mu.Unlock()
	}
	return overlayPerChange
}

// writeFile puts value at the key's path: temp file, write, rename. It
// does not fsync: the journal holds the value until a checkpoint's syncfs.
// Anything in the way is stale (the index says which keys exist, and no
// key can be both a value and a folder): it is removed.
func (s *Store) writeFile(agentName, key string, value []byte, mod int64) error {
	dst := s.path(agentName, key)
	tmp := filepath.Join(s.tmp, strconv.FormatUint(s.tmpN.Add(1), 36))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	for b := value; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			unix.Close(fd)
			os.Remove(tmp)
			return err
		}
		b = b[n:]
	}
	// The file's mtime is the save's, so a restart reports the same time.
	ts := []unix.Timespec{unix.NsecToTimespec(mod), unix.NsecToTimespec(mod)}
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, tmp, ts, 0)
	if err := unix.Close(fd); err != nil {
		os.Remove(tmp)
		return err
	}
	for try := 0; ; try++ {
		err = os.Rename(tmp, dst)
		if err == nil || try == 3 {
			break
		}
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			err = s.makeParents(agentName, key)
		case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, fs.ErrExist):
			err = os.RemoveAll(dst)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// makeParents creates the folders of key, removing stale files in the way.
func (s *Store) makeParents(agentName, key string) error {
	dir := filepath.Dir(s.path(agentName, key))
	err := os.MkdirAll(dir, 0o755)
	if err == nil || !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, fs.ErrExist) {
		return err
	}
	root := s.root(agentName)
	p := root
	for _, elem := range strings.Split(filepath.ToSlash(dir[len(root):]), "/") {
		if elem == "" {
			continue
		}
		p = filepath.Join(p, elem)
		if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return os.MkdirAll(dir, 0o755)
}

// removeFile deletes the key's file and the folders it leaves empty, up to
// the agent's state folder.
func (s *Store) removeFile(agentName, key string) error {
	p := s.path(agentName, key)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		if errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s is a folder: %w", p, err)
		}
		return err
	}
	root := s.root(agentName)
	for dir := filepath.Dir(p); len(dir) > len(root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}
