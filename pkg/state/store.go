// Package state stores the agents' state: per agent, a tree of keys
// (relative paths) holding byte values, laid out as files in the git work
// tree DATA/repo/agents/<agent>/state/<key> so that versioning can commit it.
// The same store, journal and group commit keep the agents' memories: a
// change names a space ("state", the default, or "mem") and lands in
// DATA/repo/agents/<agent>/<space>/<key>. Inside the store an agent's
// space is one tree named by Ref(space, agent).
//
// Durability comes from a write-ahead journal with group commit (see
// journal.go): the kernel's committer stages a batch of changes, writes them
// to the journal, syncs once, and then publishes them. Published changes are
// visible at once through an in-memory index (and an overlay of values not
// yet written to their files), and a single applier goroutine materializes
// them in the work tree with temp file + rename, so a file is always either
// its old or its new value. A checkpoint (syncfs, then an empty journal)
// runs when the journal grows large, at shutdown, and after replay at start.
//
// At start the index comes from the work tree: from the key snapshot a
// clean Close leaves in DATA/index/state.keys when it can be trusted (see
// snapshot.go), else from a walk of every folder and file, which at a
// million memories takes seconds. The journal lives in DATA/journal/wal,
// temp files of the applier in DATA/tmp.
//
// File creation is the slow part on most file systems (0.1 to 1 ms here,
// against 170 us for one fdatasync that covers a whole batch), which is why
// the work tree is written behind the journal rather than before the reply.
package state

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
)

// Spaces are the trees an agent has in the store.
var Spaces = []string{SpaceState, SpaceMem, SpaceSys}

// The spaces.
const (
	SpaceState = "state"
	SpaceMem   = "mem"
	// SpaceSys holds what the kernel keeps of an agent: its policy and
	// its budget (policy.toml, budget.json).
	SpaceSys = "sys"
)

// Ref names the tree of agent's space inside the store: the agent's name
// for its state (so existing journals read as before), "mem:<agent>" for
// its memories (':' cannot occur in an agent name).
func Ref(space, agent string) string {
	if space == "" || space == SpaceState {
		return agent
	}
	return space + ":" + agent
}

// SplitRef is Ref's inverse.
func SplitRef(ref string) (space, agent string) {
	if sp, a, ok := strings.Cut(ref, ":"); ok {
		return sp, a
	}
	return SpaceState, ref
}

func checkSpace(space string) *proto.Error {
	switch space {
	case "", SpaceState, SpaceMem, SpaceSys:
		return nil
	}
	return proto.Errorf(proto.EINVAL, "unknown space %q", space)
}

// Options tune a Store.
type Options struct {
	// MaxValue bounds a value in bytes.
	MaxValue int
	// CheckpointBytes is the journal size past which a checkpoint runs once
	// the applier is idle. Default 64 MiB.
	CheckpointBytes int64
	// MaxPendingBytes bounds the overlay: values accepted but not yet in
	// their files, each counted with its queue slot (see overlayCost);
	// beyond it new batches wait for the applier. Default 64 MiB: about
	// 150,000 memories of 300 bytes, more than a bulk load of 100,000
	// needs to run at the journal's rate, while at 256 MiB (counting the
	// values alone) a load of a million memories held most of them in
	// memory at once.
	MaxPendingBytes int64
	// CacheBytes bounds the cache of small values. Default 64 MiB.
	CacheBytes int64
	// ReplayAux receives, in order, each aux record (see Batch.AddAux)
	// found in the journal at start: the kernel's records of changes that
	// were durable but may not have reached their own files.
	ReplayAux func(payload []byte) error
	// DiskReserve is the free space on the data's file system below which
	// batches are refused with ENOSPC (see Batch.Write). Default 64 MiB,
	// or a sixteenth of a smaller file system.
	DiskReserve int64
	// Recover salvages a journal damaged in the middle (see
	// DamageError): every intact record is replayed, and Lost names the
	// damaged spans. Without it such a journal stops Open.
	Recover bool
	// AfterReplay runs once the journal is replayed into the index,
	// before the checkpoint that empties it: an error stops Open and
	// leaves the journal as it was (the kernel checks what was replayed
	// against the audit log).
	AfterReplay func(*Store) error
	// BeforeCheckpoint runs inside a checkpoint, before the journal is
	// recycled: whatever the kernel wrote behind the journal (the audit
	// segments) must be made durable here.
	BeforeCheckpoint func() error
}

