// Package client is the typed client of oxiosd that every ox-* command
// uses. A Client is one connection; it is safe for concurrent use, and
// concurrent calls are pipelined on the connection.
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// ErrUnreachable wraps failures to reach the daemon at all: no socket, or
// nobody listening. Commands exit 69 on it.
var ErrUnreachable = errors.New("oxiosd unreachable")

// ErrOutcomeUnknown marks a request whose connection was lost after it was
// sent and before its reply came (it comes with ErrUnreachable: exit 69):
// the daemon may or may not have applied it.
var ErrOutcomeUnknown = errors.New("outcome unknown")

// Client is a connection to oxiosd.
//
// There is no reader goroutine: a caller waiting for its reply reads the
// connection itself (the leader) and queues lines for other callers, and
// hands the leadership on when it is done. A sequential caller thus gets
// its reply with no goroutine hop, and concurrent callers pipeline.
type Client struct {
	nc     net.Conn
	hello  proto.Hello
	socket string
	// last is when the latest call started (c.mu): a connection idle for
	// a while may have been closed by the daemon (limits.hello_timeout,
	// idle_timeout), and is checked, and dialled again, before the next.
	last time.Time

	// Writes are combined: callers append to out, and the one that finds
	// nobody flushing writes everything queued, round after round, so
	// concurrent callers share write syscalls with no added delay.
	wmu      sync.Mutex
	out      []byte
	spare    []byte
	flushing bool
	werr     error

	rmu sync.Mutex // held by the leader while it reads
	r   *bufio.Reader

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	waiting map[*call]struct{} // calls blocked waiting for a reply
	err     error              // set when the connection is dead
	closed  bool               // Close was called: no dialling again
}

// call is one request in flight. The read loop queues its replies without
// ever blocking, so a stream's consumer may itself make calls on the same
// client (list, then load each key) without deadlocking the connection.
type call struct {
	mu     sync.Mutex
	queue  []*proto.Reply // items, then the final reply
	closed bool           // the connection died
	ready  chan struct{}  // cap 1: something was queued
}

func (cl *call) push(rep *proto.Reply) {
	cl.mu.Lock()
	cl.queue = append(cl.queue, rep)
	cl.mu.Unlock()
	select {
	case cl.ready <- struct{}{}:
	default:
	}
}

func (cl *call) close() {
	cl.mu.Lock()
	cl.closed = true
	cl.mu.Unlock()
	select {
	case cl.ready <- struct{}{}:
	default:
	}
}

// pop returns the next reply, or nil and whether the connection died.
func (cl *call) pop() (*proto.Reply, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if len(cl.queue) > 0 {
		rep := cl.queue[0]
		cl.queue[0] = nil
		cl.queue = cl.queue[1:]
		return rep, false
	}
	return nil, cl.closed
}

// Dial connects to the daemon's socket and reads its hello.
func Dial(ctx context.Context, socket string) (*Client, error) {
	nc, r, hello, err := dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, r: r, hello: *hello, socket: socket, last: time.Now(), pending: map[uint64]*call{}, waiting: map[*call]struct{}{}}, nil
}

