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
	"time"
	"unsafe"

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
	s.applierTID.Store(int32(unix.Gettid()))
	for range s.kick {
		for first := true; ; first = false {
			s.qmu.Lock()
			if !first && !s.drainNow() {
				// What came in during the run waits for its own lull
				// (enqueue armed the timer for it), as the first
				// changes did: under a steady stream of saves, a run
				// right after the last one would write each key again
				// for every few saves (16 clients on 256 keys: 1,600
				// files a second instead of 128, a quarter of the
				// daemon's CPU).
				s.qmu.Unlock()
				break
			}
			q := s.queue
			s.queue = nil
			s.busy = len(q) > 0
			s.qmu.Unlock()
			if len(q) == 0 {
				break
			}
			var freed int64
			room := s.freeSpace()
			// A key's last change of the run is written with the key's
			// latest value (see apply).
			last := make(map[fileKey]int, len(q))
			for i, r := range q {
				last[fileKey{r.a, r.key}] = i
			}
			for i, r := range q {
				freed += s.apply(r, &room, last[fileKey{r.a, r.key}] == i)
			}
			s.qmu.Lock()
			s.pending -= freed
			s.busy = false
			stuck := len(s.retry) > 0
			if !stuck {
				s.retryLogged = false
			}
			s.qcond.Broadcast()
			s.qmu.Unlock()
			if stuck {
				// Try again by itself: space freed by a delete, or by
				// someone else, lets the files be written and the
				// journal checkpointed, without waiting for a commit.
				s.retryTimer.Reset(retryDelay)
			}
		}
		if err := s.checkpoint(false); err != nil {
			slog.Error("state checkpoint failed", "err", err)
		}
	}
}

// drainNow reports whether the applier, done with a run, takes what was
// queued meanwhile at once rather than when the timer fires: while a fork
// is linking (changes are then written strictly in order, see apply, and a run right
// after the last is what keeps a key saved without a pause from waiting
// for the pause to get its file), when someone waits for the queue to
// drain (Flush, Close), when it is as long as enqueue itself would kick
// the applier for, when no timer is armed for it, or when the journal is
// due for a checkpoint, which waits for an empty queue. s.qmu is held.
func (s *Store) drainNow() bool {
	return s.linking.Load() > 0 || s.flushers > 0 || s.closed || !s.timerArmed ||
		len(s.queue) >= applyBatch || s.pending >= s.opts.MaxPendingBytes/2 ||
		s.j.used.Load() >= s.opts.CheckpointBytes
}

// retryDelay is how long changes whose files could not be written wait
// before they are tried again.
const retryDelay = time.Second

// fileOverhead is what a file costs the file system beyond its bytes, at
// most: an inode and a block of its folder, counted when deciding whether
// a file still fits above the applier's floor.
const fileOverhead = 4096

// freeSpace is the free space of the data directory's file system, or -1
// when it cannot be read (then files are written without the floor's
// check and a full disk shows as a failed write).
func (s *Store) freeSpace() int64 {
	free, err := s.free()
	if err != nil {
		return -1
	}
	return free
}

// free is the free space of the journal's file system, for an
// unprivileged writer.
func (s *Store) free() (int64, error) {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(s.j.f.Fd()), &fs); err != nil {
		return 0, err
	}
	return int64(fs.Bavail) * fs.Bsize, nil
}

// floor is the free space the applier leaves alone: half of DiskReserve,
// which the journal's records of deletes, the audit log and a checkpoint
// draw on. A file that would go below it is not written (the change stays
// in the journal and the overlay, and is tried again), so a start on a
// nearly full disk, or a flood of saves, never takes the last bytes the
// daemon needs to run.
func (s *Store) floor() int64 { return s.opts.DiskReserve / 2 }

