package state

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// Change is one save or delete, staged into a Batch.
type Change struct {
	Agent string
	// Space is the agent's tree the key is in: "" or SpaceState for its
	// state, SpaceMem for its memories.
	Space  string
	Key    string
	Value  []byte
	Delete bool
	// Mode, when it has proto.ModeSet, gives the key that mode (the mount's
	// chmod); otherwise a save keeps the key's mode. Mod, when set, is
	// the value's modification time instead of now (the mount's touch,
	// or the time of its last write). The change's own time is the key's
	// ctime either way.
	Mode uint32
	Mod  time.Time
	// Ctime, when set, is the time of the change instead of now: the
	// mount's, which stamps a file when it is written, not when its save
	// commits (so the times it showed meanwhile stay true).
	Ctime time.Time

	rec *record
	// Result, set by Add when the change is accepted: the key's record.
	Record proto.StateRecord
}

// Batch is a group of changes made durable by one journal sync. Changes
// are checked in order against the index as it will be after the changes
// before them in the batch; a change that fails is left out.
type Batch struct {
	s       *Store
	changes []*Change
	exists  map[akey]bool // keys touched by this batch: exist afterwards?
	dirs    map[akey]int  // folder count deltas of this batch
	aux     []*record
	start   int64
	bytes   int64
	values  int64 // bytes of the values saved
	// copies: bytes of values a fork copies that the applier must write
	// as files of their own (its origin's pending values): files, not
	// journal records.
	copies int64
	// last is the ref (and agent, once it exists) of the last change: a
	// batch of one agent's memories makes its ref and finds its agent
	// once, not once a change.
	last struct {
		space, agent, ref string
		a                 *agent
	}
}

type akey struct{ agent, key string }

// Begin starts a batch. Only one batch may be open at a time.
func (s *Store) Begin() *Batch {
	return &Batch{s: s}
}

// Len is the number of accepted changes.
func (b *Batch) Len() int { return len(b.changes) }

// Add checks c and, if it can be applied, accepts it into the batch. The
// error names why not; nothing of a refused change is kept.
func (b *Batch) Add(c *Change) *proto.Error {
	if err := proto.CheckAgent(c.Agent); err != nil {
		return err
	}
	if err := proto.CheckKey(c.Key); err != nil {
		return err
	}
	if err := checkSpace(c.Space); err != nil {
		return err
	}
	if !c.Delete && len(c.Value) > b.s.opts.MaxValue {
		return proto.Errorf(proto.E2BIG, "%s: value for %q is %d bytes, more than limits.max_value %d", c.Agent, c.Key, len(c.Value), b.s.opts.MaxValue)
	}
	l := &b.last
	if l.ref == "" || l.space != c.Space || l.agent != c.Agent {
		l.space, l.agent, l.ref, l.a = c.Space, c.Agent, Ref(c.Space, c.Agent), nil
	}
	ref, a := l.ref, l.a
	if a == nil {
		// Not cached while the agent does not exist: a change may be its
		// first (agents, once made, stay in the store's map).
		a = b.s.agent(ref)
		l.a = a
	}
	exists := func(key string) bool {
		if v, ok := b.exists[akey{ref, key}]; ok {
			return v
		}
		if a == nil {
			return false
		}
		a.mu.RLock()
		_, ok := a.keys[key]
		a.mu.RUnlock()
		return ok
	}
	dirCount := func(key string) int {
		n := b.dirs[akey{ref, key}]
		if a != nil {
			a.mu.RLock()
			n += a.dirs[key]
			a.mu.RUnlock()
		}
		return n
	}
	had := exists(c.Key)
	if c.Delete {
		if !had {
			if dirCount(c.Key) > 0 {
				return proto.Errorf(proto.EISDIR, "%s: %q is a folder of keys; delete the keys in it", c.Agent, c.Key)
			}
			return proto.Errorf(proto.ENOENT, "%s: no key %q", c.Agent, c.Key)
		}
	} else {
		var conflict string
		forEachParent(c.Key, func(dir string) {
			if conflict == "" && exists(dir) {
				conflict = dir
			}
		})
		if conflict != "" {
			return proto.Errorf(proto.ENOTDIR, "%s: cannot save %q: %q is a key, not a folder", c.Agent, c.Key, conflict)
		}
		if !had && dirCount(c.Key) > 0 {
			return proto.Errorf(proto.EISDIR, "%s: cannot save %q: it is a folder of other keys", c.Agent, c.Key)
		}
	}
	// Accepted: account for it in the batch's view (made when first
	// needed: a batch of saves of keys that exist, the common one, has
	// none; reading a nil map finds nothing).
	if (c.Delete || !had) && b.exists == nil {
		b.exists, b.dirs = map[akey]bool{}, map[akey]int{}
	}
	switch {
	case c.Delete:
		b.exists[akey{ref, c.Key}] = false
		forEachParent(c.Key, func(dir string) { b.dirs[akey{ref, dir}]-- })
	case !had:
		b.exists[akey{ref, c.Key}] = true
		forEachParent(c.Key, func(dir string) { b.dirs[akey{ref, dir}]++ })
	}
	now := time.Now().UTC()
	kind := byte(recSave)
	if c.Delete {
		kind = recDelete
	}
	mod := now
	if !c.Mod.IsZero() && !c.Delete {
		mod = c.Mod.UTC()
	}
	if !c.Ctime.IsZero() && !c.Delete {
		now = c.Ctime.UTC()
	}
	c.rec = &record{kind: kind, ver: b.s.seq.Add(1), mod: mod, agent: ref, key: c.Key, value: c.Value}
	if !c.Delete && (c.Mode&proto.ModeSet != 0 || !mod.Equal(now)) {
		c.rec.kind = recSaveMeta
		c.rec.mode, c.rec.ctime = c.Mode&(proto.ModeSet|0o7777), now.UnixNano()
	}
	c.Record = proto.StateRecord{Type: proto.RecordState, Agent: c.Agent, Key: c.Key, Size: int64(len(c.Value)), Modified: mod, Deleted: c.Delete, Changed: now}
	if c.Mode&proto.ModeSet != 0 {
		c.Record.Mode = c.Mode & (proto.ModeSet | 0o7777)
	}
	if c.Delete {
		if st, err := b.s.Stat(ref, c.Key); err == nil {
			c.Record.Size = st.Size
		}
	}
	b.changes = append(b.changes, c)
	b.bytes += overlayCost(c.rec.value)
	b.values += int64(len(c.Value))
	return nil
}

