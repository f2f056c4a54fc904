package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/serve"
)

// What a client may hold of the daemon (issue 18): a connection that sends
// nothing holds a descriptor and a parked goroutine, not its buffers (they
// go back to a pool while it waits); a request line longer than the read
// buffer holds what it has sent so far, counted against one budget shared
// by every connection; the number of connections is bounded per uid and in
// all, and an idle connection of the same uid makes room for a new one.

// bufSize is the read and write buffer of a connection while it is busy.
const bufSize = 32 << 10

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufSize) }}
)

// budget is the memory that request lines past their connection's read
// buffer may hold in all (limits.max_buffered).
type budget struct {
	mu   sync.Mutex
	used int64
	max  int64
	free chan struct{} // closed and replaced when memory is released
}

func newBudget(max int64) *budget { return &budget{max: max, free: make(chan struct{})} }

// take reserves n bytes, waiting until deadline for others to release
// them. It reports whether it got them.
func (b *budget) take(n int64, deadline time.Time) bool {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return true
		}
		free := b.free
		b.mu.Unlock()
		wait := time.Until(deadline)
		if wait <= 0 || n > b.max {
			return false
		}
		if t == nil {
			t = time.NewTimer(wait)
		}
		select {
		case <-free:
		case <-t.C:
			return false
		}
	}
}

// give releases n bytes.
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.free)
	b.free = make(chan struct{})
	b.mu.Unlock()
}

// inUse is the memory held now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// lineError is a request line refused while it was read; the rest of it
// has been read and dropped, and the connection goes on.
type lineError struct {
	head []byte // the line's first bytes, to recover its id
	err  *proto.Error
}

// readLine returns the next line without its newline. A line that fits in
// the read buffer is the buffer itself (held is 0); a longer one is
// gathered in memory taken from the budget as it grows, held bytes of it,
// which the caller gives back once done with the line. A line longer than
// max, or one the budget cannot hold by the line's deadline, is read to
// its end and dropped: le says why.
func (c *conn) readLine(r *bufio.Reader, maxLine int, deadline time.Time) (line []byte, held int64, le *lineError, err error) {
	b, err := r.ReadSlice('\n')
	if err == nil {
		return b[:len(b)-1], 0, nil, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(b) > 0 && errors.Is(err, io.EOF) {
			return b, 0, nil, nil // last line without newline
		}
		return nil, 0, nil, err
	}
	bud := c.s.buffered
	var buf []byte
	defer func() {
		if le != nil || err != nil {
			bud.give(held)
			held = 0
		}
	}()
	drop := func(perr *proto.Error) (*lineError, error) {
		head := buf
		if len(head) == 0 {
			head = b
		}
		head = append([]byte(nil), head[:min(len(head), 256)]...)
		buf = nil
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = r.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return &lineError{head: head, err: perr}, nil
	}
	for {
		if len(buf)+len(b) > maxLine+1 {
			le, err = drop(proto.Errorf(proto.EMSGSIZE, "request line longer than max_line %d bytes; discarded", maxLine))
			return nil, held, le, err
		}
		if need := len(buf) + len(b); need > cap(buf) {
			// A long line is work too: the collector must run while it
			// grows (the quiescer switches it off after a pause in
			// requests), or the buffers it outgrew, and the lines
			// dropped, are never given back: 16 lines of 20 MB, sent in
			// one write each, held 330 MiB past a budget of 64 (issue 45).
			c.s.quiet.touch()
			// Grow by half, not double: a line costs at most half again
			// what it holds.
			n := min(max(need, cap(buf)+cap(buf)/2, 2*bufSize), maxLine+1)
			if !bud.take(int64(n-cap(buf)), deadline) {
				le, err = drop(proto.Errorf(proto.ENOBUFS, "request line of %d bytes and more refused: the daemon's memory for request lines (limits.max_buffered %d bytes) is held by other connections; retry", need, bud.max))
				return nil, held, le, err
			}
			held += int64(n - cap(buf))
			nb := make([]byte, len(buf), n)
			copy(nb, buf)
			buf = nb
		}
		buf = append(buf, b...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], held, nil, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return buf, held, nil, nil
		default:
			return nil, held, nil, err
		}
		b, err = r.ReadSlice('\n')
	}
}

// waitReadable waits, holding no read buffer, until the connection has
// something to read for the full path (or is closed), or its read
// deadline passes. It reads the first bytes itself, into the connection's
// small primed buffer, rather than peeking: one syscall less per request
// of a sequential client. After the first request it serves the requests
// that run on the reading goroutine right there (serveIdle), and goes on
// waiting without the read that would find the socket empty
// (rawio.Reader.Feed): one syscall less again.
func (c *conn) waitReadable(first bool) error {
	c.primed.init(c)
	if first {
		// The hello wait: its limit is hello_timeout until a request
		// has come, so it ends with the first.
		n, err := c.rio.Read(c.primed.buf[:])
		c.primed.b = c.primed.buf[:n]
		return err
	}
	// serveIdle leaves in c.primed what it did not serve.
	if _, err := c.rio.Feed(c.primed.buf[:], c.feed); err != nil {
		c.primed.b = nil
		return err
	}
	return nil
}