// apply materializes one queued change and returns the overlay bytes it
// released (see overlayCost). room is the free space left for files in
// this batch (see freeSpace), taken from as files are written.
func (s *Store) apply(r ref, room *int64, latest bool) int64 {
	a := r.a
	if r.key == "" {
		// The end of a fork's files. A fork published at run time has
		// its files queued here (see publishFork): its index is
		// installed first.
		var freed int64
		s.qmu.Lock()
		in := s.installs[r.ver]
		delete(s.installs, r.ver)
		s.qmu.Unlock()
		if in != nil {
			if in.ready != nil {
				<-in.ready
			}
			for _, fr := range in.refs {
				freed += s.apply(fr, room, false)
			}
		}
		// Its links are made durable before any later change of its
		// origin's files is (see fork.go).
		if s.linked > 0 {
			if err := s.syncfs(); err != nil {
				slog.Error("state: syncing a fork's links", "agent", a.name, "err", err)
			} else {
				s.linked = 0
			}
		}
		// Its links are made (or held, see hold): its origin's later
		// changes may be written ahead again.
		if in != nil && in.origin != nil {
			in.origin.linking.Add(-1)
			s.linking.Add(-1)
		}
		return freed + overlayPerChange
	}
	a.mu.RLock()
	e := a.keys[r.key]
	var value []byte
	current := e != nil && e.version() == r.ver
	// With latest (r is its key's last change in this run), a change the
	// key has had since r is written now, with r: its own ref, in the next
	// run, then finds nothing to write. A key saved more often than a run
	// of the applier reaches it would otherwise find each of its changes
	// outdated, and get no file until the saves stop.
	//
	// Not while a fork of a is linking (a.linking, read under a's lock,
	// after e): a fork links its keys to their origin's files when the
	// applier reaches its end, and those files must then be as they were
	// at the fork, which only changes written in their order ensure. A
	// fork begun after this read (it counts itself before it reads a)
	// finds the key either still pending (it copies the value) or
	// written with a value published before it.
	write := e != nil && e.pending() && (current || latest && !e.linked() && a.linking.Load() == 0)
	link := current && e.linked()
	var mod int64
	var origin *agent
	var replaces bool // the key may have a file this one replaces
	if write || link {
		value, mod, origin, replaces = e.val, e.mod, a.origin, e.ver&newBit == 0
	}
	tomb := !write && e == nil && a.tombs[r.key] == r.ver
	a.mu.RUnlock()

	fk := fileKey{a, r.key}
	if !link {
		// The key changed since its link failed: nothing needs the
		// origin's file any more.
		s.release(fk)
	}
	if (write || tomb) && s.held[fk] > 0 {
		// A fork's link to this file failed: the file stays as it is
		// until the link is made, tried again first.
		s.qmu.Lock()
		s.retry = append(s.retry, r)
		s.qmu.Unlock()
		return 0
	}

	switch {
	case link:
		err := s.takeRoom(room, fileOverhead, "a link")
		if err == nil {
			err = s.linkFile(origin.name, a.name, r.key, mod)
		}
		if err != nil {
			s.retryLater(r, "linking a fork's key to its origin's file", err)
			s.hold(fk, fileKey{origin, r.key})
			return 0
		}
		s.linked++
		s.release(fk)
		a.mu.Lock()
		if cur := a.keys[r.key]; cur == e && e.linked() {
			e.ver &^= linkBit
			a.unwritten -= e.size
			a.unlinked()
		}
		a.mu.Unlock()
		return overlayPerChange
	case write:
		err := s.takeRoom(room, int64(len(value))+fileOverhead, "the file")
		if err == nil {
			err = s.writeFile(a.name, r.key, value, mod, replaces)
		}
		if err != nil {
			// The value stays in the overlay (readers are right) and the
			// journal keeps it durable: no checkpoint recycles the journal
			// until the write is retried and succeeds (see checkpoint).
			// The change keeps its cost in pending until then.
			s.retryLater(r, "writing key to work tree", err)
			return 0
		}
		freed := int64(overlayPerChange)
		a.mu.Lock()
		if cur := a.keys[r.key]; cur == e {
			freed += int64(cap(value))
			e.ver &^= pendBit
			a.unwritten -= e.size
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
			// A folder in its place is the file of a later key under it
			// (key a deleted, a/b saved), written ahead with its latest
			// value: the key's file is gone already.
			a.mu.RLock()
			folder := a.dirs[r.key] > 0
			a.mu.RUnlock()
			if !folder || !errors.Is(err, syscall.EISDIR) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, fs.ErrExist) {
				slog.Error("state: removing key from work tree", "agent", a.name, "key", r.key, "err", err)
			}
		}
		a.mu.Lock()
		if a.tombs[r.key] == r.ver {
			delete(a.tombs, r.key)
		}
		a.mu.Unlock()
	}
	return overlayPerChange
}

// takeRoom takes need bytes of room (the free space at the start of the
// applier's round, -1 when unknown) for what, or says why not: it would go
// below the floor.
func (s *Store) takeRoom(room *int64, need int64, what string) error {
	if *room < 0 {
		return nil
	}
	if *room-need < s.floor() {
		return fmt.Errorf("%d bytes free, %s needs up to %d and %d are kept for the journal and the audit log: %w",
			*room, what, need, s.floor(), unix.ENOSPC)
	}
	*room -= need
	return nil
}

// retryLater queues r again for the next retry round after err (doing
// what failed); a streak of failures is logged once.
func (s *Store) retryLater(r ref, doing string, err error) {
	s.qmu.Lock()
	if !s.retryLogged {
		s.retryLogged = true
		slog.Error("state: "+doing+" (tried again every second; later failures are not logged until one succeeds)", "agent", r.a.name, "key", r.key, "err", err)
	}
	s.retry = append(s.retry, r)
	s.retryErr = err
	s.qmu.Unlock()
}

