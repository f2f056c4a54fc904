package fs

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/writeback"
)

// Saving a file. A state value is whole, so writes cannot go to the store
// one by one. The handles open for writing on a file share one working
// copy (POSIX: a write is seen by every other descriptor at once), loaded
// on the first read or write (or empty after O_TRUNC). Closing a handle
// (FLUSH) queues a save of the working copy for the next group commit and
// returns: the content is visible through the mount at once, and to
// socket clients too, whose reads of the agent wait for the mount's queued
// saves (kernel flights); it becomes durable within a group commit (a
// fraction of a millisecond to a few). fsync queues it too and waits until it is
// durable, as POSIX promises. Large saves, and saves while many are queued,
// are waited for at close as well, so memory stays bounded.
//
// Readers never see a working copy: a read-only open takes a snapshot of
// the last closed content (in the store, or queued for it), so a file's new
// content appears to readers whole, at close. Writers use direct I/O so the
// kernel's page cache only ever holds committed versions; read-only opens
// use the page cache and keep it across opens (FOPEN_KEEP_CACHE) while the
// version they read is the one it holds.
const (
	// syncSaveAbove: a close whose save is larger waits until it is durable.
	syncSaveAbove = 4 << 20
	// maxQueuedSaves: past this many saves in flight, a close waits.
	maxQueuedSaves = 1024
	// passthroughAbove: read-only opens of larger files are served by the
	// kernel straight from the key's file (FUSE passthrough) when it can.
	passthroughAbove = 256 << 10
	// ptLinger is how long after its last handle closed a passthrough
	// registration may still be alive in go-fuse (it is dropped right
	// after our Release returns); a different version is not registered
	// in that window, since go-fuse would reuse the old backing file.
	ptLinger = time.Second
)

// version names one committed value of a key: what a read handle
// snapshots and what the kernel's page cache may hold.
type version struct {
	mod, size int64
}

// fileNode is a state key.
type fileNode struct {
	fusefs.Inode
	fs    *FS
	agent string
	root  *fusefs.Inode // the agent's state folder: the key is the path below it

	mu sync.Mutex
	// mode is the permission bits shown: the store's (0644 for a key
	// never given one), or one set here (create, chmod) that a save
	// carries to the store: modeSend until a save has taken it, modeHeld
	// until that save is durable (the store's is older till then).
	mode     uint32
	modeSend bool
	modeHeld bool
	// ctime is the time of the last change of the file (mtime is that of
	// its content, below); a save carries both, so the times the mount
	// shows while it is in flight are the ones the store keeps.
	ctime time.Time

	// The working copy shared by writers, and the saves of closed
	// contents not yet recorded (package writeback): what readers get
	// until the store has them.
	w       writeback.Buffer
	q       writeback.Queue
	loaded  bool // w is the content (the working copy exists)
	dirty   bool // w has changes no save has taken
	writers int
	mtime   time.Time // of the working copy
	cred    *kernel.Cred
	// moving is the content a rename of the node is committing under its
	// new key: until it is durable the store still shows the old target
	// there, and the mount shows this instead.
	moving    []byte
	hasMoving bool

	local    bool // made through the mount; no save has committed it
	gone     bool // unlinked through the mount: it has no key
	replaced bool // a rename through the mount put another file at its key
	// replacedKey is that key: an open that reaches the node once it is
	// out of the tree reads what is there now (see openRead).
	replacedKey string
	renamed     string // the key a rename gave it, until the tree shows it
	// unwritten: emptied by create or O_TRUNC and not written since.
	// deferred: closed so, with its save left to the release (see sync).
	unwritten bool
	deferred  bool

	// Which committed version the page cache holds, and how many open
	// handles read through the page cache, per version.
	pcVer   version
	readers map[version]int
	// Passthrough registrations (see ptHandle).
	ptVer   version
	ptOpen  int
	ptFreed time.Time

	attr fuse.Attr // the last attributes reported, for fstat after unlink
}

func (f *FS) newFile(agent string, root *fusefs.Inode) *fileNode {
	n := &fileNode{fs: f, agent: agent, root: root, mode: 0o644, readers: map[version]int{}}
	n.w.Max = f.maxValue
	n.q.Lock, n.q.InFlight, n.q.Recorded = &n.mu, &f.inflight, n.recordedLocked
	return n
}

