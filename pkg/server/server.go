// Package server serves the kernel's syscalls over a Unix socket as JSON
// lines (the protocol of package proto). It owns connections and framing
// only: each request becomes one call of a syscall through its adapter
// (serve.Lookup), which decodes the args and calls the kernel, whose gate
// runs the call. The server has no list of ops and no checks of its own.
package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/rawio"
)

// maxInflight bounds the requests of one connection being served at once;
// past it the server stops reading that connection until one finishes.
const maxInflight = 256

// maxScratch bounds the result buffer a connection keeps between its
// inline calls: a big result's buffer is left to the collector.
const maxScratch = 4 << 10

// Server accepts connections and dispatches their requests.
type Server struct {
	ctx     context.Context // the daemon's: its end ends the followers
	k       *kernel.Kernel
	log     *slog.Logger
	maxLine int

	buffered        *budget
	maxConns        int
	maxPerUID       int
	helloTimeout    time.Duration
	lineTimeout     time.Duration
	idleTimeout     time.Duration // 0: none
	drainingForRead atomic.Bool

	mu       sync.Mutex
	lns      []net.Listener
	conns    map[*conn]struct{}
	perUID   map[uint32]int
	draining bool
	wg       sync.WaitGroup // connections
	quiet    quiescer
}

// New returns a server for k. When ctx ends (the daemon's root context, on
// SIGTERM or SIGINT), the calls that follow until the client leaves
// (events, a followed log, an attach) end; the others drain in Shutdown.
func New(ctx context.Context, k *kernel.Kernel, log *slog.Logger) *Server {
	l := k.Config().Limits
	return &Server{ctx: ctx, k: k, log: log, maxLine: int(l.MaxLine), conns: map[*conn]struct{}{}, perUID: map[uint32]int{},
		buffered: newBudget(int64(l.MaxBuffered)), maxConns: maxConnsFor(l.MaxConns), maxPerUID: l.MaxConnsPerUID,
		helloTimeout: time.Duration(l.HelloTimeout), lineTimeout: time.Duration(l.LineTimeout), idleTimeout: time.Duration(l.IdleTimeout)}
}

