package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
)

// Forks. A fork makes an agent's trees a copy of another's at one point
// of the journal, for the cost of one small record whatever the agent
// holds: the journal records which trees are copied (recFork), not their
// values. On publication the fork's index is a clone of the origin's:
// a value in memory (pending or cached) is shared (values are never
// modified); a value in the origin's file is a linked entry, read from
// that file, which the applier then hard-links into the fork's tree.
//
// What makes that right is the applier's order: it works in publication
// order, so the fork's links are made before any later change of the
// origin replaces or removes the origin's file. A link that fails is
// tried again later, and until it succeeds the origin's changes of that
// key wait too (see holds). After the last link of a fork the applier
// syncs the file system, so that even a crash of the machine cannot keep
// a later change of the origin's file without the fork's link to the
// value before it.
//
// The record names the keys it copies (recForkKeys: written once the
// clone is made, before the batch is synced). Replay is the same clone,
// at the same point of the journal, of those keys of the index as replay
// has rebuilt it so far. The names matter because the origin's files are
// not as they were at the fork: the origin's changes after the fork may
// have reached its files before the crash, and a key it saved after the
// fork (and deleted again, the delete not yet applied) is in its tree at
// the start, but was not in the fork (issue 45: replayed forks held keys
// saved after them, and removed forks came back with them). A key of the
// list the fork already has in its tree was linked or written before the
// crash (the fork did not exist before its record, and what it changed
// since is replayed after it) and is kept; any other is cloned from the
// origin, whose file of it cannot have been replaced before the fork's
// link to it was made: the applier links before it writes the origin's
// later changes. A key of the list the origin no longer has was deleted
// after the fork and that delete applied, so its link was made first: the
// fork has it in its tree, or changed it after the fork (replayed after).
// A recFork record (written before the list) clones every key the origin
// has then.

// Fork is a copy of the trees (state, memories, sys) of one agent as
// another, new agent, staged into a Batch.
type Fork struct {
	From, To string
	// Skip lists, per space, key prefixes left out of the copy
	// ("schedules/").
	Skip map[string][]string

	// clones, once prepare ran, are the copies of From's trees begun
	// then, by space.
	clones map[string]*forkClone
}

// forkClone is the copy of one of From's trees, made in the background.
type forkClone struct {
	ver uint64
	// ready is closed once the copy is made (fc) or failed (err).
	ready chan struct{}
	fc    *forkCopy
	err   error // reading what a failed link left in the origin's origin
	// copies: bytes of From's values not in a file of its own when the
	// copy began (its unwritten), which the applier must write for the
	// fork. Taken before the clone, it is never less than the clone's:
	// meanwhile the applier only writes such values to their files.
	copies int64
	// n is how many keys the copy has.
	n int
}

// Copied is how many keys of space the fork copies, known once the copy
// has begun (PrepareFork, AddFork), before it is done.
func (f *Fork) Copied(space string) int {
	if fcl := f.clones[space]; fcl != nil {
		return fcl.n
	}
	return 0
}

// PrepareFork begins the copy of From's trees, on goroutines of their
// own, before f is added to a batch (AddFork does, if nobody did), so the
// copy is made while the caller works out the rest of the batch and while
// it is written and synced. It is a copy of From as it is now: From must
// not change until the batch is published (the kernel forks on its
// committer).
func (s *Store) PrepareFork(f *Fork) { s.prepare(f) }

func (s *Store) prepare(f *Fork) {
	f.clones = map[string]*forkClone{}
	for _, sp := range Spaces {
		a := s.agent(Ref(sp, f.From))
		if a == nil {
			continue
		}
		skip := f.Skip[sp]
		a.mu.RLock()
		n, links, copies := len(a.keys), a.links, a.unwritten
		if len(skip) > 0 {
			for key := range a.keys {
				if skipped(key, skip) {
					n--
				}
			}
		}
		a.mu.RUnlock()
		if n == 0 {
			continue
		}
		if links > 0 {
			// From is itself a fork whose files are not all linked yet:
			// let the applier link them, so the new fork links to From's
			// files.
			s.Flush()
		}
		fcl := &forkClone{ver: s.seq.Add(1), ready: make(chan struct{}), copies: copies, n: n}
		// What a failed link left in the origin's origin: read now.
		vals, err := s.linkedValues(a)
		if err != nil {
			fcl.err = err
			close(fcl.ready)
		} else {
			// From is read-locked here, on the caller's goroutine, and
			// stays so until the copy is made: a change of From
			// published after the fork (publishFork does not wait for
			// the copy) waits for it, rather than show in the fork.
			// Its files stay as they are until the fork's end is
			// applied: counted before it is read (see apply).
			s.beginLinking(a)
			a.mu.RLock()
			go func() {
				fcl.fc = cloneLocked(a, skip, nil, nil, vals, fcl.ver)
				a.mu.RUnlock()
				close(fcl.ready)
			}()
		}
		f.clones[sp] = fcl
	}
}