// kpending is a kernel's queued change as package writeback sees it.
type kpending struct{ kernel.Pending }

func (p kpending) Wait() error {
	_, err := p.Pending.Wait()
	return err
}

// keyLocked is the node's key, or false once it is unlinked.
func (n *fileNode) keyLocked() (string, bool) {
	if n.gone {
		return "", false
	}
	k, ok := keyOf(&n.Inode, n.root)
	if n.renamed != "" {
		if ok && k == n.renamed {
			n.renamed = ""
		} else {
			return n.renamed, true
		}
	}
	return k, ok
}

// present reports whether the node has content the store does not show
// yet: made here and not committed, or a save in flight.
func (n *fileNode) present() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return !n.gone && (n.local || n.q.Busy() || n.deferred || n.hasMoving)
}

// overlayLocked returns the size and time the mount shows instead of the
// store's, if any.
func (n *fileNode) overlayLocked() (int64, time.Time, bool) {
	switch {
	case n.writers > 0 && n.loaded:
		return int64(n.w.Len()), n.mtime, true
	case n.deferred:
		return 0, n.mtime, true
	case n.hasMoving:
		return int64(len(n.moving)), n.mtime, true
	}
	if v, ok := n.q.Shown(); ok {
		return int64(len(v)), n.mtime, true
	}
	if n.unsavedLocked() {
		return int64(n.w.Len()), n.mtime, true
	}
	return 0, time.Time{}, false
}

// unsavedLocked reports whether the node was made here and no save of it
// was queued: the store has nothing of it.
func (n *fileNode) unsavedLocked() bool {
	return n.local && !n.q.Busy()
}

// unsaved is unsavedLocked for a caller without n.mu.
func (n *fileNode) unsaved() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unsavedLocked()
}

// fromRecLocked takes the mode and ctime of a record of the store unless
// the mount holds newer ones.
func (n *fileNode) fromRecLocked(rec *proto.StateRecord) {
	if n.modeHeld {
		return
	}
	n.mode = 0o644
	if rec.Mode&proto.ModeSet != 0 {
		n.mode = rec.Mode & 0o7777
	}
	n.ctime = rec.Changed
	if n.ctime.IsZero() {
		n.ctime = rec.Modified
	}
}

func (n *fileNode) fillLocked(a *fuse.Attr, size int64, mtime time.Time) {
	*a = fuse.Attr{Mode: syscall.S_IFREG | n.mode, Size: uint64(size), Nlink: 1}
	ctime := n.ctime
	if ctime.Before(mtime) {
		ctime = mtime
	}
	a.SetTimes(&mtime, &mtime, &ctime)
	a.Blocks = (uint64(size) + 511) / 512
	n.fs.setAttrOwner(a)
	n.attr = *a
}

func (n *fileNode) getattr(ctx context.Context, c *kernel.Cred, a *fuse.Attr) syscall.Errno {
	n.mu.Lock()
	key, ok := n.keyLocked()
	if !ok {
		// Unlinked but open: what it was, with no links.
		*a = n.attr
		a.Nlink = 0
		n.mu.Unlock()
		return 0
	}
	size, mtime, have := n.overlayLocked()
	n.mu.Unlock()
	var rec proto.StateRecord
	if !have {
		var err error
		rec, err = n.fs.k.StateStat(ctx, c, n.agent, key)
		if err != nil {
			return errno(err)
		}
		size, mtime = rec.Size, rec.Modified
	}
	n.mu.Lock()
	if !have {
		n.fromRecLocked(&rec)
	}
	n.fillLocked(a, size, mtime)
	n.mu.Unlock()
	return 0
}

// attrFromRec fills a from a listing's record unless the mount shows
// something newer.
func (n *fileNode) attrFromRec(rec *proto.StateRecord, a *fuse.Attr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	size, mtime, have := n.overlayLocked()
	if !have {
		size, mtime = rec.Size, rec.Modified
		n.fromRecLocked(rec)
	}
	n.fillLocked(a, size, mtime)
}

func (n *fileNode) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c, e := n.fs.may(ctx, n.agent)
	if e != 0 {
		return e
	}
	return n.getattr(ctx, c, &out.Attr)
}

func (n *fileNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := n.fs.may(ctx, n.agent); e != 0 {
		return e
	}
	if mask&1 != 0 { // X_OK: state files are not programs
		return syscall.EACCES
	}
	return 0
}