// Serve accepts connections on ln until Shutdown. It returns nil after
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			draining := s.draining
			s.mu.Unlock()
			if draining {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				// A run's socket, closed when the run ended.
				s.mu.Lock()
				for i, l := range s.lns {
					if l == ln {
						s.lns = append(s.lns[:i], s.lns[i+1:]...)
						break
					}
				}
				s.mu.Unlock()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
				// Out of fds: back off instead of spinning.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept failed; retrying", "err", err, "in", delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		uc, ok := nc.(*net.UnixConn)
		if !ok {
			nc.Close()
			continue
		}
		rc, err := uc.SyscallConn()
		if err != nil {
			nc.Close()
			continue
		}
		c := &conn{s: s, nc: uc, rio: rawio.NewReader(rc), wio: rawio.NewWriter(rc)}
		s.mu.Lock()
		if s.draining {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.wg.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

// Shutdown stops accepting, stops reading new requests, waits for the
// requests in flight to be answered (or ctx to end) and closes every
// connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.quiet.stop()
	s.mu.Lock()
	s.draining = true
	s.drainingForRead.Store(true)
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		// Wake the reader; it stops taking requests and waits for its
		// in-flight ones before closing.
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// conn is one client connection.
type conn struct {
	s    *Server
	nc   *net.UnixConn
	cred *kernel.Cred

	wmu  sync.Mutex
	w    *bufio.Writer
	werr error
	ibuf []byte // stream item scratch, under wmu

	icall   call   // the inline request being served, on the reading goroutine
	scratch []byte // the inline call's result buffer (serve.Request.Buf)

	// primed holds what the idle wait read before the connection had a
	// read buffer; the buffer reads it first.
	primed primedReader

	inflight sync.WaitGroup
	nflight  atomic.Int32 // requests in flight
	sem      chan struct{}

	uid   uint32
	state atomic.Int32 // connBusy, connIdle, connEvicted
	since atomic.Int64 // when it last became idle (unix nanos)
	armed time.Time    // the read deadline set (setReadDeadline)
	// rio is the socket as the read buffer reads it (the reading
	// goroutine's), wio as the write buffer writes it (under wmu): with
	// raw system calls (see package rawio).
	rio *rawio.Reader
	wio *rawio.Writer
	r   *bufio.Reader // nil while idle
	// follow ends when the client stops sending (EOF, or the daemon stops
	// reading): streams that would otherwise run forever (tail -f) watch
	// it, since nothing else tells a waiting stream that its reader left.
	follow context.Context
	// ctx is the requests' context (serve's), for the requests served
	// while idle (serveIdle, made once as feed).
	ctx  context.Context
	feed func(n int) bool
}

func (c *conn) serve() {
	s := c.s
	defer func() {
		s.mu.Lock()
		s.forget(c)
		s.mu.Unlock()
		c.nc.Close()
		c.putReader()
		c.wmu.Lock()
		c.putWriter()
		c.wmu.Unlock()
		s.wg.Done()
	}()
	c.sem = make(chan struct{}, maxInflight)

	uc, err := peerCred(c.nc)
	if err != nil {
		s.log.Warn("no peer credentials; closing", "err", err)
		return
	}
	c.uid = uc.Uid
	c.state.Store(connBusy)
	if perr := s.admit(c); perr != nil {
		c.sendError(0, perr)
		c.flush()
		s.log.Warn("connection refused", "uid", uc.Uid, "pid", uc.Pid, "err", perr)
		return
	}
	cred, err := s.k.Identify(uc.Uid, uc.Gid, uc.Pid)
	if err != nil {
		c.sendError(0, err)
		c.flush()
		s.log.Info("connection refused", "uid", uc.Uid, "pid", uc.Pid, "err", err)
		return
	}
	c.cred = cred
	h := s.k.Hello(cred)
	c.send(appendHello(nil, &h))
	c.flush()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follow, stopFollow := context.WithCancel(ctx)
	defer context.AfterFunc(s.ctx, stopFollow)()
	c.follow = follow
	c.ctx, c.feed = ctx, c.serveIdle
	first := true
	for {
		if c.r == nil || c.r.Buffered() == 0 {
			if !c.idle(first) {
				break
			}
			first = false
		}
		var deadline time.Time
		if b, _ := c.r.Peek(c.r.Buffered()); bytes.IndexByte(b, '\n') < 0 && bytes.IndexByte(c.primed.b, '\n') < 0 {
			// The line is not all here: it has line_timeout to arrive.
			deadline = time.Now().Add(s.lineTimeout)
			c.setReadDeadline(deadline)
			if s.drainingForRead.Load() {
				break
			}
		}
		line, held, le, err := c.readLine(c.r, s.maxLine, deadline)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && !s.drainingForRead.Load() {
				c.sendError(0, proto.Errorf(proto.ETIMEDOUT, "request line not complete within %s (limits.line_timeout); closing", s.lineTimeout))
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("read failed", "err", err)
			}
			break
		}
		if le != nil {
			c.sendError(peekID(le.head), le.err)
			c.flushIf(c.r)
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			s.buffered.give(held)
			continue
		}
		c.dispatch(ctx, line, held, c.r)
	}
	// Stop reading; end follow streams, answer what is in flight, then
	// close. cancel() is deferred: other streams in flight end when the
	// connection does.
	stopFollow()
	// A client that shut its side for writing still reads its answers;
	// one that is gone (closed, killed) reads nothing: what it waits for
	// (an approval, an exec) is cancelled.
	stop := make(chan struct{})
	if c.nflight.Load() > 0 {
		go c.watchHangup(cancel, stop)
	}
	c.inflight.Wait()
	close(stop)
	c.flush()
}

// watchHangup calls gone once the client has closed the connection both
// ways (POLLHUP: it has closed it or died; a read of EOF alone may be a
// shutdown of its writing side only, and it may still read), or returns
// when stop is closed. It looks every hangupPoll, without blocking a
// thread: many half-closed connections cost a timer each.
func (c *conn) watchHangup(gone context.CancelFunc, stop <-chan struct{}) {
	rc, err := c.nc.SyscallConn()
	if err != nil {
		return
	}
	t := time.NewTicker(hangupPoll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		hup := false
		rc.Control(func(fd uintptr) {
			fds := []unix.PollFd{{Fd: int32(fd)}}
			if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
				hup = fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
			}
		})
		if hup {
			gone()
			return
		}
	}
}

// hangupPoll is how often watchHangup looks whether a client that
// stopped sending is gone.
const hangupPoll = 200 * time.Millisecond

