// Package server serves the kernel's syscalls over a Unix socket as JSON
// lines (the protocol of package proto). It owns connections and framing
// only: each request becomes one kernel method call.
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
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// maxInflight bounds the requests of one connection being served at once;
// past it the server stops reading that connection until one finishes.
const maxInflight = 256

// Server accepts connections and dispatches their requests.
type Server struct {
	k       *kernel.Kernel
	log     *slog.Logger
	maxLine int

	mu       sync.Mutex
	lns      []net.Listener
	conns    map[*conn]struct{}
	draining bool
	wg       sync.WaitGroup // connections
	quiet    quiescer
}

// New returns a server for k.
func New(k *kernel.Kernel, log *slog.Logger) *Server {
	return &Server{k: k, log: log, maxLine: int(k.Config().Limits.MaxLine), conns: map[*conn]struct{}{}}
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
		c := &conn{s: s, nc: uc}
		s.mu.Lock()
		if s.draining {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = struct{}{}
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

	inflight sync.WaitGroup
	sem      chan struct{}
	// follow ends when the client stops sending (EOF, or the daemon stops
	// reading): streams that would otherwise run forever (tail -f) watch
	// it, since nothing else tells a waiting stream that its reader left.
	follow context.Context
}

func (c *conn) serve() {
	s := c.s
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.nc.Close()
		s.wg.Done()
	}()
	c.w = bufio.NewWriterSize(c.nc, 64<<10)
	c.sem = make(chan struct{}, maxInflight)

	uc, err := peerCred(c.nc)
	if err != nil {
		s.log.Warn("no peer credentials; closing", "err", err)
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

	r := bufio.NewReaderSize(c.nc, 64<<10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	follow, stopFollow := context.WithCancel(ctx)
	c.follow = follow
	for {
		line, tooLong, err := readLine(r, s.maxLine)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("read failed", "err", err)
			}
			break
		}
		if tooLong {
			c.sendError(peekID(line), proto.Errorf(proto.EMSGSIZE, "request line longer than max_line %d bytes; discarded", s.maxLine))
			c.flushIf(r)
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		c.dispatch(ctx, line, r)
	}
	// Stop reading; end follow streams, answer what is in flight, then
	// close. cancel() is deferred: other streams in flight end when the
	// connection does.
	stopFollow()
	c.inflight.Wait()
	c.flush()
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
	if c.werr == nil {
		c.werr = c.w.Flush()
	}
	c.wmu.Unlock()
}

// send queues one reply line (without its newline) for the client.
func (c *conn) send(b []byte) {
	c.wmu.Lock()
	if c.werr == nil {
		c.w.Write(b)
		c.werr = c.w.WriteByte('\n')
	}
	c.wmu.Unlock()
}

func (c *conn) sendError(id uint64, err error) {
	c.send(appendError(nil, id, err))
}

// readLine returns the next line without its newline. A line longer than
// max is consumed to its end and reported with tooLong (and its first
// bytes, to recover the id).
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	b, err := r.ReadSlice('\n')
	if err == nil {
		return b[:len(b)-1], false, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(b) > 0 && errors.Is(err, io.EOF) {
			return b, false, nil // last line without newline
		}
		return nil, false, err
	}
	buf := append([]byte(nil), b...)
	for {
		b, err = r.ReadSlice('\n')
		if len(buf)+len(b) > max+1 {
			head := buf
			if len(head) > 256 {
				head = head[:256]
			}
			head = append([]byte(nil), head...)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, false, err
			}
			return head, true, nil
		}
		buf = append(buf, b...)
		switch {
		case err == nil:
			return buf[:len(buf)-1], false, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(buf) > 0:
			return buf, false, nil
		default:
			return nil, false, err
		}
	}
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
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", err)
	}
	return uc, nil
}