func (n *fileNode) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c, e := n.fs.may(ctx, n.agent)
	if e != 0 {
		return e
	}
	// Mode, size and mtime are kept with the key: a change of any is a
	// save of the value (the same one for chmod and touch) carrying them.
	// Owners are the daemon's and atime is not kept: accepted and ignored,
	// so that cp -p, tar and rsync work.
	mode, hasMode := in.GetMode()
	sz, hasSize := in.GetSize()
	mtime, hasMtime := in.GetMTime()
	if hasSize && int64(sz) > n.fs.maxValue {
		return syscall.EFBIG
	}
	if !hasMode && !hasSize && !hasMtime {
		return n.getattr(ctx, c, &out.Attr)
	}
	n.mu.Lock()
	if _, ok := n.keyLocked(); !ok {
		// Unlinked but open: nothing to keep it in.
		if hasMode {
			n.mode = mode & 0o7777
		}
		n.mu.Unlock()
		return n.getattr(ctx, c, &out.Attr)
	}
	if err := n.loadLocked(ctx, c); err != nil {
		n.mu.Unlock()
		return errno(err)
	}
	now := time.Now()
	if hasSize {
		n.w.Truncate(int64(sz))
		n.mtime, n.unwritten = now, false
	}
	if hasMode {
		n.mode, n.modeSend, n.modeHeld = mode&0o7777, true, true
	}
	if hasMtime {
		n.mtime = mtime
	}
	n.dirty, n.ctime = true, now
	// With writers open, their close saves it; a change of a file nobody
	// writes is saved now.
	alone := n.writers == 0
	n.mu.Unlock()
	n.fs.markBusy(n, true)
	if alone {
		if e := n.sync(c, false); e != 0 {
			return e
		}
	}
	return n.getattr(ctx, c, &out.Attr)
}

// Open opens the file. A node no longer in the tree (unlinked, or
// replaced by a rename, through the mount) answers ESTALE: the open raced
// with the change (its path was resolved before), and the kernel then
// resolves the path again and opens what is there now.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := n.fs.may(ctx, n.agent)
	if e != 0 {
		return nil, 0, e
	}
	h := &handle{n: n, cred: c}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		n.mu.Lock()
		key, ok := n.keyLocked()
		n.mu.Unlock()
		if ok {
			if e := n.fs.mayWrite(c, n.agent, key); e != 0 {
				return nil, 0, e
			}
		}
		return n.openWrite(h, flags)
	}
	return n.openRead(ctx, h)
}

func (n *fileNode) openWrite(h *handle, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	n.mu.Lock()
	if _, ok := n.keyLocked(); !ok {
		n.mu.Unlock()
		return nil, 0, syscall.ESTALE
	}
	n.writers++
	n.cred = h.cred
	if flags&syscall.O_TRUNC != 0 {
		n.w.Reset()
		n.loaded = true
		n.dirty, n.mtime, n.unwritten = true, time.Now(), true
	}
	n.mu.Unlock()
	n.fs.markBusy(n, true)
	h.write = true
	h.append = flags&syscall.O_APPEND != 0
	return h, fuse.FOPEN_DIRECT_IO, 0
}

