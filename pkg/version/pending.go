package version

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// Commits published before they are written. A fork's commit is a graft:
// a few folders and the commit, over trees the repository has. The
// kernel makes the fork's live copy durable in its journal anyway, so the
// commit's objects go into the same journal batch (Prepared.Record) and
// one fdatasync makes both durable, where a commit written here syncs a
// pack, its index and the branch, in three rounds.
//
// Published (Prepared.Publish), the commit is the branch's head at once
// for every reader of this Repo, its objects held in memory. They are
// written to a pack in the background (Flush), or with the next commit's
// own pack if it comes first. The journal keeps the record until they
// are written: the kernel flushes before each checkpoint, which is what
// empties the journal. After a crash the journal hands the record back
// (ReplayCommit), and the commit is published again: the same objects,
// so the same hash as the one acknowledged.
//
// Until then, git run on the repository from outside sees the branch
// where it was: the background flush usually takes a few milliseconds.

// recordMagic starts a commit record. The kernel's other journal
// records are JSON objects.
var recordMagic = []byte("\x00oxgit1\n")

// IsCommitRecord reports whether payload, a record of the kernel's
// journal, is a commit's (Prepared.Record).
func IsCommitRecord(payload []byte) bool { return bytes.HasPrefix(payload, recordMagic) }

// Record encodes the prepared commit for the caller's journal: its
// parent, its hash and its new objects.
func (p *Prepared) Record() []byte {
	n := len(recordMagic) + 2*len(oid{}) + binary.MaxVarintLen64
	for _, o := range p.objs.list {
		n += 1 + binary.MaxVarintLen64 + len(o.data)
	}
	b := make([]byte, 0, n)
	b = append(b, recordMagic...)
	b = append(b, p.tx.parent[:]...)
	b = append(b, p.id[:]...)
	b = binary.AppendUvarint(b, uint64(len(p.objs.list)))
	for _, o := range p.objs.list {
		b = append(b, byte(o.typ))
		b = binary.AppendUvarint(b, uint64(len(o.data)))
		b = append(b, o.data...)
	}
	return b
}

// decodeRecord reads a commit record, checking each object's hash
// against the commit it leads to.
func decodeRecord(b []byte) (parent, head oid, objs []object, err error) {
	bad := func(what string) (oid, oid, []object, error) {
		return oid{}, oid{}, nil, fmt.Errorf("%w: commit record: %s", errCorrupt, what)
	}
	if !IsCommitRecord(b) {
		return bad("no magic")
	}
	b = b[len(recordMagic):]
	if len(b) < 2*len(oid{}) {
		return bad("short")
	}
	copy(parent[:], b)
	copy(head[:], b[len(oid{}):])
	b = b[2*len(oid{}):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return bad("object count")
	}
	b = b[k:]
	objs = make([]object, 0, n)
	for range n {
		if len(b) < 1 {
			return bad("short")
		}
		t := objType(b[0])
		size, k := binary.Uvarint(b[1:])
		if k <= 0 || size > uint64(len(b)-1-k) || t < objCommit || t > objBlob {
			return bad("object header")
		}
		data := b[1+k : 1+k+int(size)]
		b = b[1+k+int(size):]
		objs = append(objs, object{typ: t, id: hashObject(t, data), data: data})
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	if !slices.ContainsFunc(objs, func(o object) bool { return o.typ == objCommit && o.id == head }) {
		return bad("the commit is not among its objects")
	}
	return parent, head, objs, nil
}

// Publish makes the prepared commit the branch's head, for the readers
// of this Repo, without writing it: the caller has made Record durable
// (its journal) and hands the record back to ReplayCommit after a crash.
// Its objects are written in the background. Publish ends the
// transaction and returns the commit.
func (p *Prepared) Publish() Commit {
	r := p.tx.r
	r.hold(p.id, p.objs.list)
	r.root, r.rootFor = p.newRoot, p.id
	res := p.describe()
	p.tx.Abort()
	r.flushSoon()
	return res
}

// ReplayCommit publishes again, at start, a commit the journal holds
// (Prepared.Record): if the branch is still at its parent, the commit
// was not written before the crash. Otherwise it was (the branch is at it
// or past it) and ReplayCommit does nothing. It reports whether the
// commit was published.
func (r *Repo) ReplayCommit(record []byte) (bool, error) {
	parent, head, objs, err := decodeRecord(record)
	if err != nil {
		return false, err
	}
	r.tx.Lock()
	defer r.tx.Unlock()
	cur, _, err := r.readRef(r.branch)
	if err != nil {
		return false, err
	}
	if cur != parent {
		return false, nil
	}
	r.hold(head, objs)
	r.root, r.rootFor = nil, head
	return true, nil
}

// hold publishes objs in memory and head as the branch's head.
func (r *Repo) hold(head oid, objs []object) {
	r.db.hold(objs)
	r.pendMu.Lock()
	r.pendHead = head
	r.pendObjs = append(r.pendObjs, objs...)
	r.pendMu.Unlock()
}

// pendingHead is the head of the published commits not yet written.
func (r *Repo) pendingHead() (oid, bool) {
	r.pendMu.Lock()
	defer r.pendMu.Unlock()
	return r.pendHead, r.pendHead != zeroID
}

// pendingObjects are the objects of the published commits not yet
// written, in the order they were published. Under refMu.
func (r *Repo) pendingObjects() []object {
	r.pendMu.Lock()
	defer r.pendMu.Unlock()
	return slices.Clone(r.pendObjs)
}

// written is told, under refMu, that the first n pending objects are in
// a pack now and the branch names their head or a commit after it.
func (r *Repo) written(n int) {
	if n == 0 {
		return
	}
	r.pendMu.Lock()
	done := r.pendObjs[:n]
	r.pendObjs = slices.Clone(r.pendObjs[n:])
	if len(r.pendObjs) == 0 {
		r.pendHead = zeroID
	}
	r.pendMu.Unlock()
	r.db.release(done)
}

// Flush writes the published commits durably: one pack, then the
// branch. The kernel calls it before its journal is emptied.
func (r *Repo) Flush() error {
	if err := r.checkOpen(); err != nil {
		return err
	}
	r.refMu.Lock()
	defer r.refMu.Unlock()
	r.pendMu.Lock()
	head, objs := r.pendHead, slices.Clone(r.pendObjs)
	r.pendMu.Unlock()
	if len(objs) == 0 {
		return nil
	}
	if err := r.db.writePack(objs); err != nil {
		return fmt.Errorf("write published commit %s: %w", head, err)
	}
	// head is the last commit of objs; what was published after the
	// copy stays pending for the next flush.
	if err := r.writeRef(r.branch, head); err != nil {
		return fmt.Errorf("write published commit %s: %w", head, err)
	}
	r.written(len(objs))
	return nil
}

// flushSoon starts the background flush unless it runs: it flushes
// until nothing is pending.
func (r *Repo) flushSoon() {
	r.pendMu.Lock()
	if r.flushing {
		r.pendMu.Unlock()
		return
	}
	r.flushing = true
	r.flushes.Add(1)
	r.pendMu.Unlock()
	go func() {
		defer r.flushes.Done()
		for {
			err := r.Flush()
			r.pendMu.Lock()
			if err != nil || len(r.pendObjs) == 0 {
				r.flushing = false
				r.pendMu.Unlock()
				if err != nil && !errors.Is(err, ErrClosed) {
					// The journal keeps the commit; the next commit or
					// checkpoint tries again.
					slog.Warn("version: writing a published commit failed", "dir", r.dir, "err", err)
				}
				return
			}
			r.pendMu.Unlock()
		}
	}()
}
