package vfs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/writeback"
)

// State keys as files (/agent/NAME/state/...): a StateFile is one key,
// its StateHandles the open files, States the write-back of all of them.
//
// A state value is whole, so writes cannot go to the store one by one.
// The handles open for writing on a file share one working copy (POSIX:
// a write is seen by every other descriptor at once), loaded on the first
// read or write (or empty after O_TRUNC). Closing a handle (Flush) queues
// a save of the working copy for the next group commit and returns: the
// content is visible through the layer at once, and to socket clients
// too, whose reads of the agent wait for the queued saves (kernel
// flights); it becomes durable within a group commit (a fraction of a
// millisecond to a few). Fsync queues it too and waits until it is
// durable, as POSIX promises. Large saves, and saves while many are
// queued, are waited for at close as well, so memory stays bounded.
//
// Readers never see a working copy: a read-only open takes a snapshot of
// the last closed content (in the store, or queued for it), so a file's
// new content appears to readers whole, at close. The layer also decides
// what the OS's page cache may hold: a handle says whether its reads
// must go around the cache (Direct: writers, and contents not committed
// yet), may keep what the cache holds (KeepCache: the version it holds),
// or may be served from the key's file by the OS (Passthrough).
//
// Where a file is in the tree is the adapter's (its folders, renames,
// evictions): a StateFile asks it for its key. A value's content is
// opened with the kernel's StateOpen, and written with StateSubmitMeta
// and StateDeleteSubmit.
const (
	// syncSaveAbove: a close whose save is larger waits until it is durable.
	syncSaveAbove = 4 << 20
	// maxQueuedSaves: past this many saves in flight, a close waits.
	maxQueuedSaves = 1024
	// passthroughAbove: read-only opens of larger files are served by the
	// kernel straight from the key's file (FUSE passthrough) when it can.
	passthroughAbove = 256 << 10
	// ptLinger is how long after its last handle closed a passthrough
	// registration may still be alive in the adapter (go-fuse drops it
	// right after the Release returns); a different version is not
	// registered in that window, since go-fuse would reuse the old
	// backing file.
	ptLinger = time.Second
)

// States is the write-back of the state files of one mount: their saves
// in flight, and the files whose content the store does not have yet
// (busy), which Close finishes.
type States struct {
	k   Kernel
	log *slog.Logger
	// own tags the changes made through the layer: the kernel puts it
	// in their bus events, so the adapter can tell them from others.
	own      any
	maxValue int64
	// passthrough: the adapter can have the OS read large files straight
	// from their backing file.
	passthrough bool

	inflight atomic.Int64 // saves queued by close and not yet recorded
	closed   atomic.Bool  // Close has begun: writes fail with ENOTCONN

	mu   sync.Mutex
	busy map[*StateFile]struct{} // files with unsaved or unsynced content
	// dirs: agent -> folder made by mkdir, still empty in the store ->
	// its mode (statefolders.go).
	dirs map[string]map[string]uint32
}

// StateOptions configure States.
type StateOptions struct {
	Log         *slog.Logger
	Own         any   // the tag of the layer's changes
	MaxValue    int64 // limits.max_value (proto.DefaultMaxValue if 0)
	Passthrough bool
}