// serveIdle serves b[:n] of the idle wait (c.primed.buf) while the
// connection is idle, if the reading goroutine would serve all of it:
// whole request lines in the shape clients send (fastRequest) of Inline
// ops, and an Alone op as the last with nothing in flight. It reports
// whether it did, and the wait goes on. Otherwise what it did not serve
// is left in c.primed for the full path (a partial line, a request that
// needs its own goroutine, one the decoder must explain), and so is
// everything when the connection was evicted or the daemon is draining.
func (c *conn) serveIdle(n int) bool {
	c.primed.b = c.primed.buf[:n]
	if !c.state.CompareAndSwap(connIdle, connBusy) {
		return false // evicted: it is closed
	}
	p := c.primed.b
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		req, ok := fastRequest(p[:i])
		if !ok {
			break
		}
		h, ok := serve.Lookup(req.Op)
		more := i+1 < len(p)
		if !ok || !h.Inline && !(h.Alone && !more && n < len(c.primed.buf) && c.nflight.Load() == 0) {
			break
		}
		p = p[i+1:]
		c.s.quiet.touch()
		c.icall.c, c.icall.req = c, req
		c.serveInline(c.ctx, h, 0, more)
	}
	served := len(p) == 0
	if !served && len(p) < len(c.primed.b) {
		c.flush() // the replies to the requests before p
	}
	c.primed.b = p
	c.since.Store(time.Now().UnixNano())
	c.state.Store(connIdle)
	return served && !c.s.drainingForRead.Load()
}

// primedReader is the connection as its read buffer sees it: the bytes
// waitReadable read, then the socket.
type primedReader struct {
	c *conn
	b []byte
	// 2 KiB holds a pipelined burst of a few dozen small requests in one
	// read, at 4 MiB for 2,000 idle connections.
	buf [2 << 10]byte
}

func (p *primedReader) init(c *conn) { p.c = c }

func (p *primedReader) Read(b []byte) (int, error) {
	if len(p.b) > 0 {
		n := copy(b, p.b)
		p.b = p.b[n:]
		return n, nil
	}
	return p.c.rio.Read(b)
}

// Connection states, for eviction.
const (
	connBusy    = iota // reading a request
	connIdle           // waiting for the client, nothing read
	connEvicted        // closed to make room for another
)

// admit registers c, making room if its uid or the daemon is at its
// bound by closing the longest idle connection that is over. It returns
// an error for the client when no connection can go.
func (s *Server) admit(c *conn) *proto.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perUID[c.uid] >= s.maxPerUID && !s.evict(c.uid) {
		return proto.Errorf(proto.EUSERS, "uid %d has %d connections open, none of them idle (limits.max_conns_per_uid); close some and retry", c.uid, s.perUID[c.uid])
	}
	if len(s.conns) >= s.maxConns {
		// The uid with the most connections gives one up.
		var top uint32
		for uid, n := range s.perUID {
			if n > s.perUID[top] || s.perUID[top] == 0 {
				top = uid
			}
		}
		if !s.evict(top) && !s.evict(c.uid) {
			return proto.Errorf(proto.EUSERS, "oxiosd has %d connections open, none of them idle (limits.max_conns); retry later", len(s.conns))
		}
	}
	s.conns[c] = struct{}{}
	s.perUID[c.uid]++
	return nil
}

// evict closes the connection of uid that has been idle the longest.
// s.mu is held.
func (s *Server) evict(uid uint32) bool {
	for {
		var victim *conn
		for o := range s.conns {
			if o.uid == uid && o.state.Load() == connIdle && o.nflight.Load() == 0 && (victim == nil || o.since.Load() < victim.since.Load()) {
				victim = o
			}
		}
		if victim == nil {
			return false
		}
		if !victim.state.CompareAndSwap(connIdle, connEvicted) {
			continue // it just woke to read a request: find another
		}
		s.log.Debug("closing an idle connection to make room", "uid", uid)
		victim.nc.CloseRead()
		s.forget(victim)
		return true
	}
}

// forget unregisters c; s.mu is held. It is done once per connection.
func (s *Server) forget(c *conn) {
	if _, ok := s.conns[c]; !ok {
		return
	}
	delete(s.conns, c)
	if s.perUID[c.uid]--; s.perUID[c.uid] <= 0 {
		delete(s.perUID, c.uid)
	}
}

// maxConnsFor bounds want by the descriptors the process may open,
// keeping some for the daemon's own files.
func maxConnsFor(want int) int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY {
		if room := int(rl.Cur) - 256; room < want {
			return max(room, 16)
		}
	}
	return want
}

// timeoutError is what a connection is told when it is closed for
// sending nothing.
func timeoutError(first bool, d time.Duration) *proto.Error {
	if first {
		return proto.Errorf(proto.ETIMEDOUT, "no request within %s of connecting (limits.hello_timeout); closing", d)
	}
	return proto.Errorf(proto.ETIMEDOUT, "connection idle for %s (limits.idle_timeout); closing", d)
}