// dial connects to socket and reads the daemon's hello.
func dial(ctx context.Context, socket string) (net.Conn, *bufio.Reader, *proto.Hello, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", socket)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM) {
		return nil, nil, nil, proto.Errorf(proto.EACCES, "no permission to connect to %s (the admin can grant a group with socket_group in oxios.toml)", socket)
	}
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, nil, nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, socket, errors.Unwrap(err))
		}
		var oe *net.OpError
		if errors.As(err, &oe) && !errors.Is(err, syscall.EACCES) {
			return nil, nil, nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, socket, oe.Err)
		}
		return nil, nil, nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, socket, err)
	}
	r := bufio.NewReaderSize(nc, 64<<10)
	// The hello is the first line; a refused peer gets an error line instead.
	if dl, ok := ctx.Deadline(); ok {
		nc.SetReadDeadline(dl)
	} else {
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	line, err := readLine(r)
	nc.SetReadDeadline(time.Time{})
	if err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("%w: %s: no hello: %v", ErrUnreachable, socket, err)
	}
	var rep proto.Reply
	if err := json.Unmarshal(line, &rep); err != nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("%s: not an oxiosd socket (bad hello: %v)", socket, err)
	}
	if rep.Error != nil {
		nc.Close()
		if rep.Error.Code == proto.EUSERS || rep.Error.Code == proto.ETIMEDOUT {
			// The daemon is there but takes no more connections now.
			return nil, nil, nil, fmt.Errorf("%w: %w", ErrUnreachable, rep.Error)
		}
		return nil, nil, nil, rep.Error
	}
	if rep.Hello == nil {
		nc.Close()
		return nil, nil, nil, fmt.Errorf("%s: not an oxiosd socket (no hello)", socket)
	}
	if rep.Hello.Proto != proto.Version {
		nc.Close()
		return nil, nil, nil, proto.Errorf(proto.EPROTO, "oxiosd speaks protocol %d, this client %d: upgrade the older one", rep.Hello.Proto, proto.Version)
	}
	return nc, r, rep.Hello, nil
}

// Hello returns the daemon's greeting: its version, limits, and who it
// takes this client to be.
func (c *Client) Hello() proto.Hello { return c.hello }

// Close closes the connection; calls in flight fail.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	err := c.nc.Close()
	c.die(fmt.Errorf("%w: connection closed", ErrUnreachable))
	return err
}

func readLine(r *bufio.Reader) ([]byte, error) {
	b, err := r.ReadSlice('\n')
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	buf := append([]byte(nil), b...)
	for errors.Is(err, bufio.ErrBufferFull) {
		b, err = r.ReadSlice('\n')
		buf = append(buf, b...)
	}
	if err != nil {
		return nil, err
	}
	return buf, nil
}

// readOne reads one line as the leader and queues it for its call. It
// returns false when the connection is dead.
func (c *Client) readOne() bool {
	line, err := readLine(c.r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: connection closed", ErrUnreachable)
		} else {
			// Reset (ECONNRESET), or any other failure to read: the daemon
			// is gone as far as this connection can tell.
			err = fmt.Errorf("%w: connection lost: %v", ErrUnreachable, err)
		}
		c.die(err)
		return false
	}
	rep, ok := fastReply(line)
	if !ok {
		rep = new(proto.Reply)
		if jerr := json.Unmarshal(line, rep); jerr != nil {
			c.die(fmt.Errorf("bad reply from oxiosd: %v", jerr))
			return false
		}
	}
	c.mu.Lock()
	cl := c.pending[rep.ID]
	if cl != nil && rep.Item == nil {
		delete(c.pending, rep.ID)
	}
	c.mu.Unlock()
	switch {
	case cl != nil:
		cl.push(rep)
	case rep.ID == 0 && rep.Error != nil:
		// An error the daemon could not tie to a request: the connection
		// is being refused or closed.
		c.die(rep.Error)
		return false
	}
	return true
}

// die marks the connection dead and wakes every call.
func (c *Client) die(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pend := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, cl := range pend {
		cl.close()
	}
}

// handOff wakes a waiting call if nobody is reading.
func (c *Client) handOff() {
	if c.rmu.TryLock() {
		c.rmu.Unlock()
		c.wakeOne()
	}
}

// wakeOne hands the leadership on: one waiting call retries reading.
func (c *Client) wakeOne() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cl := range c.waiting {
		select {
		case cl.ready <- struct{}{}:
		default:
		}
		return
	}
}

func (c *Client) setWaiting(cl *call, on bool) {
	c.mu.Lock()
	if on {
		c.waiting[cl] = struct{}{}
	} else {
		delete(c.waiting, cl)
	}
	c.mu.Unlock()
}