// NewStates returns the write-back of state files over k.
func NewStates(k Kernel, o StateOptions) *States {
	s := &States{k: k, log: o.Log, own: o.Own, maxValue: o.MaxValue, passthrough: o.Passthrough, busy: map[*StateFile]struct{}{}, dirs: map[string]map[string]uint32{}}
	if s.maxValue <= 0 {
		s.maxValue = proto.DefaultMaxValue
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// MaxValue is the largest value a file may hold.
func (s *States) MaxValue() int64 { return s.maxValue }

// Closed reports whether Close has begun.
func (s *States) Closed() bool { return s.closed.Load() }

// Shut makes writes, closes and fsyncs fail with ENOTCONN from now on
// (the mount is going away); Close saves what they left.
func (s *States) Shut() { s.closed.Store(true) }

// Close shuts the files and saves what closes left unsaved (the working
// copies still open, with their last writer's credentials), waiting
// until every save is durable.
func (s *States) Close() {
	s.Shut()
	for _, f := range s.busyFiles("") {
		f.sync(nil, true)
	}
}

// Settle waits until every save queued by closes of agent's files is
// durable (working copies still open are left alone).
func (s *States) Settle(agent string) {
	for _, f := range s.busyFiles(agent) {
		f.mu.Lock()
		ch := f.q.Settled()
		f.mu.Unlock()
		if ch != nil {
			<-ch
		}
	}
}

// Busy reports whether any file of agent has content the store does not.
func (s *States) Busy(agent string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.busy {
		if f.agent == agent {
			return true
		}
	}
	return false
}

// markBusy records that f has content the store does not have yet (or
// not durably), so that Close can finish it.
func (s *States) markBusy(f *StateFile, busy bool) {
	s.mu.Lock()
	if busy {
		s.busy[f] = struct{}{}
	} else {
		delete(s.busy, f)
	}
	s.mu.Unlock()
}

func (s *States) busyFiles(agent string) []*StateFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := make([]*StateFile, 0, len(s.busy))
	for f := range s.busy {
		if agent == "" || f.agent == agent {
			fs = append(fs, f)
		}
	}
	return fs
}

// version names one committed value of a key: what a read handle
// snapshots and what the page cache may hold.
type version struct {
	mod, size int64
}

// StateFile is a state key as a file.
type StateFile struct {
	s     *States
	agent string
	// where is the file's key, or false once it is out of the tree: the
	// adapter's, which keeps the tree.
	where func() (string, bool)

	mu sync.Mutex
	// mode is the permission bits shown: the store's (0644 for a key
	// never given one), or one set here (create, chmod) that a save
	// carries to the store: modeSend until a save has taken it, modeHeld
	// until that save is durable (the store's is older till then).
	mode     uint32
	modeSend bool
	modeHeld bool
	// ctime is the time of the last change of the file (mtime is that of
	// its content, below); a save carries both, so the times shown while
	// it is in flight are the ones the store keeps.
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
	// moving is the content a rename of the file is committing under its
	// new key: until it is durable the store still shows the old target
	// there, and the layer shows this instead.
	moving    []byte
	hasMoving bool

	local    bool // made through the layer; no save has committed it
	gone     bool // unlinked through the layer: it has no key
	replaced bool // a rename through the layer put another file at its key
	// replacedKey is that key: an open that reaches the file once it is
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
	// Passthrough registrations (see StateHandle.PassthroughFd).
	ptVer   version
	ptOpen  int
	ptFreed time.Time

	attr Attr // the last attributes reported, for fstat after unlink
}

// File returns the file of a key of agent whose place in the tree where
// tells (its key, or false once it is out of the tree).
func (s *States) File(agent string, where func() (string, bool)) *StateFile {
	f := &StateFile{s: s, agent: agent, where: where, mode: 0o644, readers: map[version]int{}}
	f.w.Max = s.maxValue
	f.q.Lock, f.q.InFlight, f.q.Recorded = &f.mu, &s.inflight, f.recordedLocked
	return f
}

// Agent is the agent whose key f is.
func (f *StateFile) Agent() string { return f.agent }

// kpending is a kernel's queued change as package writeback sees it.
type kpending struct{ kernel.Pending }

func (p kpending) Wait() error {
	_, err := p.Pending.Wait()
	return err
}

// keyLocked is the file's key, or false once it is unlinked.
func (f *StateFile) keyLocked() (string, bool) {
	if f.gone {
		return "", false
	}
	k, ok := f.where()
	if f.renamed != "" {
		if ok && k == f.renamed {
			f.renamed = ""
		} else {
			return f.renamed, true
		}
	}
	return k, ok
}

// Present reports whether f has content the store does not show yet:
// made here and not committed, or a save in flight.
func (f *StateFile) Present() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.gone && (f.local || f.q.Busy() || f.deferred || f.hasMoving)
}

// overlayLocked returns the size and time the layer shows instead of
// the store's, if any.
func (f *StateFile) overlayLocked() (int64, time.Time, bool) {
	switch {
	case f.writers > 0 && f.loaded:
		return int64(f.w.Len()), f.mtime, true
	case f.deferred:
		return 0, f.mtime, true
	case f.hasMoving:
		return int64(len(f.moving)), f.mtime, true
	}
	if v, ok := f.q.Shown(); ok {
		return int64(len(v)), f.mtime, true
	}
	if f.unsavedLocked() {
		return int64(f.w.Len()), f.mtime, true
	}
	return 0, time.Time{}, false
}

