package vfs

import (
	"context"
	"sync"
	"syscall"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// Handle is an open file: what its reads give (a snapshot, what a Follow
// has brought so far, the answers to its writes), for the caller that
// opened it. Its methods may be called from many goroutines.
type Handle struct {
	l     *Layer
	n     *Node
	c     *kernel.Cred
	read  bool
	write bool

	mu   sync.Mutex
	data []byte
	rpos int64 // a stream's read position (Stream)
	// A Follow's progress: wake is closed (and replaced) whenever data
	// grows or the Follow ends; end is set then, with its error.
	wake   chan struct{}
	end    bool
	err    error
	cancel context.CancelFunc
}

// Open opens n for c with the flags of open(2).
func (l *Layer) Open(ctx context.Context, c *kernel.Cred, n *Node, flags int) (*Handle, error) {
	acc := flags & syscall.O_ACCMODE
	h := &Handle{l: l, n: n, c: c,
		read:  acc != syscall.O_WRONLY,
		write: acc != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0}
	k := n.Kind
	if h.write && (k.Write == nil || k.Mode&0o222 == 0) {
		if k.Refused != nil {
			k.Refused(l.k, c, n)
		}
		if k.WriteErr != "" {
			return nil, proto.Errorf(k.WriteErr, "%s does not change", n.ID)
		}
		return nil, proto.Errorf(proto.EROFS, "%s is read-only", k.Name)
	}
	if h.read && (k.Mode&0o444 == 0 || k.Read == nil && k.Follow == nil && k.Write == nil) {
		return nil, proto.Errorf(proto.EACCES, "%s is write-only", k.Name)
	}
	switch {
	case !h.read:
	case k.Read != nil:
		b, err := k.Read(ctx, l.k, c, n)
		if err != nil {
			return nil, err
		}
		h.data = b
	case k.Follow != nil:
		l.mu.Lock()
		hs := l.following[*n]
		if hs == nil {
			hs = map[*Handle]struct{}{}
			l.following[*n] = hs
		}
		hs[h] = struct{}{}
		l.mu.Unlock()
		h.follow()
		// The open returns once the first piece has come (or the end):
		// a reader that sizes the file first (tail) must not find it
		// empty, or it reads it as a pipe, to its end, before printing.
		err := h.waitFor(ctx, 0)
		if err == nil {
			h.mu.Lock()
			if len(h.data) == 0 {
				err = h.err // refused (run.attach), or no such run
			}
			h.mu.Unlock()
		}
		if err != nil {
			h.Release()
			return nil, err
		}
	}
	return h, nil
}

// waitFor waits until h holds more than off bytes or its Follow has
// ended.
func (h *Handle) waitFor(ctx context.Context, off int64) error {
	for {
		h.mu.Lock()
		if off < int64(len(h.data)) || h.end {
			h.mu.Unlock()
			return nil
		}
		wake := h.wake
		h.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// follow starts the Kind's Follow, feeding the handle until it ends or
// the handle is released.
func (h *Handle) follow() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.wake = cancel, make(chan struct{})
	go func() {
		err := h.n.Kind.Follow(ctx, h.l.k, h.c, h.n, func(b []byte) error {
			h.mu.Lock()
			h.data = append(h.data, b...)
			close(h.wake)
			h.wake = make(chan struct{})
			h.mu.Unlock()
			return nil
		})
		h.mu.Lock()
		h.end, h.err = true, err
		close(h.wake)
		h.mu.Unlock()
	}()
}

// Follows reports whether h follows content that grows.
func (h *Handle) Follows() bool { return h.cancel != nil }

// Stream reports whether h reads as a stream, not a file: the answers
// to its writes, each read taking up where the last ended, whatever the
// offset (a write moved the file's offset past them). The adapter opens
// it non-seekable.
func (h *Handle) Stream() bool { return h.n.Kind.Read == nil && h.n.Kind.Follow == nil }

// Size is how much a read of h can give now.
func (h *Handle) Size() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int64(len(h.data))
}

// Read copies into dest what h holds at off. Past the end of a Follow
// still going, it waits for more (or for ctx, an interrupted read);
// after its end, it is end of file, or the Follow's error if nothing
// came at all (a run that c may not attach to).
func (h *Handle) Read(ctx context.Context, dest []byte, off int64) (int, error) {
	if !h.read {
		return 0, syscall.EBADF
	}
	if h.Stream() {
		h.mu.Lock()
		defer h.mu.Unlock()
		n := copy(dest, h.data[min(h.rpos, int64(len(h.data))):])
		h.rpos += int64(n)
		return n, nil
	}
	if h.Follows() { // set once, before the Follow's goroutine (h.wake is its to change)
		if err := h.waitFor(ctx, off); err != nil {
			return 0, err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < int64(len(h.data)) {
		return copy(dest, h.data[off:]), nil
	}
	if len(h.data) == 0 {
		return 0, h.err // nothing came: why
	}
	return 0, nil
}

// Write hands b to the Kind's Write as one command. Its answer is added
// to what reads of h give.
func (h *Handle) Write(ctx context.Context, b []byte) (int, error) {
	if !h.write {
		return 0, syscall.EBADF
	}
	reply, err := h.n.Kind.Write(ctx, h.l.k, h.c, h.n, b)
	if err != nil {
		return 0, err
	}
	if len(reply) > 0 {
		h.mu.Lock()
		h.data = append(h.data, reply...)
		h.mu.Unlock()
	}
	return len(b), nil
}

// Release ends what h started (a Follow).
func (h *Handle) Release() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	l := h.l
	l.mu.Lock()
	if hs := l.following[*h.n]; hs != nil {
		delete(hs, h)
		if len(hs) == 0 {
			delete(l.following, *h.n)
		}
	}
	l.mu.Unlock()
}

// Stat is what stat shows of an entry for c; h, if not nil, is the open
// file it is asked through, whose size is what it holds. Without one, a
// Follow file's size is the most an open handle of it holds (0 when none
// is open): fstat(2) through FUSE names no open file, and tail -f sizes
// the file it follows so. The error is a Kind's Stat's: the thing is
// gone.
func (l *Layer) Stat(ctx context.Context, c *kernel.Cred, e Entry, h *Handle) (Attr, error) {
	a := Attr{Mtime: l.started}
	if e.Dir != nil {
		a.Dir, a.Mode = true, 0o555
		return a, nil
	}
	k := e.File.Kind
	a.Mode = k.Mode
	switch {
	case k.Stat != nil:
		var err error
		a.Size, a.Mtime, err = k.Stat(ctx, l.k, c, e.File)
		return a, err
	case h != nil && h.read:
		a.Size = h.Size()
	case k.Follow != nil:
		l.mu.Lock()
		for o := range l.following[*e.File] {
			a.Size = max(a.Size, o.Size())
		}
		l.mu.Unlock()
	case k.Read != nil:
		if b, err := k.Read(ctx, l.k, c, e.File); err == nil {
			a.Size = int64(len(b)) // refused: shown empty; open says why
		}
	}
	return a, nil
}
