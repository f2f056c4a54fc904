package vfs

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// AuditLog is /audit/log: the entry lines the caller may see (the admin:
// all), one per line, oldest first, as `ox-audit log` prints them. The
// log can be large, so it is not snapshot at open: reads scan it on
// demand from the position they reached (audit.log's AuditScan), and a
// read past what a handle has seen looks again, so a reader at the end
// gets what was appended since.
//
// Its size is the length of the caller's view, so that tail -f and less
// +F, which poll fstat and read when the size grows (and start over when
// it shrinks), follow it. Every view is kept as a running count, so a
// stat scans only what was appended since the last one; the adapter
// reads it around the page cache.
type AuditLog struct {
	l *Layer

	mu    sync.Mutex
	sizes map[string]*auditSize // per view (viewOf)
}

// AuditLog is the layer's /audit/log.
func (l *Layer) AuditLog() *AuditLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.audit == nil {
		l.audit = &AuditLog{l: l, sizes: map[string]*auditSize{}}
	}
	return l.audit
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

// Stat is what stat shows of the log to c: the length of its view, and
// when it last grew.
func (a *AuditLog) Stat(ctx context.Context, c *kernel.Cred) (Attr, error) {
	v := viewOf(c)
	a.mu.Lock()
	s := a.sizes[v]
	if s == nil {
		s = &auditSize{next: 1, mod: a.l.started}
		a.sizes[v] = s
	}
	a.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	grew := false
	err := a.l.k.AuditScan(ctx, c, s.next, func(line []byte) error {
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
	return Attr{Mode: 0o444, Size: s.size, Mtime: s.mod}, err
}

// Open opens the log for c to read; a write is EROFS.
func (a *AuditLog) Open(c *kernel.Cred, flags int) (*AuditHandle, error) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, proto.Errorf(proto.EROFS, "the audit log is read-only")
	}
	return &AuditHandle{k: a.l.k, c: c, next: 1}, nil
}

// auditChunk is how much of the log one scan adds to a handle's window.
const auditChunk = 256 << 10

// AuditHandle is an open log: a window of it, from where reads reached.
type AuditHandle struct {
	k Kernel
	c *kernel.Cred

	mu   sync.Mutex
	buf  []byte // the log from offset base on
	base int64
	next uint64 // the seq to scan from for more
	eof  bool
}

// Read copies the log at off into dest. A read before the window starts
// over from the first entry; one past what was seen looks for more.
func (h *AuditHandle) Read(ctx context.Context, dest []byte, off int64) (int, error) {
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
			return 0, err
		}
	}
	if off >= h.base+int64(len(h.buf)) {
		return 0, nil
	}
	return copy(dest, h.buf[off-h.base:]), nil
}

func (h *AuditHandle) fill(ctx context.Context) error {
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