func (n *fileNode) openRead(ctx context.Context, h *handle) (fusefs.FileHandle, uint32, syscall.Errno) {
	const ro = fuse.FOPEN_NOFLUSH // nothing to do at close: no FLUSH round trip
	n.mu.Lock()
	key, ok := n.keyLocked()
	replaced := n.replaced
	shown, hasShown := n.q.Shown()
	switch {
	case !ok && replaced && n.replacedKey != "":
		// Replaced by a rename and out of the tree already: the kernel
		// resolved the name before the rename and retries an ESTALE only
		// once, which a run of renames (an editor saving again and again)
		// can also lose. What is at the key now is the newer file: read
		// that, around the page cache.
		key = n.replacedKey
		n.mu.Unlock()
		if _, e := h.openStored(ctx, key); e != 0 {
			return nil, 0, e
		}
		return h, ro | fuse.FOPEN_DIRECT_IO, 0
	case !ok:
		n.mu.Unlock()
		return nil, 0, syscall.ESTALE
	case n.deferred || n.hasMoving || hasShown || n.unsavedLocked():
		// Closed (or made, or being renamed) here and not committed yet:
		// read that, around the page cache. (Made here and never
		// closed: empty.)
		switch {
		case n.deferred:
		case n.hasMoving:
			h.data = n.moving
		case hasShown:
			h.data = shown
		}
		n.mu.Unlock()
		return h, ro | fuse.FOPEN_DIRECT_IO, 0
	}
	n.mu.Unlock()

	rec, e := h.openStored(ctx, key)
	if e != 0 {
		return nil, 0, e
	}
	h.ver = version{rec.Modified.UnixNano(), rec.Size}

	// The kernel may still hold the attributes of an older version (the
	// invalidator runs right after a change commits, but a reader can be
	// quicker; and replies to concurrent getattrs can arrive in any
	// order): its read path would stop at the old size. Whenever the
	// version is not the one whose pages the kernel keeps, its attributes
	// are dropped too. Attribute-only invalidation takes no lock the open
	// holds.
	n.mu.Lock()
	stale := n.pcVer != h.ver || n.attr.Size != uint64(rec.Size) ||
		n.attr.Mtime != uint64(rec.Modified.Unix()) || n.attr.Mtimensec != uint32(rec.Modified.Nanosecond())
	n.mu.Unlock()
	if stale {
		n.NotifyContent(-1, 0)
	}

	flags := uint32(ro)
	n.mu.Lock()
	defer n.mu.Unlock()
	// A rename over this file is committing: what is at the key is the
	// old or the new content, whichever; around the page cache.
	_, hasShown = n.q.Shown()
	other := replaced || hasShown || n.local || n.deferred || n.hasMoving
	for v, cnt := range n.readers {
		if cnt > 0 && v != h.ver {
			other = true
		}
	}
	if other {
		// Another version is being read through the page cache (or a
		// newer one was just closed): keep out of it.
		return h, flags | fuse.FOPEN_DIRECT_IO, 0
	}
	if n.pcVer == h.ver {
		flags |= fuse.FOPEN_KEEP_CACHE
	} else {
		n.pcVer = h.ver
	}
	n.readers[h.ver]++
	h.cached = true
	if h.file == nil || !n.fs.passthrough || rec.Size < passthroughAbove {
		return h, flags, 0
	}
	switch {
	case n.ptOpen > 0 && n.ptVer != h.ver,
		n.ptOpen == 0 && n.ptVer != h.ver && time.Since(n.ptFreed) < ptLinger:
		return h, flags, 0
	}
	n.ptOpen++
	h.pt = true
	return &ptHandle{h}, flags, 0
}

// openStored opens what the store holds at key for the handle's reads.
func (h *handle) openStored(ctx context.Context, key string) (proto.StateRecord, syscall.Errno) {
	n := h.n
	file, data, rec, err := n.fs.k.StateOpen(ctx, h.cred, n.agent, key)
	if err != nil {
		return rec, errno(err)
	}
	h.file, h.data, h.size = file, data, rec.Size
	if file != nil {
		h.fd = int(file.Fd())
	}
	return rec, 0
}

// loadLocked makes the working copy exist.
func (n *fileNode) loadLocked(ctx context.Context, c *kernel.Cred) error {
	if n.loaded {
		return nil
	}
	shown, hasShown := n.q.Shown()
	switch {
	case hasShown:
		n.w.Share(shown)
	case n.unsavedLocked():
		n.w.Reset()
	default:
		key, ok := n.keyLocked()
		if !ok {
			n.w.Reset()
			break
		}
		file, data, rec, err := n.fs.k.StateOpen(ctx, c, n.agent, key)
		if err != nil {
			return err
		}
		if file != nil {
			data = make([]byte, rec.Size)
			_, err = io.ReadFull(file, data)
			file.Close()
			if err != nil {
				return proto.Errorf(proto.EIO, "reading %s:%s: %v", n.agent, key, err)
			}
			n.w.Reset()
			n.w.WriteAt(data, 0)
		} else {
			n.w.Share(data) // the store's: never written to
		}
		n.mtime = rec.Modified
		n.fromRecLocked(&rec)
	}
	n.loaded = true
	return nil
}