// AddAux adds a record of the caller's own to the batch: durable with it,
// handed back to Options.ReplayAux at the next start if it is still in the
// journal then. The payload must not change afterwards.
func (b *Batch) AddAux(payload []byte) {
	b.aux = append(b.aux, &record{kind: recAux, ver: b.s.seq.Add(1), value: payload})
}

// Write appends the batch to the journal (not yet durable). It holds the
// journal until Publish or Abort, so a checkpoint cannot recycle the
// journal between the sync and the publication.
func (b *Batch) Write() error {
	s := b.s
	for _, c := range b.changes {
		if r := c.rec; r.kind == recForkKeys && r.clone != nil && r.value == nil {
			// The keys a fork copies, once its copy is made: replay
			// copies those (see fork.go).
			r.value = r.clone.keyList()
		}
	}
	s.waitRoom(b.bytes)
	s.jmu.Lock()
	if s.j.size() >= s.opts.CheckpointBytes && s.failed == nil {
		// Under steady load the applier's queue is never empty at the
		// moment it could checkpoint, and the journal would grow without
		// bound. The committer is the only publisher: once the queue drains
		// it stays empty, so the checkpoint is sure to run.
		s.jmu.Unlock()
		s.Flush()
		if err := s.checkpoint(true); err != nil {
			slog.Error("state checkpoint failed", "err", err)
		}
		s.jmu.Lock()
	}
	if s.failed != nil {
		s.jmu.Unlock()
		return s.failed
	}
	if err := s.writable(b.bytes, b.copies, b.values == 0 && b.copies == 0); err != nil {
		s.jmu.Unlock()
		return err
	}
	b.start = s.j.pos
	first := true // the batch's first record says so (see replay)
	for _, c := range b.changes {
		s.j.appendRecord(c.rec, first)
		first = false
	}
	for _, r := range b.aux {
		s.j.appendRecord(r, first)
		first = false
	}
	if err := s.j.flush(); err != nil {
		err = b.fail(err)
		s.jmu.Unlock()
		return err
	}
	return nil
}

// Sync makes the written batch durable. After Write succeeded the caller
// must end the batch with Publish or, if Sync or another part of the group
// commit failed, Abort.
func (b *Batch) Sync() error {
	if len(b.changes) == 0 && len(b.aux) == 0 {
		return nil
	}
	if err := b.s.j.sync(); err != nil {
		return fmt.Errorf("state: journal sync: %w", err)
	}
	return nil
}

// fail takes the batch's records back out of the journal. If even that
// fails the store refuses further writes rather than risk replaying a
// change that was never acknowledged.
func (b *Batch) fail(err error) error {
	s := b.s
	if terr := s.j.discard(b.start); terr != nil {
		s.failed = fmt.Errorf("state: journal unusable after failed write (%v): %w", err, terr)
	}
	return fmt.Errorf("state: journal: %w", err)
}

// Abort gives up a written batch (another part of the group commit, such as
// the audit log, failed): its records are cut from the journal.
func (b *Batch) Abort(cause error) {
	b.fail(cause)
	b.s.jmu.Unlock()
}