// unsavedLocked reports whether f was made here and no save of it was
// queued: the store has nothing of it.
func (f *StateFile) unsavedLocked() bool {
	return f.local && !f.q.Busy()
}

// Unsaved reports whether f was made here and no save of it was queued.
func (f *StateFile) Unsaved() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsavedLocked()
}

// fromRecLocked takes the mode and ctime of a record of the store unless
// the layer holds newer ones.
func (f *StateFile) fromRecLocked(rec *proto.StateRecord) {
	if f.modeHeld {
		return
	}
	f.mode = 0o644
	if rec.Mode&proto.ModeSet != 0 {
		f.mode = rec.Mode & 0o7777
	}
	f.ctime = rec.Changed
	if f.ctime.IsZero() {
		f.ctime = rec.Modified
	}
}

func (f *StateFile) attrLocked(size int64, mtime time.Time) Attr {
	ctime := f.ctime
	if ctime.Before(mtime) {
		ctime = mtime
	}
	f.attr = Attr{Mode: f.mode, Size: size, Mtime: mtime, Ctime: ctime}
	return f.attr
}

// Stat is what stat shows of f for c. An unlinked file still open shows
// what it was, with no links.
func (f *StateFile) Stat(ctx context.Context, c *kernel.Cred) (Attr, error) {
	f.mu.Lock()
	key, ok := f.keyLocked()
	if !ok {
		a := f.attr
		a.Unlinked = true
		f.mu.Unlock()
		return a, nil
	}
	size, mtime, have := f.overlayLocked()
	f.mu.Unlock()
	var rec proto.StateRecord
	if !have {
		var err error
		rec, err = f.s.k.StateStat(ctx, c, f.agent, key)
		if err != nil {
			return Attr{}, err
		}
		size, mtime = rec.Size, rec.Modified
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !have {
		f.fromRecLocked(&rec)
	}
	return f.attrLocked(size, mtime), nil
}

// StatFrom is Stat from a listing's record, unless the layer shows
// something newer.
func (f *StateFile) StatFrom(rec *proto.StateRecord) Attr {
	f.mu.Lock()
	defer f.mu.Unlock()
	size, mtime, have := f.overlayLocked()
	if !have {
		size, mtime = rec.Size, rec.Modified
		f.fromRecLocked(rec)
	}
	return f.attrLocked(size, mtime)
}

// SetAttr is a change of attributes (chmod, truncate, utimes): nil is
// unchanged.
type SetAttr struct {
	Mode  *uint32
	Size  *int64
	Mtime *time.Time
}

// Setattr changes f's mode, size or mtime. They are kept with the key:
// a change of any is a save of the value (the same one for chmod and
// touch) carrying them; with writers open, their close saves it.
func (f *StateFile) Setattr(ctx context.Context, c *kernel.Cred, in SetAttr) (Attr, error) {
	if in.Size != nil && *in.Size > f.s.maxValue {
		return Attr{}, syscall.EFBIG
	}
	if in.Mode == nil && in.Size == nil && in.Mtime == nil {
		return f.Stat(ctx, c)
	}
	f.mu.Lock()
	if _, ok := f.keyLocked(); !ok {
		// Unlinked but open: nothing to keep it in.
		if in.Mode != nil {
			f.mode = *in.Mode & 0o7777
		}
		f.mu.Unlock()
		return f.Stat(ctx, c)
	}
	if err := f.loadLocked(ctx, c); err != nil {
		f.mu.Unlock()
		return Attr{}, err
	}
	now := time.Now()
	if in.Size != nil {
		f.w.Truncate(*in.Size)
		f.mtime, f.unwritten = now, false
	}
	if in.Mode != nil {
		f.mode, f.modeSend, f.modeHeld = *in.Mode&0o7777, true, true
	}
	if in.Mtime != nil {
		f.mtime = *in.Mtime
	}
	f.dirty, f.ctime = true, now
	alone := f.writers == 0
	f.mu.Unlock()
	f.s.markBusy(f, true)
	if alone {
		if err := f.sync(c, false); err != nil {
			return Attr{}, err
		}
	}
	return f.Stat(ctx, c)
}

// Open opens f for c with the flags of open(2); a write needs the
// policy's leave (MayWrite). A file no longer in the tree (unlinked, or
// replaced by a rename, through the layer) answers ESTALE: the open
// raced with the change (its path was resolved before), and the OS then
// resolves the path again and opens what is there now.
func (f *StateFile) Open(ctx context.Context, c *kernel.Cred, flags int) (*StateHandle, error) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		f.mu.Lock()
		key, ok := f.keyLocked()
		f.mu.Unlock()
		if ok {
			if err := f.s.k.MayWrite(c, f.agent, key); err != nil {
				return nil, err
			}
		}
		return f.OpenWrite(c, flags)
	}
	return f.openRead(ctx, c)
}