// sync hands the working copy, if changed, to the kernel; with wait, it
// then waits until every save queued for the node is durable. It reports
// the failure of an earlier queued save if there was one. c nil means the
// last writer's credentials (Close at shutdown).
func (n *fileNode) sync(c *kernel.Cred, wait bool) syscall.Errno {
	n.mu.Lock()
	if c == nil {
		c = n.cred
	}
	switch {
	case !n.dirty || c == nil:
	case !wait && n.unwritten && n.w.Len() == 0 && n.writers > 0:
		// Created or truncated, and closed before anything was written:
		// a shell's `> file` opens, dups the descriptor to stdout and
		// closes the original first. The save waits for the release (or
		// the next close), so `echo x > file` is one save of "x", not an
		// empty one first. Readers of the mount see it empty meanwhile.
		n.deferred = true
	default:
		if n.w.Len() > syncSaveAbove {
			wait = true
		}
		n.submitDirtyLocked(c)
	}
	if n.dirty && !wait && n.writers > 0 && n.fs.inflight.Load() >= maxQueuedSaves {
		wait = true
	}
	settled := n.q.Settled()
	n.mu.Unlock()
	if wait && settled != nil {
		<-settled
	}
	n.mu.Lock()
	err := n.q.TakeErr()
	n.idleLocked()
	n.mu.Unlock()
	return errno(err)
}

// submitDirtyLocked queues a save of the working copy, unless the node
// lost its key (unlinked, or replaced by a rename): then there is nothing
// to keep.
func (n *fileNode) submitDirtyLocked(c *kernel.Cred) {
	n.deferred = false
	key, ok := n.keyLocked()
	if !ok || n.replaced {
		n.dirty = false
		return
	}
	n.submitLocked(c, key, n.w.Take())
}

// submitMetaLocked queues a save of value carrying the node's times, and
// its mode if it was set here and not saved yet.
func (n *fileNode) submitMetaLocked(c *kernel.Cred, key string, value []byte) kernel.Pending {
	m := kernel.FileMeta{Mod: n.mtime, Changed: n.ctime}
	if m.Changed.Before(m.Mod) {
		m.Changed = m.Mod
	}
	if n.modeSend {
		m.Mode, n.modeSend = n.mode|proto.ModeSet, false
	}
	return n.fs.k.StateSubmitMeta(c, n.agent, key, value, m, n.fs.own)
}

// submitLocked queues a save of value (which from now on belongs to the
// save). Queued under n.mu, saves of one node commit in the order taken.
func (n *fileNode) submitLocked(c *kernel.Cred, key string, value []byte) {
	n.dirty, n.deferred = false, false
	n.q.Add(value, kpending{n.submitMetaLocked(c, key, value)})
}

// recordedLocked is told by the queue that a save's outcome is recorded.
func (n *fileNode) recordedLocked(last bool, err error) {
	if err != nil {
		n.fs.log.Warn("saving a file of the mount failed", "agent", n.agent, "err", err)
	}
	if last && err == nil {
		// The store has it now: readers go there.
		n.local = false
		if !n.modeSend {
			n.modeHeld = false
		}
	}
	n.idleLocked()
}

// idleLocked drops the working copy once nothing needs it.
func (n *fileNode) idleLocked() {
	if n.writers > 0 || n.dirty || n.q.Busy() {
		return
	}
	n.w.Reset()
	n.loaded = false
	if !n.local {
		n.fs.markBusy(n, false)
	}
}

// handle is an open file.
type handle struct {
	n      *fileNode
	cred   *kernel.Cred
	write  bool
	append bool

	// A read-only handle's snapshot: the value, or its file.
	data   []byte
	file   *os.File
	fd     int
	size   int64
	ver    version
	cached bool // counted in n.readers
	pt     bool // counted in n.ptOpen
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if h.write {
		return h.readWorking(ctx, dest, off)
	}
	if h.file != nil {
		if off >= h.size {
			return fuse.ReadResultData(nil), 0
		}
		return fuse.ReadResultFd(uintptr(h.fd), off, int(min(int64(len(dest)), h.size-off))), 0
	}
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return fuse.ReadResultData(h.data[off:end]), 0
}