// AddFork accepts f into the batch: To must have no key, From some. The
// copy is of From as published when AddFork is called (the batch must not
// change From: a replay would copy it with those changes); changes of To
// staged after it in the batch apply to the copy.
func (b *Batch) AddFork(f *Fork) *proto.Error {
	if err := proto.CheckAgent(f.From); err != nil {
		return err
	}
	if err := proto.CheckAgent(f.To); err != nil {
		return err
	}
	if f.From == f.To {
		return proto.Errorf(proto.EINVAL, "a fork of %q needs another name", f.From)
	}
	s := b.s
	for _, sp := range Spaces {
		if n, _ := s.Keys(Ref(sp, f.To)); n > 0 {
			return proto.Errorf(proto.EEXIST, "agent %q exists", f.To)
		}
	}
	if f.clones == nil {
		s.prepare(f)
	}
	if len(f.clones) == 0 {
		return proto.Errorf(proto.ENOENT, "agent %q has nothing to fork", f.From)
	}
	now := time.Now().UTC()
	for _, sp := range Spaces {
		fcl := f.clones[sp]
		if fcl == nil {
			continue
		}
		if fcl.err != nil {
			return proto.Errorf(proto.EIO, "forking %s: %v", f.From, fcl.err)
		}
		// The fork's copies of values not in a file of From's are files
		// the applier must write: the batch needs room for them.
		b.copies += fcl.copies
		// The record's value, the keys copied, is filled in by Write
		// once the copy is made (see keyList).
		r := &record{kind: recForkKeys, ver: fcl.ver, mod: now, agent: Ref(sp, f.From), key: Ref(sp, f.To), clone: fcl}
		b.changes = append(b.changes, &Change{Agent: f.To, Space: sp, rec: r,
			Record: proto.StateRecord{Type: proto.RecordState, Agent: f.To, Modified: now, Changed: now}})
	}
	return nil
}

// linkedValues reads the values of a's linked entries that are not in
// memory. Holding a's lock pins each origin's file (see fork.go).
func (s *Store) linkedValues(a *agent) (map[string][]byte, error) {
	vals := map[string][]byte{}
	if a == nil {
		return vals, nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.links == 0 {
		return vals, nil
	}
	for key, e := range a.keys {
		if e.linked() && e.val == nil {
			v, err := os.ReadFile(s.path(a.origin.name, key))
			if err != nil {
				return nil, err
			}
			vals[key] = v
		}
	}
	return vals, nil
}

// forkCopy is the index of a fork, cloned from its origin's.
type forkCopy struct {
	keys  map[string]*entry
	dirs  map[string]int
	meta  map[string]keyMeta
	bytes int64
	links int
	refs  []ref // the keys for the applier, their agent not yet set
	cost  int64 // overlay bytes of the values shared
	cache int64 // bytes of cached values shared
}

// cloneTree clones src's index (less the keys under skip, and those in
// have: a fork's own files at replay; only the keys in only, unless it is
// nil) for the fork record ver. vals are the values of src's linked
// entries that are not in memory.
func cloneTree(src *agent, skip, only []string, have map[string]*entry, vals map[string][]byte, ver uint64) *forkCopy {
	src.mu.RLock()
	defer src.mu.RUnlock()
	return cloneLocked(src, skip, only, have, vals, ver)
}

// cloneLocked is cloneTree with src.mu held for reading.
func cloneLocked(src *agent, skip, only []string, have map[string]*entry, vals map[string][]byte, ver uint64) *forkCopy {
	n := len(src.keys)
	if only != nil {
		n = len(only)
	}
	fc := &forkCopy{keys: make(map[string]*entry, n), refs: make([]ref, 0, n+1)}
	ents := make([]entry, n) // one allocation for all
	add := func(key string, e *entry) {
		ne := &ents[len(fc.refs)]
		ne.size, ne.mod = e.size, e.mod
		switch {
		case e.pending() || e.linked():
			v := e.val
			if v == nil {
				if v = vals[key]; v == nil {
					v = []byte{}
				}
			}
			ne.ver, ne.val = ver|pendBit, v
			fc.cost += int64(cap(v))
		default:
			// In src's file, perhaps cached too (then shared).
			ne.ver, ne.val = ver|linkBit, e.val
			fc.cache += int64(len(e.val))
			fc.links++
		}
		fc.keys[key] = ne
		fc.bytes += ne.size
		fc.refs = append(fc.refs, ref{key: key, ver: ver})
	}
	if only != nil {
		// The keys the fork copied (its record's list): its folders are
		// theirs.
		fc.dirs = map[string]int{}
		for _, key := range only {
			e := src.keys[key]
			if _, ok := have[key]; ok || e == nil || skipped(key, skip) {
				continue
			}
			if _, dup := fc.keys[key]; dup {
				continue
			}
			forEachParent(key, func(dir string) { fc.dirs[dir]++ })
			add(key, e)
		}
	} else {
		// Its folders are the origin's, less those of the keys left out.
		fc.dirs = maps.Clone(src.dirs)
		for key, e := range src.keys {
			if _, ok := have[key]; ok || skipped(key, skip) {
				forEachParent(key, func(dir string) {
					if fc.dirs[dir]--; fc.dirs[dir] == 0 {
						delete(fc.dirs, dir)
					}
				})
				continue
			}
			add(key, e)
		}
	}
	for key, m := range src.meta {
		if _, ok := fc.keys[key]; ok {
			if fc.meta == nil {
				fc.meta = map[string]keyMeta{}
			}
			fc.meta[key] = m
		}
	}
	return fc
}

// keyList is the value of a fork's record: the keys its copy has, each
// a u16 length and its bytes. It waits for the copy (see prepare).
func (fcl *forkClone) keyList() []byte {
	<-fcl.ready
	if fcl.fc == nil {
		return nil
	}
	n := 0
	for _, r := range fcl.fc.refs {
		n += 2 + len(r.key)
	}
	b := make([]byte, 0, n)
	for _, r := range fcl.fc.refs {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(r.key)))
		b = append(b, r.key...)
	}
	return b
}