// OpenWrite opens f for writing, its leave checked already.
func (f *StateFile) OpenWrite(c *kernel.Cred, flags int) (*StateHandle, error) {
	f.mu.Lock()
	if _, ok := f.keyLocked(); !ok {
		f.mu.Unlock()
		return nil, syscall.ESTALE
	}
	f.writers++
	f.cred = c
	if flags&syscall.O_TRUNC != 0 {
		f.w.Reset()
		f.loaded = true
		f.dirty, f.mtime, f.unwritten = true, time.Now(), true
	}
	f.mu.Unlock()
	f.s.markBusy(f, true)
	return &StateHandle{f: f, c: c, write: true, append: flags&syscall.O_APPEND != 0, Direct: true}, nil
}

func (f *StateFile) openRead(ctx context.Context, c *kernel.Cred) (*StateHandle, error) {
	h := &StateHandle{f: f, c: c}
	f.mu.Lock()
	key, ok := f.keyLocked()
	replaced := f.replaced
	shown, hasShown := f.q.Shown()
	switch {
	case !ok && replaced && f.replacedKey != "":
		// Replaced by a rename and out of the tree already: the OS
		// resolved the name before the rename and retries an ESTALE only
		// once, which a run of renames (an editor saving again and again)
		// can also lose. What is at the key now is the newer file: read
		// that, around the page cache.
		key = f.replacedKey
		f.mu.Unlock()
		if _, err := h.openStored(ctx, key); err != nil {
			return nil, err
		}
		h.Direct = true
		return h, nil
	case !ok:
		f.mu.Unlock()
		return nil, syscall.ESTALE
	case f.deferred || f.hasMoving || hasShown || f.unsavedLocked():
		// Closed (or made, or being renamed) here and not committed yet:
		// read that, around the page cache. (Made here and never
		// closed: empty.)
		switch {
		case f.deferred:
		case f.hasMoving:
			h.data = f.moving
		case hasShown:
			h.data = shown
		}
		f.mu.Unlock()
		h.Direct = true
		return h, nil
	}
	f.mu.Unlock()

	rec, err := h.openStored(ctx, key)
	if err != nil {
		return nil, err
	}
	h.ver = version{rec.Modified.UnixNano(), rec.Size}

	f.mu.Lock()
	defer f.mu.Unlock()
	// The OS may still hold the attributes of an older version (the
	// adapter's invalidation runs right after a change commits, but a
	// reader can be quicker; and replies to concurrent stats can arrive
	// in any order): its read path would stop at the old size. Whenever
	// the version is not the one whose pages the OS keeps, the adapter
	// drops its attributes too.
	h.DropAttr = f.pcVer != h.ver || f.attr.Size != rec.Size || !f.attr.Mtime.Equal(rec.Modified)
	// A rename over this file is committing: what is at the key is the
	// old or the new content, whichever; around the page cache.
	_, hasShown = f.q.Shown()
	other := replaced || hasShown || f.local || f.deferred || f.hasMoving
	for v, cnt := range f.readers {
		if cnt > 0 && v != h.ver {
			other = true
		}
	}
	if other {
		// Another version is being read through the page cache (or a
		// newer one was just closed): keep out of it.
		h.Direct = true
		return h, nil
	}
	if f.pcVer == h.ver {
		h.KeepCache = true
	} else {
		f.pcVer = h.ver
	}
	f.readers[h.ver]++
	h.cached = true
	if h.file == nil || !f.s.passthrough || rec.Size < passthroughAbove {
		return h, nil
	}
	switch {
	case f.ptOpen > 0 && f.ptVer != h.ver,
		f.ptOpen == 0 && f.ptVer != h.ver && time.Since(f.ptFreed) < ptLinger:
		return h, nil
	}
	f.ptOpen++
	h.Passthrough = true
	return h, nil
}

