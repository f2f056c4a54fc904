package vfs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/writeback"
)

// A Draft is a file being written in a folder where a file written is
// handed to the kernel whole, at its first close, and then is gone (its
// name was only a handle): a memory to be (mem/KIND/), a message to send
// (inbox/). Its row's Submit takes the content:
//
//   - a close (or fsync) after something was written submits it, and
//     reports the kernel's answer; a close before anything was written
//     submits nothing yet (a shell's `> file` opens, dups the descriptor
//     and closes the original first);
//   - the last close submits what was written after the last one (through
//     a mapping, say); a file closed empty (touch) submits nothing;
//   - a write past the size limit refuses the whole file (EFBIG), and its
//     close says so; a write after the submit is EPERM (a memory does not
//     change), and to a discarded draft (unlinked) goes nowhere, as to any
//     unlinked file.
type Draft struct {
	l *Layer
	n *Node

	mu      sync.Mutex
	buf     writeback.Buffer // its Max is the size limit
	mtime   time.Time
	writers int  // write handles open
	done    bool // submitted, refused or discarded: the name is gone
	gone    bool // discarded: writes go nowhere
	err     error
}

// NewDraft starts a draft of n's row, at most max bytes.
func (l *Layer) NewDraft(n *Node, max int64) *Draft {
	d := &Draft{l: l, n: n, mtime: time.Now()}
	d.buf.Max = max
	return d
}

// Pending reports whether d is still being written (its name is there).
func (d *Draft) Pending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.done
}

// Stat is what stat shows of d: its size, its time, and whether it is
// done with (its link count is then 0).
func (d *Draft) Stat() (size int64, mtime time.Time, done bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(d.buf.Len()), d.mtime, d.done
}

// End marks d done with, without submitting it: a name listed that was
// submitted since the listing was taken.
func (d *Draft) End() {
	d.mu.Lock()
	d.done = true
	d.mu.Unlock()
}

// Truncate is truncate(2) of d.
func (d *Draft) Truncate(size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.done && !d.gone:
		return proto.Errorf(proto.EPERM, "submitted already")
	case size > d.buf.Max:
		return syscall.EFBIG
	case !d.gone:
		d.buf.Truncate(size)
		d.mtime = time.Now()
	}
	return nil
}

// Discard drops d (unlinked before it was submitted) and reports whether
// it was still pending.
func (d *Draft) Discard() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	was := !d.done
	if was {
		d.done, d.gone = true, true
		d.buf.Reset()
	}
	return was
}

// Open opens d for c with the flags of open(2); create is the open of
// the create(2) that made it. A draft done with is ESTALE: the kernel
// held its name a moment longer, and looks the path up again.
func (d *Draft) Open(c *kernel.Cred, flags int, create bool) (*DraftHandle, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done && !create {
		return nil, syscall.ESTALE
	}
	h := &DraftHandle{d: d, c: c}
	if create || flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		h.write, h.append = true, flags&syscall.O_APPEND != 0
		d.writers++
		if flags&syscall.O_TRUNC != 0 {
			d.buf.Truncate(0)
			d.mtime = time.Now()
		}
	}
	return h, nil
}

// submitLocked hands the content to the row's Submit; whatever the
// outcome, d is done with.
func (d *Draft) submitLocked(ctx context.Context, c *kernel.Cred) error {
	d.done = true
	d.err = d.n.Kind.Submit(ctx, d.l.k, c, d.n, d.buf.Bytes())
	d.buf.Reset()
	return d.err
}

// DraftHandle is an open Draft.
type DraftHandle struct {
	d      *Draft
	c      *kernel.Cred
	write  bool
	append bool
}

// Read copies what d holds at off into dest.
func (h *DraftHandle) Read(dest []byte, off int64) []byte {
	h.d.mu.Lock()
	defer h.d.mu.Unlock()
	return h.d.buf.ReadAt(dest, off)
}

// Write writes data at off (at the end, for O_APPEND).
func (h *DraftHandle) Write(data []byte, off int64) (int, error) {
	if !h.write {
		return 0, syscall.EBADF
	}
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.gone:
		return len(data), nil
	case d.done && d.err != nil:
		return 0, d.err
	case d.done:
		return 0, proto.Errorf(proto.EPERM, "submitted already")
	}
	if h.append {
		off = int64(d.buf.Len())
	}
	if err := d.buf.WriteAt(data, off); err != nil {
		// Whole or nothing: the file is refused, and its close says so.
		if errors.Is(err, writeback.ErrTooLarge) {
			err = syscall.EFBIG
		}
		d.done, d.err = true, err
		d.buf.Reset()
		return 0, err
	}
	d.mtime = time.Now()
	return len(data), nil
}

// Flush is close(2) (and fsync(2)): it submits what was written, once,
// and reports the answer; end says whether the draft is done with now
// (its name is to go).
func (h *DraftHandle) Flush(ctx context.Context) (end bool, err error) {
	if !h.write {
		return false, nil
	}
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.done:
		return true, d.err
	case d.buf.Len() == 0:
		return false, nil
	}
	return true, d.submitLocked(ctx, h.c)
}

// Release is the last close of the handle. The last writer's release
// submits what was written since the last flush, unless closing (the
// mount is going away); end says whether the draft is done with now.
func (h *DraftHandle) Release(closing bool) (end bool, err error) {
	if !h.write {
		return false, nil
	}
	d := h.d
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writers--
	if d.writers > 0 {
		return false, nil
	}
	if !d.done {
		if d.buf.Len() > 0 && !closing {
			err = d.submitLocked(context.Background(), h.c)
		}
		d.done = true // closed empty: nothing to submit
	}
	return true, err
}

// NewMemory is a file written into /agent/NAME/mem/KIND/ (Node.ID is the
// kind): remembered at close (mem.remember), as MemInput reads it.
var NewMemory = &Kind{
	Name: "memory",
	Mode: 0o644,
	Submit: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) error {
		in, err := MemInput(b)
		if err != nil {
			return err
		}
		in.Kind = n.ID
		a := proto.MemRememberArgs{Agent: n.Agent, Memories: []proto.MemoryInput{in}}
		_, err = k.MemRemember(ctx, c, a, raw(a))
		return err
	},
}

// NewMessage is a file written into /agent/NAME/inbox/: sent to NAME at
// close (msg.send), as MsgInput reads it. A send the policies refuse is
// EACCES (audited by msg.send), as for the other parts of the tree a
// caller may not reach.
var NewMessage = &Kind{
	Name: "message",
	Mode: 0o644,
	Submit: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) error {
		a, err := MsgInput(b)
		if err != nil {
			return err
		}
		a.To = n.Agent
		_, err = k.MsgSend(ctx, c, a, raw(a))
		var pe *proto.Error
		if errors.As(err, &pe) && pe.Code == proto.EPERM {
			return syscall.EACCES
		}
		return err
	},
}