// forkKeys decodes a recForkKeys record's list (see keyList).
func forkKeys(r *record) ([]string, error) {
	keys := []string{}
	for p := r.value; len(p) > 0; {
		if len(p) < 2 || len(p) < 2+int(binary.LittleEndian.Uint16(p)) {
			return nil, fmt.Errorf("state: fork of %s as %s: its list of keys is cut short", r.agent, r.key)
		}
		n := int(binary.LittleEndian.Uint16(p))
		keys = append(keys, string(p[2:2+n]))
		p = p[2+n:]
	}
	return keys, nil
}

// skipped reports whether key is under one of the prefixes skip.
func skipped(key string, skip []string) bool {
	return len(skip) > 0 && slices.ContainsFunc(skip, func(p string) bool { return strings.HasPrefix(key, p) })
}

// forkInstall is a fork's index on its way in: the applier waits for
// it at the fork's end (a ref of key "", queued when the fork was
// published), then links the fork's files (refs).
type forkInstall struct {
	ready  chan struct{} // nil: installed already (a replayed fork)
	refs   []ref
	origin *agent // whose linking the fork's end ends (beginLinking)
}

// addInstall registers the install of the fork whose end is ref ver.
func (s *Store) addInstall(ver uint64, in *forkInstall) {
	s.qmu.Lock()
	if s.installs == nil {
		s.installs = map[uint64]*forkInstall{}
	}
	s.installs[ver] = in
	s.qmu.Unlock()
}

// beginLinking counts a fork of a begun: until its end is applied, a's
// files stay as they are at the fork (see apply). A fork whose batch
// fails is never ended: its origin keeps the strict order until the
// daemon restarts, which costs file writes, not correctness.
func (s *Store) beginLinking(a *agent) {
	a.linking.Add(1)
	s.linking.Add(1)
}