// idle waits, holding no buffers, for the client's next request: at most
// hello_timeout for the first, idle_timeout for later ones while nothing
// is in flight. It reports false when the connection is to close.
func (c *conn) idle(first bool) bool {
	s := c.s
	c.putReader()
	now := time.Now()
	c.since.Store(now.UnixNano())
	c.state.Store(connIdle)
	limit := s.idleTimeout
	if first {
		limit = s.helloTimeout
	}
	due := now.Add(limit)
	for {
		c.armIdle(due, limit)
		if s.drainingForRead.Load() {
			return false
		}
		err := c.waitReadable(first)
		if errors.Is(err, os.ErrDeadlineExceeded) && !s.drainingForRead.Load() {
			// Requests served in the wait (serveIdle) moved its start.
			if d := time.Unix(0, c.since.Load()).Add(limit); d.After(due) {
				due = d
			}
			if time.Now().Before(due) {
				c.armed = time.Time{} // passed: armIdle sets due
				continue              // the deadline was an earlier wait's (armIdle)
			}
			if c.nflight.Load() > 0 {
				due = time.Now().Add(limit)
				continue // a stream is still running for it
			}
			if !c.state.CompareAndSwap(connIdle, connBusy) {
				return false
			}
			c.sendError(0, timeoutError(first, limit))
			c.flush()
			s.log.Debug("closing a connection that sends nothing", "uid", c.uid, "after", limit)
			return false
		}
		if err == nil && len(c.primed.b) == 0 {
			continue // serveIdle served all and stopped the wait: the daemon drains
		}
		if errors.Is(err, io.EOF) {
			err = nil // the read buffer finds it again
		}
		if err != nil || !c.state.CompareAndSwap(connIdle, connBusy) {
			return false
		}
		c.r = readers.Get().(*bufio.Reader)
		c.r.Reset(&c.primed)
		return true
	}
}

// armIdle sets the read deadline for an idle wait that ends at due (none
// when limit is 0). Setting a deadline costs about as much as serving a
// small request, so a deadline already set is kept when it is no later
// than due and early by less than an eighth of the limit: a client that
// sends requests one after the other sets it about once in limit/8. The
// wait that such a deadline ends early is taken up again (idle).
func (c *conn) armIdle(due time.Time, limit time.Duration) {
	if limit <= 0 {
		if !c.armed.IsZero() {
			c.setReadDeadline(time.Time{})
		}
		return
	}
	if !c.armed.IsZero() && !c.armed.After(due) && due.Sub(c.armed) < limit/8 {
		return
	}
	c.setReadDeadline(due)
}

// setReadDeadline sets the connection's read deadline, and remembers it
// for armIdle; only the reading goroutine calls it (Shutdown's wake-up
// does not go through it, and is seen by drainingForRead).
func (c *conn) setReadDeadline(t time.Time) {
	c.nc.SetReadDeadline(t)
	c.armed = t
}

// putReader returns the read buffer to the pool (it must be empty).
func (c *conn) putReader() {
	if c.r != nil {
		c.r.Reset(nil)
		readers.Put(c.r)
		c.r = nil
	}
}

// writer returns the connection's write buffer, taking one from the pool
// if it has none; c.wmu is held.
func (c *conn) writer() *bufio.Writer {
	if c.w == nil {
		c.w = writers.Get().(*bufio.Writer)
		c.w.Reset(c.wio)
	}
	return c.w
}

// putWriter returns an empty write buffer to the pool; c.wmu is held.
func (c *conn) putWriter() {
	if c.w != nil && c.w.Buffered() == 0 {
		c.w.Reset(nil)
		writers.Put(c.w)
		c.w = nil
	}
}

// flushLocked writes out what is buffered and gives the buffer back;
// c.wmu is held.
func (c *conn) flushLocked() {
	if c.werr == nil && c.w != nil {
		c.werr = c.w.Flush()
	}
	if c.werr == nil {
		c.putWriter()
	}
}

// flushIf flushes replies unless more requests are already buffered: a
// pipelining client gets its replies batched into fewer writes.
func (c *conn) flushIf(r *bufio.Reader) {
	if r.Buffered() == 0 {
		c.flush()
	}
}

func (c *conn) flush() {
	c.wmu.Lock()
	c.flushLocked()
	c.wmu.Unlock()
}

// send queues one reply line (without its newline) for the client.
func (c *conn) send(b []byte) {
	c.wmu.Lock()
	if c.werr == nil {
		w := c.writer()
		w.Write(b)
		c.werr = w.WriteByte('\n')
	}
	c.wmu.Unlock()
}

func (c *conn) sendError(id uint64, err error) {
	c.send(appendError(nil, id, err))
}

func peerCred(nc *net.UnixConn) (*unix.Ucred, error) {
	rc, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var uc *unix.Ucred
	var cerr error
	err = rc.Control(func(fd uintptr) {
		uc, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if cerr == nil {
			// An accepted socket inherits SO_PASSCRED from its listener
			// (systemd's PassCredentials=). The daemon takes the peer's
			// credentials from SO_PEERCRED, and a read of a socket that
			// has it set stops where the writer changes, which the idle
			// wait (rawio.Reader.Feed) must not see.
			cerr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PASSCRED, 0)
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	return uc, nil
}