// notSentError is a write that failed before the socket took a byte of
// it: the daemon cannot have read any of the request.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// start sends a request and returns its call. A request that could not be
// sent at all, on a connection that had no other call in flight, went
// nowhere (the daemon had closed the connection: to make room at
// limits.max_conns_per_uid for a newer one, at idle_timeout, or by a
// restart): it is sent once more on a new connection, so a client idle for
// less than the second revive waits for does not fail for nothing.
func (c *Client) start(op string, args any) (*call, uint64, error) {
	cl, id, err := c.start1(op, args)
	var ns *notSentError
	if err != nil && errors.As(err, &ns) {
		c.mu.Lock()
		alone := len(c.pending) == 0
		c.mu.Unlock()
		if alone {
			return c.start1(op, args)
		}
	}
	return cl, id, err
}

func (c *Client) start1(op string, args any) (*call, uint64, error) {
	var raw []byte
	var err error
	if !handEncoded(args) {
		raw, err = encodeArgs(args)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: encoding args: %w", op, err)
		}
	}
	cl := &call{ready: make(chan struct{}, 1)}
	c.mu.Lock()
	if len(c.pending) == 0 && (c.err != nil || time.Since(c.last) > time.Second) {
		c.revive()
	}
	c.last = time.Now()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, 0, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()

	c.wmu.Lock()
	if c.werr != nil {
		err = c.werr
		c.wmu.Unlock()
	} else {
		b := append(c.out, `{"id":`...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, `,"op":`...)
		b = proto.AppendString(b, op)
		b = append(b, `,"args":`...)
		if raw != nil {
			b = append(b, raw...)
		} else {
			b, _ = appendArgs(b, args)
		}
		c.out = append(b, '}', '\n')
		if c.flushing {
			c.wmu.Unlock() // the flusher takes our line in its next round
		} else {
			c.flushing = true
			err = c.flush() // unlocks
		}
	}
	if err != nil {
		c.mu.Lock()
		if c.pending != nil {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		return nil, 0, fmt.Errorf("%w: sending %s: %w", ErrUnreachable, op, err)
	}
	return cl, id, nil
}

// revive dials the daemon again when the connection, with no call in
// flight, was closed by it: after limits.hello_timeout or idle_timeout of
// silence (a command that reads a slow pipe before its first request, a
// runner waiting on its model), or by a restart of the daemon. No request
// is lost or repeated: none was in flight. c.mu is held.
func (c *Client) revive() {
	if c.socket == "" || c.closed || !c.rmu.TryLock() {
		return
	}
	defer c.rmu.Unlock()
	if c.err == nil && !c.closedByPeer() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, r, hello, err := dial(ctx, c.socket)
	if err != nil {
		return // the call fails with the dead connection's error
	}
	c.wmu.Lock()
	c.nc.Close()
	c.nc, c.r, c.hello = nc, r, *hello
	c.werr, c.out, c.flushing = nil, c.out[:0], false
	c.wmu.Unlock()
	c.err = nil
	c.pending = map[uint64]*call{}
}

// closedByPeer reports whether the daemon has closed the idle connection
// or said it would: a line nobody asked for (its closing notice) or EOF
// is waiting to be read. rmu is held.
func (c *Client) closedByPeer() bool {
	if c.r.Buffered() > 0 {
		return true
	}
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	// A peek that does not wait (a read deadline in the past would not
	// even try the socket).
	closed := false
	var b [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n > 0 || (n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR)
		return true
	})
	return closed
}

// flush writes what is queued until nothing is; c.wmu is held on entry
// and released on return. A write error kills the connection: the lines
// in it belong to callers that have already returned from start.
func (c *Client) flush() error {
	for len(c.out) > 0 {
		buf := c.out
		c.out = c.spare[:0]
		c.wmu.Unlock()
		n, err := c.nc.Write(buf)
		if err != nil && n == 0 {
			err = &notSentError{err}
		}
		c.wmu.Lock()
		if cap(buf) <= 1<<20 {
			c.spare = buf[:0] // keep small buffers, not a big value's
		} else {
			// The old spare is c.out now: handing it out again would let
			// the next round's appends overwrite the line being written.
			c.spare = nil
		}
		if err != nil {
			c.werr = err
			c.flushing = false
			c.wmu.Unlock()
			c.die(fmt.Errorf("%w: writing: %v", ErrUnreachable, err))
			return err
		}
	}
	c.flushing = false
	c.wmu.Unlock()
	return nil
}