// publishFork makes the fork r records (see above) and queues its files
// for the applier. At run time its index is being cloned since the fork
// was prepared (see PrepareFork): the fork's tree stays locked until the
// clone is installed, on a goroutine of its own, so that whoever reads or
// changes the fork meanwhile waits for it while the committer does not.
// Its files are queued now as one ref, the fork's end, so that the
// applier links them before any later change of the origin, whose ref
// comes after. At replay the index is cloned now.
func (s *Store) publishFork(r *record) error {
	s.mu.Lock()
	src := s.agents[r.agent]
	dst := s.agentLocked(r.key)
	s.mu.Unlock()
	if src == nil {
		return nil
	}
	if r.clone != nil {
		in := &forkInstall{ready: make(chan struct{}), origin: src}
		s.addInstall(r.ver, in)
		dst.mu.Lock()
		s.enqueue(overlayPerChange, ref{a: dst, ver: r.ver})
		go func() {
			<-r.clone.ready
			refs, cost := s.install(src, dst, r.clone.fc)
			in.refs = refs
			s.enqueue(cost)
			dst.mu.Unlock() // locked by publishFork
			close(in.ready)
		}()
		return nil
	}
	// Replay: src may be a fork replayed before, not linked yet.
	var only []string
	if r.kind == recForkKeys {
		var err error
		if only, err = forkKeys(r); err != nil {
			return err
		}
	}
	vals, err := s.linkedValues(src)
	if err != nil {
		return fmt.Errorf("state: fork of %s as %s: %w", r.agent, r.key, err)
	}
	dst.mu.RLock()
	have := maps.Clone(dst.keys)
	dst.mu.RUnlock()
	// The fork's end, when the applier reaches it, counts the links made
	// (see apply); its index is installed here, not behind it.
	s.beginLinking(src)
	s.addInstall(r.ver, &forkInstall{origin: src})
	fc := cloneTree(src, forkSkip(r), only, have, vals, r.ver)
	dst.mu.Lock()
	refs, cost := s.install(src, dst, fc)
	dst.mu.Unlock()
	// The fork's end (key ""): see apply.
	refs = append(refs, ref{a: dst, ver: r.ver})
	s.enqueue(cost+overlayPerChange, refs...)
	return nil
}

// install makes fc the index of dst, a fork of src, and returns the refs
// of its files for the applier and what they cost the overlay. With
// dst.mu held.
func (s *Store) install(src, dst *agent, fc *forkCopy) ([]ref, int64) {
	if len(dst.keys) == 0 {
		// Every entry of a fork is unwritten (pending or linked).
		dst.keys, dst.dirs, dst.bytes, dst.unwritten = fc.keys, fc.dirs, fc.bytes, fc.bytes
		dst.resetOrder()
	} else {
		for key, e := range fc.keys {
			dst.addKey(key, e)
		}
	}
	for key := range dst.tombs {
		if _, ok := fc.keys[key]; ok {
			delete(dst.tombs, key)
		}
	}
	for key, m := range fc.meta {
		if dst.meta == nil {
			dst.meta = map[string]keyMeta{}
		}
		dst.meta[key] = m
	}
	if dst.links += fc.links; dst.links > 0 {
		dst.origin = src
	}
	s.cache.Add(fc.cache)
	if len(fc.meta) > 0 {
		s.metaDirty.Store(true)
	}
	refs := fc.refs
	for i := range refs {
		refs[i].a = dst
	}
	return refs, fc.cost + overlayPerChange*int64(len(refs))
}

// forkSkip is the list of prefixes a recFork record leaves out.
func forkSkip(r *record) []string {
	if r.kind != recFork || len(r.value) == 0 {
		return nil
	}
	return strings.Split(string(r.value), "\n")
}

// unlinked counts one linked entry less. Called with a.mu held.
func (a *agent) unlinked() {
	if a.links--; a.links == 0 {
		a.origin = nil
	}
}

// fileKey names a key's file by its agent's entry in the index.
type fileKey struct {
	a   *agent
	key string
}

// hold notes that the link of fork's key from origin failed: the
// origin's changes of that key wait until the link is made (or the
// fork's key changed). Applier only.
func (s *Store) hold(fork, origin fileKey) {
	if _, ok := s.holds[fork]; ok {
		return
	}
	if s.holds == nil {
		s.holds, s.held = map[fileKey]fileKey{}, map[fileKey]int{}
	}
	s.holds[fork] = origin
	s.held[origin]++
}

// release ends the hold of fork's key, if it has one. Applier only.
func (s *Store) release(fork fileKey) {
	origin, ok := s.holds[fork]
	if !ok {
		return
	}
	delete(s.holds, fork)
	if s.held[origin]--; s.held[origin] == 0 {
		delete(s.held, origin)
	}
}

// linkFile makes the key's file in the tree to the file of the same key
// in the tree from (a hard link: the two trees share the file until
// either changes, which replaces it), or a copy where a link cannot be
// made.
func (s *Store) linkFile(from, to, key string, mod int64) error {
	src := s.path(from, key)
	tmp := filepath.Join(s.tmp, strconv.FormatUint(s.tmpN.Add(1), 36))
	if err := os.Link(src, tmp); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return err
		}
		// Too many links to one file, or a file system without them.
		v, rerr := os.ReadFile(src)
		if rerr != nil {
			return rerr
		}
		return s.writeFile(to, key, v, mod, false)
	}
	return s.place(tmp, to, key, false)
}