// openStored opens what the store holds at key for the handle's reads.
func (h *StateHandle) openStored(ctx context.Context, key string) (proto.StateRecord, error) {
	file, data, rec, err := h.f.s.k.StateOpen(ctx, h.c, h.f.agent, key)
	if err != nil {
		return rec, err
	}
	h.file, h.data, h.size = file, data, rec.Size
	if file != nil {
		h.fd = int(file.Fd())
	}
	return rec, nil
}

// Load reads the committed value of agent's key.
func (s *States) Load(ctx context.Context, c *kernel.Cred, agent, key string) ([]byte, proto.StateRecord, error) {
	file, v, rec, err := s.k.StateOpen(ctx, c, agent, key)
	if err != nil || file == nil {
		return v, rec, err
	}
	defer file.Close()
	v = make([]byte, rec.Size)
	if _, err := io.ReadFull(file, v); err != nil {
		return nil, rec, proto.Errorf(proto.EIO, "reading %s:%s: %v", agent, key, err)
	}
	return v, rec, nil
}

// loadLocked makes the working copy exist.
func (f *StateFile) loadLocked(ctx context.Context, c *kernel.Cred) error {
	if f.loaded {
		return nil
	}
	shown, hasShown := f.q.Shown()
	switch {
	case hasShown:
		f.w.Share(shown)
	case f.unsavedLocked():
		f.w.Reset()
	default:
		key, ok := f.keyLocked()
		if !ok {
			f.w.Reset()
			break
		}
		file, data, rec, err := f.s.k.StateOpen(ctx, c, f.agent, key)
		if err != nil {
			return err
		}
		if file != nil {
			data = make([]byte, rec.Size)
			_, err = io.ReadFull(file, data)
			file.Close()
			if err != nil {
				return proto.Errorf(proto.EIO, "reading %s:%s: %v", f.agent, key, err)
			}
			f.w.Reset()
			f.w.WriteAt(data, 0)
		} else {
			f.w.Share(data) // the store's: never written to
		}
		f.mtime = rec.Modified
		f.fromRecLocked(&rec)
	}
	f.loaded = true
	return nil
}

// sync hands the working copy, if changed, to the kernel; with wait, it
// then waits until every save queued for the file is durable. It reports
// the failure of an earlier queued save if there was one. c nil means
// the last writer's credentials (Close).
func (f *StateFile) sync(c *kernel.Cred, wait bool) error {
	f.mu.Lock()
	if c == nil {
		c = f.cred
	}
	switch {
	case !f.dirty || c == nil:
	case !wait && f.unwritten && f.w.Len() == 0 && f.writers > 0:
		// Created or truncated, and closed before anything was written:
		// a shell's `> file` opens, dups the descriptor to stdout and
		// closes the original first. The save waits for the release (or
		// the next close), so `echo x > file` is one save of "x", not an
		// empty one first. Readers see it empty meanwhile.
		f.deferred = true
	default:
		if f.w.Len() > syncSaveAbove {
			wait = true
		}
		f.submitDirtyLocked(c)
	}
	if f.dirty && !wait && f.writers > 0 && f.s.inflight.Load() >= maxQueuedSaves {
		wait = true
	}
	settled := f.q.Settled()
	f.mu.Unlock()
	if wait && settled != nil {
		<-settled
	}
	f.mu.Lock()
	err := f.q.TakeErr()
	f.idleLocked()
	f.mu.Unlock()
	return err
}

// submitDirtyLocked queues a save of the working copy, unless the file
// lost its key (unlinked, or replaced by a rename): then there is
// nothing to keep.
func (f *StateFile) submitDirtyLocked(c *kernel.Cred) {
	f.deferred = false
	key, ok := f.keyLocked()
	if !ok || f.replaced {
		f.dirty = false
		return
	}
	f.submitLocked(c, key, f.w.Take())
}