const (
	cacheMaxValue = 4 << 10
	// The applier runs once no change has come for applyDelay, at the
	// latest applyMaxDelay after the first change it has not seen, and at
	// once when applyBatch changes (or half of MaxPendingBytes) wait.
	applyDelay    = 200 * time.Millisecond
	applyMaxDelay = 2 * time.Second
	applyBatch    = 65536
)

// Store is the state of all agents. Its methods are safe for concurrent
// use, except that batches (Begin, Write, Sync, Publish) come from one
// committer at a time.
type Store struct {
	// applierTID is the applier's thread (a test checks its priority).
	applierTID atomic.Int32
	data       string // DATA
	repo       string // DATA/repo/agents
	tmp        string // DATA/tmp
	opts       Options
	j          *journal
	jmu        sync.Mutex // held by the committer from Write to Publish, and by checkpoints
	seq        atomic.Uint64
	tmpN       atomic.Uint64
	cache      atomic.Int64

	// spares are temp files the applier may write over (see spare);
	// noExchange: the file system has no RENAME_EXCHANGE. The applier's.
	spares     []string
	noExchange bool

	mu     sync.RWMutex
	agents map[string]*agent

	closeOnce sync.Once // Close: a second call returns the first's error
	closeErr  error

	qmu      sync.Mutex
	qcond    *sync.Cond // signalled when the queue drains or pending shrinks
	queue    []ref
	retry    []ref // changes whose file writes failed: queued again at checkpoints
	retryErr error // why the last of them failed
	// retryLogged: the failure of a retried write was logged; cleared
	// when none is left, so a full disk logs once, not every second.
	retryLogged bool
	retryTimer  *time.Timer // queues the retry list again (see applier)
	// holds: a fork's key whose link failed -> the origin's key it
	// links to; held: how many holds each such origin key has. linked:
	// links made since the applier last synced. Applier only (fork.go).
	holds  map[fileKey]fileKey
	held   map[fileKey]int
	linked int
	// installs: a fork's version -> its index being installed, whose
	// files the applier links when it reaches the fork's end (fork.go).
	// Under qmu.
	installs map[uint64]*forkInstall
	pending  int64 // overlay bytes (see overlayCost)
	busy     bool  // applier is working on a taken slice
	flushers int   // callers of Flush waiting for the queue to drain
	closed   bool
	// linking counts the forks begun whose links the applier has not
	// made yet (agent.linking, summed): while there are any, it writes
	// changes strictly in their order (see apply, drainNow).
	linking atomic.Int64
	kick    chan struct{}
	done    chan struct{}
	failed  error    // sticky journal failure
	lost    []Damage // the journal's damage that Open salvaged around
	opened  bool     // Open succeeded: Close may save the key snapshot

	indexFrom string // how Open loaded the index: "snapshot" or "walk"
	// The key snapshots (snapshot.go): snapMu orders their writes,
	// snapGen is the generation of the last one written or loaded,
	// snapWG counts those being written behind checkpoints, closing
	// stops more from starting.
	snapMu  sync.Mutex
	snapGen uint64
	snapWG  sync.WaitGroup
	closing atomic.Bool
	// snapQ guards snapNext, the generation of the next snapshot to
	// write behind a checkpoint (0: none), and snapBusy, a writer runs.
	snapQ     sync.Mutex
	snapNext  uint64
	snapBusy  bool
	metaDirty atomic.Bool // the keys' metadata changed since DATA/index/meta was written

	timer        *time.Timer // fires once changes have settled; idle otherwise
	timerArmed   bool
	firstPending time.Time // when the timer was armed
}