// next waits for the call's next line, reading the connection itself when
// no other caller is.
func (c *Client) next(ctx context.Context, cl *call) (*proto.Reply, error) {
	// Whoever leaves with no leader reading passes the leadership on: the
	// wake-up it was handed may have been meant for a waiting caller.
	defer c.handOff()
	for {
		if rep, dead := cl.pop(); rep != nil || dead {
			if rep != nil {
				return rep, nil
			}
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			if errors.Is(err, ErrUnreachable) && ctx.Err() == nil {
				err = fmt.Errorf("%w (%w: the connection was lost after the request was sent, so it may or may not have been applied; check before retrying)", err, ErrOutcomeUnknown)
			}
			return nil, err
		}
		// Registered before trying the lock: a leader that unlocks after our
		// failed try finds us in wakeOne; one that unlocked before lets the
		// try succeed.
		c.setWaiting(cl, true)
		if c.rmu.TryLock() {
			c.setWaiting(cl, false)
			// Our reply may have been queued while we took the lock.
			if rep, _ := cl.pop(); rep != nil {
				c.rmu.Unlock()
				return rep, nil
			}
			// Reading cannot watch ctx: a cancelled ctx ends the read with
			// a deadline, and the connection with it.
			if ctx.Done() == nil {
				c.readOne() // a ctx that never ends: nothing to watch
			} else {
				stop := context.AfterFunc(ctx, func() { c.nc.SetReadDeadline(time.Unix(1, 0)) })
				c.readOne()
				stop()
			}
			c.rmu.Unlock()
			if rep, _ := cl.pop(); rep != nil {
				return rep, nil
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		select {
		case <-cl.ready:
			c.setWaiting(cl, false)
		case <-ctx.Done():
			c.setWaiting(cl, false)
			return nil, ctx.Err()
		}
	}
}

// Call sends op with args and decodes the result into result (which may be
// nil). A refusal by the daemon is returned as a *proto.Error.
func (c *Client) Call(ctx context.Context, op string, args, result any) error {
	cl, _, err := c.start(op, args)
	if err != nil {
		return err
	}
	for {
		rep, err := c.next(ctx, cl)
		if err != nil {
			return err
		}
		if rep.Item != nil {
			continue // a stream op called without a handler: drop items
		}
		return finish(rep, result)
	}
}

// Stream sends a streaming op and calls fn with each item until the final
// reply. If fn fails, Stream returns its error (remaining items are read
// and dropped).
func (c *Client) Stream(ctx context.Context, op string, args any, fn func(item json.RawMessage) error) error {
	return c.StreamResult(ctx, op, args, fn, nil)
}

// StreamResult is Stream for an op whose final reply carries a result
// too: it is decoded into result (if not nil).
func (c *Client) StreamResult(ctx context.Context, op string, args any, fn func(item json.RawMessage) error, result any) error {
	cl, _, err := c.start(op, args)
	if err != nil {
		return err
	}
	var ferr error
	for {
		rep, err := c.next(ctx, cl)
		if err != nil {
			return err
		}
		if rep.Item != nil {
			if ferr == nil {
				ferr = fn(rep.Item)
			}
			continue
		}
		if err := finish(rep, result); err != nil {
			return err
		}
		return ferr
	}
}

func finish(rep *proto.Reply, result any) error {
	if !rep.OK {
		if rep.Error == nil {
			return proto.Errorf(proto.EIO, "reply without ok or error")
		}
		return rep.Error
	}
	if result != nil && rep.Result != nil {
		if r, ok := result.(*proto.StateRecord); ok {
			if proto.ParseStateRecord(rep.Result, r) {
				return nil
			}
			*r = proto.StateRecord{}
		}
		if err := json.Unmarshal(rep.Result, result); err != nil {
			return fmt.Errorf("decoding result: %w", err)
		}
	}
	return nil
}