// submitMetaLocked queues a save of value carrying the file's times,
// and its mode if it was set here and not saved yet.
func (f *StateFile) submitMetaLocked(c *kernel.Cred, key string, value []byte) kernel.Pending {
	m := kernel.FileMeta{Mod: f.mtime, Changed: f.ctime}
	if m.Changed.Before(m.Mod) {
		m.Changed = m.Mod
	}
	if f.modeSend {
		m.Mode, f.modeSend = f.mode|proto.ModeSet, false
	}
	return f.s.k.StateSubmitMeta(c, f.agent, key, value, m, f.s.own)
}

// submitLocked queues a save of value (which from now on belongs to the
// save). Queued under f.mu, saves of one file commit in the order taken.
func (f *StateFile) submitLocked(c *kernel.Cred, key string, value []byte) {
	f.dirty, f.deferred = false, false
	f.q.Add(value, kpending{f.submitMetaLocked(c, key, value)})
}

// recordedLocked is told by the queue that a save's outcome is recorded.
func (f *StateFile) recordedLocked(last bool, err error) {
	if err != nil {
		f.s.log.Warn("saving a file of the mount failed", "agent", f.agent, "err", err)
	}
	if last && err == nil {
		// The store has it now: readers go there.
		f.local = false
		if !f.modeSend {
			f.modeHeld = false
		}
	}
	f.idleLocked()
}

// idleLocked drops the working copy once nothing needs it.
func (f *StateFile) idleLocked() {
	if f.writers > 0 || f.dirty || f.q.Busy() {
		return
	}
	f.w.Reset()
	f.loaded = false
	if !f.local {
		f.s.markBusy(f, false)
	}
}

// Invalidated forgets what the page cache held: the key changed.
func (f *StateFile) Invalidated() {
	f.mu.Lock()
	f.pcVer = version{}
	f.mu.Unlock()
}

// markGone records that f was unlinked through the layer: it has no
// key, and its writers' closes save nothing.
func (f *StateFile) markGone(gone bool) {
	f.mu.Lock()
	f.gone = gone
	if gone {
		f.dirty, f.deferred = false, false
	}
	f.mu.Unlock()
}

// markReplaced records that a rename through the layer put another file
// at f's key: readers that had it open keep reading, its writers' closes
// save nothing.
func (f *StateFile) markReplaced(replaced bool, key string) {
	f.mu.Lock()
	f.replaced, f.replacedKey = replaced, key
	if replaced {
		f.dirty, f.deferred = false, false
	}
	f.mu.Unlock()
}

// StateHandle is an open StateFile. What the adapter tells the OS of it
// at open is in its exported fields.
type StateHandle struct {
	f      *StateFile
	c      *kernel.Cred
	write  bool
	append bool

	// A read-only handle's snapshot: the value, or its file.
	data   []byte
	file   *os.File
	fd     int
	size   int64
	ver    version
	cached bool // counted in f.readers

	// Direct: reads and writes go around the page cache (a working copy,
	// or a content not committed yet).
	Direct bool
	// KeepCache: the page cache holds this version; keep it.
	KeepCache bool
	// Passthrough: the OS may read the key's file itself (Fd); counted
	// in f.ptOpen.
	Passthrough bool
	// DropAttr: the attributes the OS holds may be of another version;
	// drop them before answering the open.
	DropAttr bool
}

// Writes reports whether h was opened for writing.
func (h *StateHandle) Writes() bool { return h.write }

// Fd is the key's file a read-only handle reads, and its size, if it
// reads one (the adapter can have the OS splice from it).
func (h *StateHandle) Fd() (fd int, size int64, ok bool) {
	if h.write || h.file == nil {
		return 0, 0, false
	}
	return h.fd, h.size, true
}

// PassthroughFd is the file a Passthrough handle registers with the OS:
// from now on the OS's registration for f is of h's version.
func (h *StateHandle) PassthroughFd() (int, bool) {
	h.f.mu.Lock()
	h.f.ptVer = h.ver
	h.f.mu.Unlock()
	return h.fd, true
}