// readWorking reads what the writers have written.
func (h *handle) readWorking(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.loadLocked(ctx, h.cred); err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(n.w.ReadAt(dest, off)), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if !h.write {
		return 0, syscall.EBADF
	}
	if h.n.fs.closed.Load() {
		return 0, syscall.ENOTCONN
	}
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.loadLocked(ctx, h.cred); err != nil {
		return 0, errno(err)
	}
	if h.append {
		off = int64(n.w.Len())
	}
	if err := n.w.WriteAt(data, off); err != nil {
		// Whole or nothing: the working copy that would pass
		// limits.max_value is dropped, the key keeps its value, and the
		// close says EFBIG too.
		n.w.Reset()
		n.loaded = false
		n.dirty, n.deferred, n.unwritten = false, false, false
		n.q.SetErr(proto.Errorf(proto.E2BIG, "%s: a value is at most limits.max_value, %d bytes", n.agent, n.fs.maxValue))
		return 0, errno(err)
	}
	n.dirty, n.mtime, n.unwritten = true, time.Now(), false
	n.ctime = n.mtime
	return uint32(len(data)), 0
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if !h.write {
		return syscall.EBADF
	}
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE
	switch mode {
	case keepSize:
		return 0 // nothing to reserve: values live in memory and the journal
	case 0:
	default:
		return syscall.EOPNOTSUPP
	}
	end := int64(off + size)
	if end > h.n.fs.maxValue {
		return syscall.EFBIG
	}
	n := h.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.loadLocked(ctx, h.cred); err != nil {
		return errno(err)
	}
	if end > int64(n.w.Len()) {
		n.w.Truncate(end)
		n.dirty, n.mtime, n.unwritten = true, time.Now(), false
	}
	return 0
}

func (h *handle) Flush(ctx context.Context) syscall.Errno {
	if !h.write {
		return 0
	}
	if h.n.fs.closed.Load() {
		return syscall.ENOTCONN // Close saves what is left
	}
	return h.n.sync(h.cred, false)
}

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if h.n.fs.closed.Load() {
		return syscall.ENOTCONN
	}
	c := h.cred
	if !h.write {
		c = nil // nothing of its own to save; wait for what others queued
	}
	return h.n.sync(c, true)
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	n := h.n
	if h.write {
		n.mu.Lock()
		n.writers--
		if n.writers == 0 && n.dirty && !n.fs.closed.Load() {
			// A save left to the release (see sync), or writes after the
			// last close's flush: save it now. (After Close began, Close
			// saves it.)
			n.submitDirtyLocked(h.cred)
		}
		n.idleLocked()
		n.mu.Unlock()
		return 0
	}
	if h.cached || h.pt {
		n.mu.Lock()
		if h.cached {
			if n.readers[h.ver]--; n.readers[h.ver] <= 0 {
				delete(n.readers, h.ver)
			}
		}
		if h.pt {
			if n.ptOpen--; n.ptOpen == 0 {
				n.ptFreed = time.Now()
			}
		}
		n.mu.Unlock()
	}
	if h.file != nil {
		h.file.Close()
	}
	return 0
}

// ptHandle is a read-only handle whose reads the kernel may serve from
// the key's file directly (FUSE passthrough). go-fuse registers one
// backing file per node and reuses it for every handle opened while it is
// registered; openRead only hands out a ptHandle when that registration
// is of the same version.
type ptHandle struct{ *handle }

// PassthroughFd is called by go-fuse when it registers a new backing file
// for the node.
func (h *ptHandle) PassthroughFd() (int, bool) {
	h.n.mu.Lock()
	h.n.ptVer = h.ver
	h.n.mu.Unlock()
	return h.fd, true
}

// invalidated forgets what the page cache held: the key changed.
func (n *fileNode) invalidated() {
	n.mu.Lock()
	n.pcVer = version{}
	n.mu.Unlock()
}

// markGone records that the node was unlinked through the mount: it has
// no key, and its writers' closes save nothing.
func (n *fileNode) markGone(gone bool) {
	n.mu.Lock()
	n.gone = gone
	if gone {
		n.dirty, n.deferred = false, false
	}
	n.mu.Unlock()
}

// markReplaced records that a rename through the mount put another file
// at the node's key: readers that had it open keep reading, its writers'
// closes save nothing.
func (n *fileNode) markReplaced(replaced bool, key string) {
	n.mu.Lock()
	n.replaced, n.replacedKey = replaced, key
	if replaced {
		n.dirty, n.deferred = false, false
	}
	n.mu.Unlock()
}
