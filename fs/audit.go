package fs

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
)

// auditLog is /audit/log: the entry lines the caller may see (the admin:
// all), one per line, oldest first, as `ox-audit log` prints them. The log
// can be large, so it is not snapshot at open: reads scan it on demand
// from the position they reached, and a read past what a handle has seen
// looks again, so a reader at the end gets what was appended since.
//
// Its size is the length of the caller's view, so that tail -f and less
// +F, which poll fstat and read when the size grows (and start over when
// it shrinks), follow it. Every view is kept as a running count (sizes),
// so a stat scans only what was appended since the last one; reads go
// around the page cache.
type auditLog struct {
	fusefs.Inode
	readOnly
	fs *FS

	mu    sync.Mutex
	sizes map[string]*auditSize // per view (viewOf)
}

// auditSize is the length of one view of the log, as far as scanned.
type auditSize struct {
	mu   sync.Mutex
	next uint64 // the seq to scan from for more
	size int64
	mod  time.Time // when the view last grew
}

// viewOf names what c sees of the log: callers with the same name see the
// same lines.
func viewOf(c *kernel.Cred) string {
	switch {
	case c.Admin:
		return "admin"
	case c.Agent != "":
		return "agent\x00" + c.Agent
	}
	return "grants\x00" + strings.Join(c.Grants, "\x00")
}

// size returns the length and time of c's view, scanning what was
// appended since the view was last measured.
func (a *auditLog) size(ctx context.Context, c *kernel.Cred) (int64, time.Time, error) {
	v := viewOf(c)
	a.mu.Lock()
	if a.sizes == nil {
		a.sizes = map[string]*auditSize{}
	}
	s := a.sizes[v]
	if s == nil {
		s = &auditSize{next: 1, mod: a.fs.started}
		a.sizes[v] = s
	}
	a.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := false
	err := a.fs.k.AuditScan(ctx, c, s.next, func(line []byte) error {
		s.size += int64(len(line)) + 1
		if seq := lineSeq(line); seq > 0 {
			s.next = seq + 1
		}
		grew = true
		return nil
	})
	if grew {
		s.mod = time.Now()
	}
	return s.size, s.mod, err
}

func (a *auditLog) fill(ctx context.Context, c *kernel.Cred, at *fuse.Attr) syscall.Errno {
	size, mod, err := a.size(ctx, c)
	if err != nil {
		return errno(err)
	}
	*at = fuse.Attr{Mode: syscall.S_IFREG | 0o444, Nlink: 1, Size: uint64(size)}
	at.SetTimes(&mod, &mod, &mod)
	at.Blocks = (uint64(size) + 511) / 512
	a.fs.setAttrOwner(at)
	return 0
}

func (a *auditLog) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return e
	}
	out.SetTimeout(noCache)
	return a.fill(ctx, c, &out.Attr)
}

func (a *auditLog) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := a.fs.cred(ctx); e != 0 {
		return e
	}
	if mask&(2|1) != 0 {
		return syscall.EACCES
	}
	return 0
}

func (a *auditLog) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return nil, 0, e
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	return &auditHandle{k: a.fs.k, c: c, next: 1}, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
}

// auditChunk is how much of the log one scan adds to a handle's window.
const auditChunk = 256 << 10

type auditHandle struct {
	k Kernel
	c *kernel.Cred

	mu   sync.Mutex
	buf  []byte // the log from offset base on
	base int64
	next uint64 // the seq to scan from for more
	eof  bool
}

func (h *auditHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off < h.base {
		// Sought backwards past the window: start over.
		h.buf, h.base, h.next, h.eof = nil, 0, 1, false
	}
	// Drop what was read; keep the window small.
	if d := off - h.base; d > 0 && d <= int64(len(h.buf)) {
		h.buf = append(h.buf[:0], h.buf[d:]...)
		h.base = off
	}
	if h.eof && off+int64(len(dest)) > h.base+int64(len(h.buf)) {
		h.eof = false // a reader at the end: look for what was appended
	}
	for off+int64(len(dest)) > h.base+int64(len(h.buf)) && !h.eof {
		if err := h.fill(ctx); err != nil {
			return nil, errno(err)
		}
	}
	if off >= h.base+int64(len(h.buf)) {
		return fuse.ReadResultData(nil), 0
	}
	n := copy(dest, h.buf[off-h.base:])
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *auditHandle) fill(ctx context.Context) error {
	added, stopped := 0, false
	err := h.k.AuditScan(ctx, h.c, h.next, func(line []byte) error {
		if stopped {
			return errStop
		}
		h.buf = append(append(h.buf, line...), '\n')
		if seq := lineSeq(line); seq > 0 {
			h.next = seq + 1
		}
		if added += len(line) + 1; added >= auditChunk {
			stopped = true
			return errStop
		}
		return nil
	})
	if stopped {
		return nil
	}
	h.eof = true
	return err
}

type stopError struct{}

func (stopError) Error() string { return "enough for now" }

var errStop error = stopError{}

// lineSeq reads the seq of an entry line ({"type":"audit","seq":N,...}).
func lineSeq(line []byte) uint64 {
	const key = `"seq":`
	i := bytes.Index(line, []byte(key))
	if i < 0 {
		return 0
	}
	j := i + len(key)
	k := j
	for k < len(line) && line[k] >= '0' && line[k] <= '9' {
		k++
	}
	n, _ := strconv.ParseUint(string(line[j:k]), 10, 64)
	return n
}