// Read gives what h reads at off, at most len(dest) bytes (in dest, or a
// slice of h's own snapshot): a writer reads the working copy, a reader
// its snapshot.
func (h *StateHandle) Read(ctx context.Context, dest []byte, off int64) ([]byte, error) {
	if h.write {
		f := h.f
		f.mu.Lock()
		defer f.mu.Unlock()
		if err := f.loadLocked(ctx, h.c); err != nil {
			return nil, err
		}
		return f.w.ReadAt(dest, off), nil
	}
	if h.file != nil {
		if off >= h.size {
			return nil, nil
		}
		n, err := h.file.ReadAt(dest[:min(int64(len(dest)), h.size-off)], off)
		if err == io.EOF {
			err = nil
		}
		return dest[:n], err
	}
	if off >= int64(len(h.data)) {
		return nil, nil
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return h.data[off:end], nil
}

// Write writes data at off (at the end, for O_APPEND) into the working
// copy. A write that would take it past limits.max_value drops it whole
// (the key keeps its value) and fails with EFBIG, as its close does.
func (h *StateHandle) Write(ctx context.Context, data []byte, off int64) (int, error) {
	if !h.write {
		return 0, syscall.EBADF
	}
	f := h.f
	if f.s.closed.Load() {
		return 0, syscall.ENOTCONN
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.loadLocked(ctx, h.c); err != nil {
		return 0, err
	}
	if h.append {
		off = int64(f.w.Len())
	}
	if err := f.w.WriteAt(data, off); err != nil {
		// Whole or nothing: the working copy that would pass
		// limits.max_value is dropped, the key keeps its value, and the
		// close says EFBIG too.
		f.w.Reset()
		f.loaded = false
		f.dirty, f.deferred, f.unwritten = false, false, false
		f.q.SetErr(proto.Errorf(proto.E2BIG, "%s: a value is at most limits.max_value, %d bytes", f.agent, f.s.maxValue))
		if errors.Is(err, writeback.ErrTooLarge) {
			err = syscall.EFBIG
		}
		return 0, err
	}
	f.dirty, f.mtime, f.unwritten = true, time.Now(), false
	f.ctime = f.mtime
	return len(data), nil
}

// Allocate is fallocate(2): FALLOC_FL_KEEP_SIZE has nothing to reserve
// (values live in memory and the journal); mode 0 extends the file.
func (h *StateHandle) Allocate(ctx context.Context, off, size uint64, mode uint32) error {
	if !h.write {
		return syscall.EBADF
	}
	const keepSize = 1 // FALLOC_FL_KEEP_SIZE
	switch mode {
	case keepSize:
		return nil
	case 0:
	default:
		return syscall.EOPNOTSUPP
	}
	end := int64(off + size)
	f := h.f
	if end > f.s.maxValue {
		return syscall.EFBIG
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.loadLocked(ctx, h.c); err != nil {
		return err
	}
	if end > int64(f.w.Len()) {
		f.w.Truncate(end)
		f.dirty, f.mtime, f.unwritten = true, time.Now(), false
	}
	return nil
}

// Flush is close(2): a writer's queues a save of the working copy.
func (h *StateHandle) Flush() error {
	if !h.write {
		return nil
	}
	if h.f.s.closed.Load() {
		return syscall.ENOTCONN // Close saves what is left
	}
	return h.f.sync(h.c, false)
}

// Fsync queues a save of the working copy (a writer's) and waits until
// every save of the file is durable.
func (h *StateHandle) Fsync() error {
	if h.f.s.closed.Load() {
		return syscall.ENOTCONN
	}
	c := h.c
	if !h.write {
		c = nil // nothing of its own to save; wait for what others queued
	}
	return h.f.sync(c, true)
}

// Release is the last close of h. The last writer's saves what was left
// to it (see sync), or written after the last close's flush.
func (h *StateHandle) Release() {
	f := h.f
	if h.write {
		f.mu.Lock()
		f.writers--
		if f.writers == 0 && f.dirty && !f.s.closed.Load() {
			// After Close began, Close saves it.
			f.submitDirtyLocked(h.c)
		}
		f.idleLocked()
		f.mu.Unlock()
		return
	}
	if h.cached || h.Passthrough {
		f.mu.Lock()
		if h.cached {
			if f.readers[h.ver]--; f.readers[h.ver] <= 0 {
				delete(f.readers, h.ver)
			}
		}
		if h.Passthrough {
			if f.ptOpen--; f.ptOpen == 0 {
				f.ptFreed = time.Now()
			}
		}
		f.mu.Unlock()
	}
	if h.file != nil {
		h.file.Close()
	}
}
