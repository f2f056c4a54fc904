// Package writeback is the write-back buffering of the mount, apart from
// FUSE and from the kernel: a file's working copy (Buffer), shared by the
// handles that write it, and the saves of its closed content (Queue),
// queued with the store in order and shown to readers until the store
// has them; and, on the kernel's side, the saves in flight (Flights) that
// a later read of the same agent or key waits for.
//
// A value in the store is whole, so writes cannot go to it one by one:
// they collect in a Buffer, and a close hands the Buffer's content to a
// save. That content then belongs to the save (and to the readers who
// see it meanwhile): the Buffer copies it before the next change.
package writeback

import (
	"errors"
	"sync"
	"sync/atomic"
)

// ErrTooLarge is returned by a change that would make the content larger
// than the Buffer's limit; the change is not made.
var ErrTooLarge = errors.New("writeback: past the value size limit")

// Buffer is a working copy. The zero value is empty and unlimited; Max
// bounds it. It is not safe for concurrent use: its file's lock guards it.
type Buffer struct {
	Max    int64 // the largest content allowed; 0: no limit
	b      []byte
	shared bool // b belongs to a save or to the store: copy before changing
}

// Len is the content's length.
func (w *Buffer) Len() int { return len(w.b) }

// Bytes returns the content, which the caller must not change.
func (w *Buffer) Bytes() []byte { return w.b }

// Share makes v the content without copying it: v is someone else's (the
// store's, a save's) and is copied before the first change.
func (w *Buffer) Share(v []byte) { w.b, w.shared = v, true }

// Reset empties the Buffer and lets go of its memory.
func (w *Buffer) Reset() { w.b, w.shared = nil, false }

// Take returns the content for a save: from now on it belongs to the
// save, and the Buffer copies it before the next change.
func (w *Buffer) Take() []byte {
	w.shared = true
	return w.b[:len(w.b):len(w.b)]
}

// ReadAt copies what of the content is at off into dest and returns dest
// cut to what was copied.
func (w *Buffer) ReadAt(dest []byte, off int64) []byte {
	if off >= int64(len(w.b)) || off < 0 {
		return dest[:0]
	}
	return dest[:copy(dest, w.b[off:])]
}

// WriteAt writes p at off, zero-filling any gap; past Max it changes
// nothing and returns ErrTooLarge.
func (w *Buffer) WriteAt(p []byte, off int64) error {
	end := off + int64(len(p))
	if w.Max > 0 && end > w.Max {
		return ErrTooLarge
	}
	if w.shared || end > int64(len(w.b)) {
		w.resize(max(int(end), len(w.b)))
	}
	copy(w.b[off:], p)
	return nil
}

// Truncate sets the content's length, zero-filling growth.
func (w *Buffer) Truncate(size int64) error {
	if w.Max > 0 && size > w.Max {
		return ErrTooLarge
	}
	w.resize(int(size))
	return nil
}

// TruncateFrom makes the content src's first size bytes (src is not
// changed), zero-filling past its end.
func (w *Buffer) TruncateFrom(src []byte, size int) {
	w.b, w.shared = src, true
	w.resize(size)
}

// resize sets the length, copying a shared content first and growing the
// capacity by doubling (up to Max), so appends cost amortized O(1).
func (w *Buffer) resize(size int) {
	switch {
	case w.shared || size > cap(w.b):
		c := size
		if size > cap(w.b) {
			c = max(size, 2*cap(w.b))
			if w.Max > 0 {
				c = min(c, int(w.Max))
			}
		}
		b := make([]byte, size, max(c, size))
		copy(b, w.b)
		w.b, w.shared = b, false
	case size > len(w.b):
		old := len(w.b)
		w.b = w.b[:size]
		clear(w.b[old:])
	default:
		w.b = w.b[:size]
	}
}

// Pending is a save queued with the store.
type Pending interface {
	// Wait blocks until the save is durable or failed.
	Wait() error
	// Done is closed once the save is durable (the store shows it) or
	// failed (it never will).
	Done() <-chan struct{}
}

// Queue is the saves of one file's closed contents, queued and not yet
// recorded. Saves of a file must reach the store in the order they were
// made: the caller queues them under its file's lock and hands each to
// Add at once. Like Buffer it is guarded by its file's lock, Lock, which
// its own goroutines take to record outcomes.
type Queue struct {
	Lock sync.Locker
	// Recorded, if set, is called with Lock held after each save's
	// outcome is recorded, in the order the saves were added: last says
	// no later save was added meanwhile.
	Recorded func(last bool, err error)
	// InFlight, if set, counts the saves of every Queue sharing it.
	InFlight *atomic.Int64

	last    []byte  // the content of the last save added
	lastP   Pending // and its save
	has     bool
	n       int    // saves added and not yet recorded
	seq     uint64 // number of the last save added
	settled chan struct{}
	err     error
}

// Add records that value was queued for saving as p. value belongs to
// the save from now on.
func (q *Queue) Add(value []byte, p Pending) {
	q.last, q.lastP, q.has = value, p, true
	q.n++
	q.seq++
	seq := q.seq
	prev := q.settled
	done := make(chan struct{})
	q.settled = done
	if q.InFlight != nil {
		q.InFlight.Add(1)
	}
	go func() {
		err := p.Wait()
		if prev != nil {
			<-prev // record outcomes in order
		}
		if q.InFlight != nil {
			q.InFlight.Add(-1)
		}
		q.Lock.Lock()
		q.n--
		if err != nil {
			q.err = err
		}
		last := seq == q.seq
		if last {
			q.last, q.lastP, q.has = nil, nil, false
		}
		if q.Recorded != nil {
			q.Recorded(last, err)
		}
		q.Lock.Unlock()
		close(done)
	}()
}

// Shown returns the content readers must see instead of the store's: the
// last save's, while the store does not show it yet. Once that save is
// durable the store has it or something newer (a change made over the
// socket after it), so readers go there even before the save is
// recorded here.
func (q *Queue) Shown() ([]byte, bool) {
	if !q.has {
		return nil, false
	}
	select {
	case <-q.lastP.Done():
		return nil, false
	default:
		return q.last, true
	}
}

// Busy reports whether saves were added and not yet recorded.
func (q *Queue) Busy() bool { return q.n > 0 }

// Settled returns a channel closed once every save added so far is
// recorded (nil if none ever was).
func (q *Queue) Settled() <-chan struct{} {
	if q.settled == nil {
		return nil
	}
	return q.settled
}

// SetErr records a failure for the next TakeErr (a write refused before
// any save).
func (q *Queue) SetErr(err error) { q.err = err }

// TakeErr returns the failure of a save since the last call, and forgets
// it: fsync and close report it once.
func (q *Queue) TakeErr() error {
	err := q.err
	q.err = nil
	return err
}