type agent struct {
	name  string
	mu    sync.RWMutex
	keys  map[string]*entry
	dirs  map[string]int    // folder prefix -> number of keys below it
	tombs map[string]uint64 // deleted keys whose files are not yet removed -> version
	bytes int64             // sum of the keys' sizes
	// meta and folders: see meta.go.
	meta    map[string]keyMeta
	folders map[string]int64
	// origin is the agent whose files hold the values of this one's
	// linked entries (a fork's, until the applier has linked them into
	// its own tree; see fork.go); links counts those entries.
	origin *agent
	links  int
	// unwritten is the sum of the sizes of the entries not in a file of
	// this agent's own (pending or linked): what a fork of it must have
	// the applier write as copies.
	unwritten int64
	// linking counts the forks of this agent begun whose links to its
	// files the applier has not made yet: until then its files must stay
	// as they were at each fork (see apply).
	linking atomic.Int32
	// order is the keys in sorted order, for listings (see sorted.go).
	order keyOrder
}

// entry is one key of the index. There is one per key (a million for an
// agent with a million memories), so it is kept small: 48 bytes.
type entry struct {
	size int64
	mod  int64 // modification time, unix nanoseconds (as the journal keeps it)
	// ver is the change that set the value (0 for a key read from the
	// tree), with pendBit set while val is not yet in the key's file.
	ver uint64
	// val is the value not yet in its file (pending) or, once it is, a
	// copy of a small value kept as a cache (nil if none). Immutable.
	val []byte
}

// pendBit marks an entry whose value is pending (versions count changes
// and never come near it). linkBit marks an entry of a fork whose value
// is in its agent's origin's file, not yet linked into its own (see
// fork.go). newBit marks a value published for a key that had none: it
// has no file to replace, so the applier renames it into place without
// trying to swap it with one first (see place; a hint only, a wrong one
// costs a syscall that fails).
const (
	pendBit = 1 << 63
	linkBit = 1 << 62
	newBit  = 1 << 61
)

func (e *entry) pending() bool   { return e.ver&pendBit != 0 }
func (e *entry) linked() bool    { return e.ver&linkBit != 0 }
func (e *entry) unwritten() bool { return e.ver&(pendBit|linkBit) != 0 }
func (e *entry) version() uint64 { return e.ver &^ (pendBit | linkBit | newBit) }

// cached is the entry's cached value, if it has one.
func (e *entry) cached() []byte {
	if e.pending() {
		return nil
	}
	return e.val
}

// modTime is e.mod as a time.
func (e *entry) modTime() time.Time { return time.Unix(0, e.mod).UTC() }

type ref struct {
	a   *agent
	key string
	ver uint64
}