// writeFile puts value at the key's path: temp file, write, rename. It
// does not fsync: the journal holds the value until a checkpoint's syncfs.
// Anything in the way is stale (the index says which keys exist, and no
// key can be both a value and a folder): it is removed. replaces says the
// key may have a file already (see place).
func (s *Store) writeFile(agentName, key string, value []byte, mod int64, replaces bool) error {
	tmp, fd, size, err := s.spare()
	if err != nil {
		return err
	}
	fail := func(err error) error {
		unix.Close(fd)
		os.Remove(tmp)
		return err
	}
	for b := value; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			return fail(err)
		}
		b = b[n:]
	}
	if size > int64(len(value)) {
		if err := unix.Ftruncate(fd, int64(len(value))); err != nil {
			return fail(err)
		}
	}
	// The file's mtime is the save's, so a restart reports the same time.
	// Set through the descriptor (futimens): no second walk of the path.
	ts := [2]unix.Timespec{unix.NsecToTimespec(mod), unix.NsecToTimespec(mod)}
	_, _, _ = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if err := unix.Close(fd); err != nil {
		os.Remove(tmp)
		return err
	}
	return s.place(tmp, agentName, key, replaces)
}

// Spares. A key's file is replaced by a new one, never written over, so
// that whoever reads it (a load, the mount, a fork's link) sees one value
// or the other, whole. But allocating an inode for every rewrite and
// freeing one is much of what a rewrite costs, and on ext4 without a
// journal a new inode is searched for past every inode freed in the last
// minutes: 64 clients saving 1,024 keys had the applier spend 390 us a
// file, a sixth of the daemon's CPU. So the applier swaps the new file
// into place (RENAME_EXCHANGE), which leaves the replaced one under the
// temp name, and keeps it as a spare to write the next value into. A
// spare is written over only when no one can see it: it has no other
// name (a fork's link), and no one has it open. The second holds exactly
// when a write lease can be taken on it (F_SETLEASE, F_WRLCK): the kernel
// grants one only to the file's only opener, whether the others are this
// daemon (a load reading it, the mount serving it by passthrough) or
// another process. No one can open it after that: its one name is the
// applier's, in DATA/tmp.

// maxSpares bounds the spares kept; spareMax is the largest file kept as
// one (the space spares take is the tree's, replaced).
const (
	maxSpares = 64
	spareMax  = 64 << 10
)

// spare returns a temp file to write a value into, open for writing at
// its start, and its size: a spare that no one else can see (see above)
// when there is one, else a new file.
func (s *Store) spare() (string, int, int64, error) {
	for len(s.spares) > 0 {
		p := s.spares[len(s.spares)-1]
		s.spares = s.spares[:len(s.spares)-1]
		if fd, size, ok := openSpare(p); ok {
			return p, fd, size, nil
		}
		os.RemoveAll(p) // a folder swapped out of a key's place, too
	}
	tmp := filepath.Join(s.tmp, strconv.FormatUint(s.tmpN.Add(1), 36))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	return tmp, fd, 0, err
}

// openSpare opens the spare p for writing over, if no one else can see
// it.
func openSpare(p string) (fd int, size int64, ok bool) {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 || st.Size > spareMax {
		unix.Close(fd)
		return -1, 0, false
	}
	// A write lease is granted only to the file's only opener. Held for
	// no longer than the test: no one can open the file any more.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		unix.Close(fd)
		return -1, 0, false
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK); err != nil {
		unix.Close(fd)
		return -1, 0, false
	}
	return fd, st.Size, true
}

// retire keeps p, the temp name of a file swapped out of a key's place,
// as a spare.
func (s *Store) retire(p string) {
	if len(s.spares) >= maxSpares {
		os.RemoveAll(p)
		return
	}
	s.spares = append(s.spares, p)
}

// place renames the temp file tmp to the key's path, making its folders
// and removing what is in the way. With replaces (the key may have a
// file), it first tries to swap tmp with that file, which it keeps as a
// spare.
func (s *Store) place(tmp, agentName, key string, replaces bool) error {
	dst := s.path(agentName, key)
	if replaces && !s.noExchange {
		// Swapped with what is there: the replaced file becomes a spare.
		// Nothing there (a new key) is ENOENT: renamed below.
		err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
		if err == nil {
			s.retire(tmp)
			return nil
		}
		if err == unix.EINVAL || err == unix.ENOSYS {
			s.noExchange = true // the file system cannot
		}
	}
	var err error
	for try := 0; ; try++ {
		// rename(2) itself, not os.Rename, which looks the destination
		// up first (to refuse a folder in its place with EEXIST): one
		// failing stat a file, as a new key's file has nothing there.
		// A folder in its place is EISDIR here, handled below.
		err = nil
		if e := unix.Rename(tmp, dst); e != nil {
			err = &os.LinkError{Op: "rename", Old: tmp, New: dst, Err: e}
		}
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

// syncfs makes everything written to the data's file system durable.
func (s *Store) syncfs() error {
	fd, err := unix.Open(s.data, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}