// Publish makes a durable batch visible and queues its files for the
// applier. It releases the journal.
func (b *Batch) Publish() {
	s := b.s
	q := &queued{refs: make([]ref, 0, len(b.changes))}
	for _, c := range b.changes {
		s.publishRecord(c.rec, q)
	}
	q.flush(s)
	s.jmu.Unlock()
}

// queued gathers the refs (and their overlay cost) of a batch's records,
// or of a replay's, for one enqueue: a batch of a thousand memories took
// the queue's lock and rearmed the applier's timer a thousand times. last is the agent of
// the last record, so that a run of one agent's records finds it once
// (agents are never taken out of the store's map).
type queued struct {
	refs []ref
	cost int64
	last *agent
}

// flush enqueues what q holds.
func (q *queued) flush(s *Store) {
	if len(q.refs) > 0 {
		s.enqueue(q.cost, q.refs...)
	}
	q.refs, q.cost = q.refs[:0], 0
}

// publishRecord applies one journal record to the index and queues it in
// q, which the caller enqueues (flush).
func (s *Store) publishRecord(r *record, q *queued) error {
	if r.kind == recFork || r.kind == recForkKeys {
		q.flush(s) // a fork queues its own files, behind these
		return s.publishFork(r)
	}
	a := q.last
	if a == nil || a.name != r.agent {
		s.mu.Lock()
		a = s.agentLocked(r.agent)
		s.mu.Unlock()
		q.last = a
	}
	a.mu.Lock()
	var released int64 // a pending value this change replaces
	old, had := a.keys[r.key]
	if old != nil && old.cached() != nil {
		s.cache.Add(-int64(len(old.cached())))
	} else if old != nil && old.pending() {
		released = int64(cap(old.val))
	}
	if old != nil && old.linked() {
		a.unlinked()
	}
	if r.kind == recDelete {
		a.removeKey(r.key)
		a.tombs[r.key] = r.ver
	} else {
		delete(a.tombs, r.key)
		ver := r.ver | pendBit
		if !had {
			ver |= newBit
		}
		a.addKey(r.key, &entry{size: int64(len(r.value)), mod: r.mod.UnixNano(), ver: ver, val: r.value})
	}
	metaChanged := a.setMeta(r, had)
	if had != (r.kind != recDelete) {
		// A name came or went: its folder's time (see FolderTime).
		a.touchFolder(r.key, r.ctimeOr())
	}
	a.mu.Unlock()
	if metaChanged {
		s.metaDirty.Store(true)
	}
	q.refs = append(q.refs, ref{a: a, key: r.key, ver: r.ver})
	q.cost += overlayCost(r.value) - released
	return nil
}

// enqueue queues refs for the applier, with cost more bytes of overlay
// (see overlayCost).
func (s *Store) enqueue(cost int64, refs ...ref) {
	s.qmu.Lock()
	s.queue = append(s.queue, refs...)
	s.pending += cost
	now := len(s.queue) >= applyBatch || s.pending >= s.opts.MaxPendingBytes/2
	switch {
	case now || s.closed:
	case !s.timerArmed:
		// Let changes gather until the store is quiet: saves to one key in
		// the meantime cost one file write, and file creation (slow, and it
		// makes the journal's fdatasync wait: 64 clients saved 19k/s with
		// the applier keeping up, 32k/s without it) waits for a lull.
		s.timerArmed = true
		s.firstPending = time.Now()
		s.timer.Reset(applyDelay)
	case time.Since(s.firstPending) < applyMaxDelay-applyDelay:
		s.timer.Reset(applyDelay)
	}
	s.qmu.Unlock()
	if now {
		s.kickApplier()
	}
}

// kickApplier wakes the applier now.
func (s *Store) kickApplier() {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// overlayPerChange is what a change costs the overlay beyond its value's
// bytes: its place in the applier's queue (32 bytes, in a slice that grows
// by doubling) and the rounding of the value's allocation.
const overlayPerChange = 64

// overlayCost is what a change holding value counts against
// MaxPendingBytes until the applier is done with it: the value's capacity
// (what its allocation holds) while it is pending, and overlayPerChange
// until the applier has taken the change off its queue. The value's part
// is released when its file is written or a later change of the key
// replaces it, whichever comes first (never twice: both happen under the
// agent's lock, and only one of them finds the entry still pending).
func overlayCost(value []byte) int64 { return int64(cap(value)) + overlayPerChange }

// waitRoom blocks while the changes waiting for the applier exceed the
// bound, so a flood of saves cannot grow memory without limit.
func (s *Store) waitRoom(n int64) {
	s.qmu.Lock()
	for s.pending > 0 && s.pending+n > s.opts.MaxPendingBytes && !s.closed {
		s.qcond.Wait()
	}
	s.qmu.Unlock()
}