// Open opens the store under data, creating what is missing, loads the
// index from the work tree and replays the journal.
func Open(data string, opts Options) (*Store, error) {
	if opts.MaxValue <= 0 {
		opts.MaxValue = proto.DefaultMaxValue
	}
	if opts.CheckpointBytes <= 0 {
		opts.CheckpointBytes = 64 << 20
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = 64 << 20
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 64 << 20
	}
	s := &Store{
		data:   data,
		repo:   filepath.Join(data, "repo", "agents"),
		tmp:    filepath.Join(data, "tmp"),
		opts:   opts,
		agents: map[string]*agent{},
		kick:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	s.qcond = sync.NewCond(&s.qmu)
	s.timer = time.AfterFunc(time.Hour, func() {
		s.qmu.Lock()
		s.timerArmed = false
		s.qmu.Unlock()
		s.kickApplier()
	})
	s.timer.Stop()
	s.retryTimer = time.AfterFunc(time.Hour, func() {
		s.requeueFailed()
		s.kickApplier()
	})
	s.retryTimer.Stop()
	// Temp files of a crashed run are garbage: their renames never happened.
	if err := os.RemoveAll(s.tmp); err != nil {
		return nil, err
	}
	for _, d := range []string{s.repo, s.tmp, filepath.Join(data, "journal")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(data, &fs); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	total := int64(fs.Blocks) * fs.Bsize
	if s.opts.DiskReserve <= 0 {
		s.opts.DiskReserve = chunkFor(total)
		if total >= 256<<20 {
			s.opts.DiskReserve = 64 << 20
		}
	}
	j, err := openJournal(filepath.Join(data, "journal", "wal"), chunkFor(total))
	if errors.Is(err, unix.ENOSPC) {
		return nil, proto.Errorf(proto.ENOSPC, "state: the file system of %s is full: the journal needs %d bytes free to start (%d are; limits.disk_reserve %d bytes more to take writes)",
			data, journalHeader+chunkFor(total), int64(fs.Bavail)*fs.Bsize, s.opts.DiskReserve)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	s.j = j
	if err := s.loadIndex(); err != nil {
		j.close()
		return nil, fmt.Errorf("state: reading %s: %w", s.repo, err)
	}
	if err := s.loadMeta(); err != nil {
		j.close()
		return nil, fmt.Errorf("state: reading %s: %w", s.metaPath(), err)
	}
	go s.applier()
	if err := s.recover(); err != nil {
		s.Close()
		return nil, err
	}
	s.opened = true
	// A start that walked, and whose replay needed no checkpoint, has
	// no snapshot for a start after a crash yet.
	s.jmu.Lock()
	s.snapMu.Lock()
	behind := s.indexFrom == "walk" && s.snapGen != s.j.gen
	s.snapMu.Unlock()
	if behind {
		s.snapshotBehind(s.j.gen)
	}
	s.jmu.Unlock()
	return s, nil
}

// recover replays the journal into the index and the work tree, then
// checkpoints so the journal starts empty.
func (s *Store) recover() error {
	// Holding the journal keeps the applier's checkpoints out until every
	// record is published: a checkpoint now would recycle the journal
	// under the replay.
	s.jmu.Lock()
	q := &queued{}
	lost, err := s.j.replay(func(r *record) error {
		if r.ver > s.seq.Load() {
			s.seq.Store(r.ver)
		}
		if r.kind == recAux {
			if s.opts.ReplayAux == nil {
				return nil
			}
			return s.opts.ReplayAux(r.value)
		}
		return s.publishRecord(r, q)
	}, s.opts.Recover)
	q.flush(s)
	s.lost = lost
	if err != nil {
		// Nothing is checkpointed: the journal stays as it is, for a
		// start that salvages it (Options.Recover).
		s.failed = fmt.Errorf("state: replaying journal: %w", err)
		s.jmu.Unlock()
		return s.failed
	}
	if s.opts.AfterReplay != nil {
		if err := s.opts.AfterReplay(s); err != nil {
			s.failed = err
			s.jmu.Unlock()
			return err
		}
	}
	s.jmu.Unlock()
	if len(lost) > 0 {
		slog.Error("state: the journal was damaged: its intact records were salvaged, and what the damaged bytes held is lost", "damage", fmt.Sprint(lost))
	}
	if s.j.size() == 0 {
		return nil
	}
	s.Flush()
	err = s.checkpoint(true)
	if errors.Is(err, unix.ENOSPC) {
		s.qmu.Lock()
		need := s.pending
		s.qmu.Unlock()
		free := s.freeSpace()
		if free < s.floor() {
			return proto.Errorf(proto.ENOSPC, "state: the file system of %s is full: %d bytes are free and oxiosd needs %d to start (half of limits.disk_reserve); the journal holds %d bytes of changes to write to their files once there is room; free some space and start again (%v)",
				s.data, free, s.floor(), need, err)
		}
		// The journal keeps what could not be written to its file and the
		// overlay serves it: start, serve reads, refuse writes until the
		// applier's retries have written it (see writable).
		slog.Warn("state: the disk is too full to write the journal's changes to their files; they are served from memory and written once space is freed, and writes are refused until then",
			"pending_bytes", need, "free_bytes", free, "err", err)
		return nil
	}
	return err
}

// Lost is the damage of the journal that Open salvaged around
// (Options.Recover): what those bytes held is lost.
func (s *Store) Lost() []Damage { return s.lost }

// loadIndex reads the key snapshot if it can, else walks the work tree.
// Files are keys, folders are prefixes.
func (s *Store) loadIndex() error {
	t0 := time.Now()
	s.indexFrom = "snapshot"
	if !s.loadSnapshot() {
		s.indexFrom = "walk"
		if err := s.walkIndex(); err != nil {
			return err
		}
	}
	n := 0
	for _, a := range s.agents {
		n += len(a.keys)
	}
	slog.Info("state: index loaded", "from", s.indexFrom, "keys", n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// walkIndex indexes the work tree by reading its folders and files.
func (s *Store) walkIndex() error {
	ents, err := os.ReadDir(s.repo)
	if err != nil {
		return err
	}
	for _, de := range ents {
		if !de.IsDir() || proto.CheckAgent(de.Name()) != nil {
			continue
		}
		for _, space := range Spaces {
			if err := s.loadTree(Ref(space, de.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadTree indexes the files of one agent's space.
func (s *Store) loadTree(ref string) error {
	root := s.root(ref)
	if sp, _ := SplitRef(ref); sp != SpaceState {
		if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	a := s.agentLocked(ref)
	err := statTree(root, "", func(key string, size, mod int64) {
		if proto.CheckKey(key) == nil {
			a.addKey(key, &entry{size: size, mod: mod})
		}
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// statTree calls add with each regular file below dir (its key: prefix
// and its path from dir), its size and modification time. A memory folder
// holds up to millions of files: each is looked up relative to its
// folder's descriptor (no path walk from the root each time), several at
// a time, so a restart does not wait on a million stats in a row.
func statTree(dir, prefix string, add func(key string, size, mod int64)) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return err
	}
	var files []string
	for _, e := range ents {
		switch {
		case e.IsDir():
			if err := statTree(filepath.Join(dir, e.Name()), prefix+e.Name()+"/", add); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		case e.Type().IsRegular():
			files = append(files, e.Name())
		}
	}
	type stat struct {
		size int64
		mod  int64
		err  error
	}
	out := make([]stat, len(files))
	fd := int(f.Fd())
	do := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			var st unix.Stat_t
			if err := unix.Fstatat(fd, files[i], &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				out[i].err = err
				continue
			}
			out[i] = stat{size: st.Size, mod: st.Mtim.Nano()}
		}
	}
	if workers := min(8, len(files)/4096); workers > 1 {
		var wg sync.WaitGroup
		per := (len(files) + workers - 1) / workers
		for lo := 0; lo < len(files); lo += per {
			wg.Add(1)
			go func(lo, hi int) { defer wg.Done(); do(lo, hi) }(lo, min(lo+per, len(files)))
		}
		wg.Wait()
	} else {
		do(0, len(files))
	}
	for i, name := range files {
		switch {
		case out[i].err == nil:
			add(prefix+name, out[i].size, out[i].mod)
		case errors.Is(out[i].err, unix.ENOENT):
			// Gone since the listing.
		default:
			return &fs.PathError{Op: "stat", Path: filepath.Join(dir, name), Err: out[i].err}
		}
	}
	return nil
}

// agentLocked returns the agent named name, creating it in the index.
func (s *Store) agentLocked(name string) *agent {
	a := s.agents[name]
	if a == nil {
		a = &agent{name: name, keys: map[string]*entry{}, dirs: map[string]int{}, tombs: map[string]uint64{}}
		s.agents[name] = a
	}
	return a
}

func (s *Store) agent(name string) *agent {
	s.mu.RLock()
	a := s.agents[name]
	s.mu.RUnlock()
	return a
}

// addKey records a new key and counts it in each of its folders.
func (a *agent) addKey(key string, e *entry) {
	if old, ok := a.keys[key]; !ok {
		forEachParent(key, func(dir string) { a.dirs[dir]++ })
		a.noteAdded(key)
	} else {
		a.bytes -= old.size
		if old.unwritten() {
			a.unwritten -= old.size
		}
	}
	a.bytes += e.size
	if e.unwritten() {
		a.unwritten += e.size
	}
	a.keys[key] = e
}

func (a *agent) removeKey(key string) {
	old, ok := a.keys[key]
	if !ok {
		return
	}
	a.bytes -= old.size
	if old.unwritten() {
		a.unwritten -= old.size
	}
	delete(a.keys, key)
	a.noteRemoved()
	forEachParent(key, func(dir string) {
		if a.dirs[dir]--; a.dirs[dir] == 0 {
			delete(a.dirs, dir)
		}
	})
}

// forEachParent calls fn with each proper folder prefix of key: "a", "a/b"
// for "a/b/c".
func forEachParent(key string, fn func(string)) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			fn(key[:i])
		}
	}
}

// KeyOverhead is what a key counts against its agent's state.quota
// besides its value: a key costs oxiosd memory and an inode however
// small its value, so a quota of bytes bounds the number of keys too
// (256 MiB, the default, holds at most 1,048,576 empty keys).
const KeyOverhead = 256

// Cost is what a value of size bytes counts against the quota as a key
// (size < 0: a removal, which adds nothing).
func Cost(size int64) int64 {
	if size < 0 {
		return 0
	}
	return size + KeyOverhead
}

// Usage is what agentName's state counts against its quota (its values'
// bytes and KeyOverhead a key), and what key counts of it (0 when it
// does not exist).
func (s *Store) Usage(agentName, key string) (total, size int64) {
	a := s.agent(agentName)
	if a == nil {
		return 0, 0
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if e := a.keys[key]; e != nil {
		size = Cost(e.size)
	}
	return a.bytes + int64(len(a.keys))*KeyOverhead, size
}

// Agents lists the agents that have state or memories, sorted.
func (s *Store) Agents() []string {
	s.mu.RLock()
	seen := make(map[string]bool, len(s.agents))
	names := make([]string, 0, len(s.agents))
	for ref := range s.agents {
		if _, n := SplitRef(ref); !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	s.mu.RUnlock()
	sort.Strings(names)
	return names
}

// Refs lists every tree of the store (see Ref), sorted.
func (s *Store) Refs() []string {
	s.mu.RLock()
	refs := make([]string, 0, len(s.agents))
	for ref := range s.agents {
		refs = append(refs, ref)
	}
	s.mu.RUnlock()
	sort.Strings(refs)
	return refs
}

// Load returns the value of key and its record.
func (s *Store) Load(agentName, key string) ([]byte, proto.StateRecord, error) {
	rec := proto.StateRecord{Type: proto.RecordState, Agent: agentName, Key: key}
	a := s.agent(agentName)
	if a == nil {
		return nil, rec, proto.NoAgent(agentName)
	}
	a.mu.RLock()
	e := a.keys[key]
	if e == nil {
		isDir := a.dirs[key] > 0
		a.mu.RUnlock()
		if isDir {
			return nil, rec, proto.Errorf(proto.EISDIR, "%s: %q is a folder of keys, not a key", agentName, key)
		}
		return nil, rec, proto.Errorf(proto.ENOENT, "%s: no key %q", agentName, key)
	}
	rec.Size, rec.Modified = e.size, e.modTime()
	a.fillMeta(key, &rec)
	v, ok := e.val, e.pending() || e.val != nil
	var f *os.File
	var err error
	if !ok && e.linked() {
		// The origin's file holds the value until the applier has linked
		// it into this tree, and is not replaced before: opened under the
		// lock, it is the right one.
		f, err = os.Open(s.path(a.origin.name, key))
	}
	a.mu.RUnlock()
	if ok {
		return v, rec, nil
	}
	// Not pending means the file holds this value or a newer one (renames
	// are atomic), or the key was deleted since we looked.
	if f != nil {
		v, err = io.ReadAll(f)
		f.Close()
	} else if err == nil {
		v, err = os.ReadFile(s.path(agentName, key))
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return nil, rec, proto.Errorf(proto.ENOENT, "%s: no key %q", agentName, key)
		}
		return nil, rec, proto.Errorf(proto.EIO, "%s: reading %q: %v", agentName, key, err)
	}
	rec.Size = int64(len(v))
	if len(v) <= cacheMaxValue && s.cache.Add(int64(len(v))) <= s.opts.CacheBytes {
		a.mu.Lock()
		if cur := a.keys[key]; cur == e && !e.pending() && e.val == nil {
			e.val = v
		} else {
			s.cache.Add(-int64(len(v)))
		}
		a.mu.Unlock()
	} else if len(v) <= cacheMaxValue {
		s.cache.Add(-int64(len(v)))
	}
	return v, rec, nil
}

// Stat returns the record of key without its value.
func (s *Store) Stat(agentName, key string) (proto.StateRecord, error) {
	rec := proto.StateRecord{Type: proto.RecordState, Agent: agentName, Key: key}
	a := s.agent(agentName)
	if a == nil {
		return rec, proto.NoAgent(agentName)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	e := a.keys[key]
	if e == nil {
		return rec, proto.Errorf(proto.ENOENT, "%s: no key %q", agentName, key)
	}
	rec.Size, rec.Modified = e.size, e.modTime()
	a.fillMeta(key, &rec)
	return rec, nil
}

// List returns the records of the keys at or below prefix (a folder or a
// key; "" for all), sorted by key. Each streams them.
func (s *Store) List(agentName, prefix string) ([]proto.StateRecord, error) {
	var out []proto.StateRecord
	err := s.Each(agentName, prefix, func(rec proto.StateRecord) error {
		out = append(out, rec)
		return nil
	})
	return out, err
}

// path is the file of key in the tree ref.
func (s *Store) path(ref, key string) string {
	return filepath.Join(s.root(ref), filepath.FromSlash(key))
}

// root is the folder of the tree ref: DATA/repo/agents/<agent>/<space>.
func (s *Store) root(ref string) string {
	space, agent := SplitRef(ref)
	return filepath.Join(s.repo, agent, space)
}

// Flush waits until every published change is in its file (not
// necessarily durable: the journal covers that).
func (s *Store) Flush() {
	s.qmu.Lock()
	s.flushers++
	s.qmu.Unlock()
	s.kickApplier()
	s.qmu.Lock()
	for (len(s.queue) > 0 || s.busy) && !s.closed {
		s.qcond.Wait()
	}
	s.flushers--
	s.qmu.Unlock()
}

// Checkpoint flushes, makes the work tree durable and empties the journal.
// Versioning calls it before reading the tree.
func (s *Store) Checkpoint() error {
	s.requeueFailed()
	s.Flush()
	return s.checkpoint(true)
}

// requeueFailed queues again the changes whose files could not be written.
func (s *Store) requeueFailed() {
	s.qmu.Lock()
	s.queue = append(s.queue, s.retry...)
	s.retry = nil
	s.qmu.Unlock()
}

// checkpoint makes everything written behind the journal durable (the
// hook, then one syncfs) and starts a new journal generation. It does
// nothing while changes are queued for the applier: they still need the
// journal.
func (s *Store) checkpoint(force bool) error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.failed != nil || s.j.size() == 0 || !force && s.j.size() < s.opts.CheckpointBytes {
		return nil
	}
	s.qmu.Lock()
	idle := len(s.queue) == 0 && !s.busy
	stuck := len(s.retry)
	s.qmu.Unlock()
	if stuck > 0 {
		// Changes whose files could not be written still need the
		// journal: keep it until they are (Checkpoint and Close retry them).
		s.qmu.Lock()
		why := s.retryErr
		s.qmu.Unlock()
		return fmt.Errorf("state: checkpoint put off: %d changes could not be written to their files: %w", stuck, why)
	}
	if !idle {
		return nil
	}
	fd, err := unix.Open(s.data, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if s.opts.BeforeCheckpoint != nil {
		if err := s.opts.BeforeCheckpoint(); err != nil {
			return fmt.Errorf("state: checkpoint: %w", err)
		}
	}
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("state: syncfs: %w", err)
	}
	if err := s.saveMeta(); err != nil {
		return fmt.Errorf("state: checkpoint: %w", err)
	}
	if err := s.j.reset(); err != nil {
		return err
	}
	s.snapshotBehind(s.j.gen)
	return nil
}

// Close drains the applier, checkpoints, saves the key snapshot for a
// fast start (see snapshot.go) and closes the journal. Closing again
// does nothing and returns the first Close's error.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	s.requeueFailed()
	s.Flush()
	// The final checkpoint writes no snapshot behind it: the exact one
	// below does.
	s.stopSnapshots()
	err := s.checkpoint(true)
	if err == nil && s.opened {
		if serr := s.saveSnapshot(); serr != nil {
			slog.Warn("state: key snapshot not saved: the next start reads the work tree", "err", serr)
		}
	}
	s.timer.Stop()
	s.retryTimer.Stop()
	s.qmu.Lock()
	s.closed = true
	s.qcond.Broadcast()
	close(s.kick)
	s.qmu.Unlock()
	<-s.done
	for _, p := range s.spares {
		os.RemoveAll(p)
	}
	s.spares = nil
	if cerr := s.j.close(); err == nil {
		err = cerr
	}
	return err
}

// IsFolder reports whether some key of agentName lies below prefix.
func (s *Store) IsFolder(agentName, prefix string) bool {
	a := s.agent(agentName)
	if a == nil {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.dirs[strings.TrimSuffix(prefix, "/")] > 0
}
