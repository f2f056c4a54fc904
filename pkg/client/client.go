// Package client is the typed client of oxiosd that every ox-* command
// uses. A Client is one connection; it is safe for concurrent use, and
// concurrent calls are pipelined on the connection.
package client

import (
	"bufio"
	"bytes"
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
	"github.com/oxios/oxios/pkg/rawio"
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
// connection itself (the leader), hands every reply it finds buffered to
// its caller, and hands the leadership on when it has its own. A
// sequential caller thus gets its reply with no goroutine hop, and
// concurrent callers pipeline: one read syscall serves as many replies as
// came, and one write as many requests as were queued.
type Client struct {
	nc     net.Conn
	ncw    io.Writer // nc, written with raw system calls (rawWriter)
	hello  proto.Hello
	socket string

	// Writes are combined: callers append to out, and the one that finds
	// nobody flushing writes everything queued, round after round, so
	// concurrent callers share write syscalls. The only wait added is
	// for callers already woken by their replies to run (see woken).
	wmu      sync.Mutex
	out      []byte
	spare    []byte
	flushing bool
	werr     error

	r     *bufio.Reader // read by the leader only
	batch []proto.Reply // the leader's replies read in one go

	mu sync.Mutex
	// last is when the latest call started with none in flight: a
	// connection idle for a while may have been closed by the daemon
	// (limits.hello_timeout, idle_timeout), and is checked, and dialled
	// again, before the next.
	last    time.Time
	nextID  uint64
	pending map[uint64]*call
	reading bool    // a caller (the leader) is reading the connection
	waiting []*call // calls blocked for a reply, none queued yet
	// woken counts the callers woken by a reply that have not yet left
	// next. While there are any, a new request is only queued, until
	// the queued ones make a group (groupFull): the caller whose request
	// fills it writes them, and the last woken caller to leave writes
	// what is queued then. So the callers of one batch of replies send
	// their next requests in a few writes (and the daemon reads them in
	// a few) instead of one write each.
	woken int
	// deferred: requests are queued for the last woken caller to write;
	// ndeferred of them since the last write, of a group of group.
	deferred  bool
	ndeferred int
	group     int
	err       error // set when the connection is dead
	closed    bool  // Close was called: no dialling again
}

// groupFull reports whether n more requests, queued while woken callers
// are about to send theirs, fill the group that is written at once; c.mu
// is held. A group is a quarter of the callers woken (at least 2). One
// write for all of them kept the daemon idle while they ran and them
// idle while it served: the round trip was the sum of the two. In groups,
// the daemon serves the first while the others are still being sent,
// and their replies come back in groups too. 16 callers on one client
// loading 100-byte values from oxiosd: 131-135k calls/s in one write,
// 198-257k/s in groups of 4, with 4.0-4.9 us of the client's CPU a call
// instead of 6.0-6.5 (8 callers: 73-74k/s, 109-116k/s in groups of 2;
// 64: 424-439k/s, 403-417k/s in groups of 16).
func (c *Client) groupFull(n int) bool {
	if c.ndeferred == 0 {
		// The first since the last write: the callers woken are this
		// one, who has left, and the others.
		c.group = max(2, (c.woken+1)/4)
	}
	return c.ndeferred+n >= c.group
}

// call is one request in flight. The read loop queues its replies without
// ever blocking, so a stream's consumer may itself make calls on the same
// client (list, then load each key) without deadlocking the connection.
// Its fields are guarded by Client.mu.
type call struct {
	first proto.Reply   // the next reply,
	has   bool          // if there is one,
	rest  []proto.Reply // and those after it: items, then the final reply
	buf   []byte        // holds the final reply's payload, kept with the call
	err   error         // the connection died, of this
	widx  int           // index in Client.waiting, or -1
	// counted: a reply woke the caller, which is counted in Client.woken
	// until it leaves next.
	counted bool
	ready   chan struct{} // cap 1: something was queued, or lead
}

// Calls are reused: one whose final reply its caller has taken is in no
// list of the client's any more. A wake-up sent to it late, by a leader
// that queued its reply, is harmless to its next caller: a woken caller
// always looks for itself why.
var calls = sync.Pool{New: func() any { return &call{ready: make(chan struct{}, 1), widx: -1} }}

func newCall() *call { return calls.Get().(*call) }

// free gives back a call whose final reply its caller has taken.
func (cl *call) free() {
	if cap(cl.rest) > 64 {
		cl.rest = nil
	}
	if cap(cl.buf) > 16<<10 {
		cl.buf = nil
	}
	clear(cl.rest)
	*cl = call{rest: cl.rest[:0], buf: cl.buf[:0], ready: cl.ready, widx: -1}
	select {
	case <-cl.ready:
	default:
	}
	calls.Put(cl)
}

func (cl *call) push(rep proto.Reply) {
	if !cl.has {
		cl.first, cl.has = rep, true
		return
	}
	cl.rest = append(cl.rest, rep)
}

// pop returns the next reply, if there is one.
func (cl *call) pop() (proto.Reply, bool) {
	if !cl.has {
		return proto.Reply{}, false
	}
	rep := cl.first
	cl.first, cl.has = proto.Reply{}, false
	if len(cl.rest) > 0 {
		cl.first, cl.has = cl.rest[0], true
		cl.rest[0] = proto.Reply{}
		cl.rest = cl.rest[1:]
	}
	return rep, true
}

func (cl *call) signal() {
	select {
	case cl.ready <- struct{}{}:
	default:
	}
}

// Dial connects to the daemon's socket and reads its hello.
func Dial(ctx context.Context, socket string) (*Client, error) {
	nc, r, hello, err := dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, ncw: rawWriter(nc), r: r, hello: *hello, socket: socket, last: time.Now(), pending: map[uint64]*call{}}, nil
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
	r := bufio.NewReaderSize(rawReader(nc), 64<<10)
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

// rawReader and rawWriter are nc read and written with raw system calls
// (package rawio): a caller waiting for its reply reads the connection
// itself, and a raw call does not wake the runtime's monitor thread for
// it; nc itself if it has no file descriptor.
func rawReader(nc net.Conn) io.Reader {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rawio.NewReader(rc)
		}
	}
	return nc
}

func rawWriter(nc net.Conn) io.Writer {
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return rawio.NewWriter(rc)
		}
	}
	return nc
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

// readBatch reads as the leader: one line, waiting for it, then every
// line already buffered, so one read syscall serves every reply that came
// with it. It returns the replies and, if the connection is dead, why.
func (c *Client) readBatch() ([]proto.Reply, error) {
	reps := c.batch[:0]
	line, err := readLine(c.r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
			return reps, fmt.Errorf("%w: connection closed", ErrUnreachable)
		}
		// Reset (ECONNRESET), or any other failure to read: the daemon
		// is gone as far as this connection can tell.
		return reps, fmt.Errorf("%w: connection lost: %v", ErrUnreachable, err)
	}
	for {
		rep, err := parseReply(line)
		if err != nil {
			return reps, err
		}
		reps = append(reps, rep)
		n := c.r.Buffered()
		if n == 0 {
			return reps, nil
		}
		buf, _ := c.r.Peek(n)
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return reps, nil // the rest of a line is still to come
		}
		line = buf[:i+1]
		c.r.Discard(i + 1) // line stays valid: the buffer is not filled
	}
}

func parseReply(line []byte) (proto.Reply, error) {
	if rep, ok := fastReply(line); ok {
		return rep, nil
	}
	rep := new(proto.Reply)
	if err := json.Unmarshal(line, rep); err != nil {
		return proto.Reply{}, fmt.Errorf("bad reply from oxiosd: %v", err)
	}
	return *rep, nil
}

// deliverLocked queues the replies for their calls and returns the calls
// to wake, and an error that kills the connection. c.mu is held.
func (c *Client) deliverLocked(reps []proto.Reply, wake []*call) (_ []*call, err error) {
	for i, rep := range reps {
		reps[i] = proto.Reply{}
		if err != nil {
			continue
		}
		cl := c.pending[rep.ID]
		if cl == nil {
			if rep.ID == 0 && rep.Error != nil {
				// An error the daemon could not tie to a request: the
				// connection is being refused or closed.
				err = rep.Error
			}
			continue
		}
		// The payload is still in the reader's buffer. The final reply's
		// goes to the call's own buffer: its caller is done with it when
		// it frees the call. An item may be kept by the stream's consumer.
		if rep.Item == nil {
			delete(c.pending, rep.ID)
			if rep.Result != nil {
				cl.buf = append(cl.buf[:0], rep.Result...)
				rep.Result = cl.buf
			}
		} else {
			rep.Item = append(json.RawMessage(nil), rep.Item...)
		}
		cl.push(rep)
		if cl.widx >= 0 {
			c.unwait(cl)
			cl.counted = true
			c.woken++
			wake = append(wake, cl)
		}
	}
	return wake, err
}

// die marks the connection dead and wakes every call.
func (c *Client) die(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pend := c.pending
	c.pending = nil
	var wake []*call
	for _, cl := range pend {
		cl.err = c.err
		if cl.widx >= 0 {
			c.unwait(cl)
			wake = append(wake, cl)
		}
	}
	c.mu.Unlock()
	for _, cl := range wake {
		cl.signal()
	}
}

// wait registers cl as blocked for a reply. c.mu is held.
func (c *Client) wait(cl *call) {
	if cl.widx < 0 {
		cl.widx = len(c.waiting)
		c.waiting = append(c.waiting, cl)
	}
}

// unwait takes cl off the waiting list. c.mu is held.
func (c *Client) unwait(cl *call) {
	i, last := cl.widx, len(c.waiting)-1
	if i != last {
		c.waiting[i] = c.waiting[last]
		c.waiting[i].widx = i
	}
	c.waiting[last] = nil
	c.waiting = c.waiting[:last]
	cl.widx = -1
}

// leave is how a caller leaves next; c.mu is held on entry and released.
// Whoever leaves with no leader reading passes the leadership on to a
// waiting caller, and the last caller woken by a batch of replies writes
// the requests queued meanwhile.
func (c *Client) leave(cl *call) {
	if cl.widx >= 0 {
		c.unwait(cl)
	}
	write := false
	if cl.counted {
		cl.counted = false
		c.woken--
		if c.woken == 0 && c.deferred {
			c.deferred, c.ndeferred = false, 0
			write = true
		}
	}
	var lead *call
	if !c.reading && len(c.waiting) > 0 {
		lead = c.waiting[len(c.waiting)-1]
		c.unwait(lead)
	}
	c.mu.Unlock()
	if lead != nil {
		lead.signal()
	}
	if write {
		c.wmu.Lock()
		if c.flushing || len(c.out) == 0 || c.werr != nil {
			c.wmu.Unlock() // the flusher takes it, or it is sent already
		} else {
			c.flushing = true
			c.flush() // unlocks; an error kills the connection
		}
	}
}

// notSentError is a write that failed before the socket took a byte of
// it: the daemon cannot have read any of the request.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }

func (e *notSentError) Unwrap() error { return e.err }

// notSent reports whether err is a notSentError. (Apart, so that a caller
// with no error does not move one to the heap for errors.As.)
func notSent(err error) bool {
	ns := (*notSentError)(nil)
	return errors.As(err, &ns)
}

// start sends op with args, written by hand from h if not nil, and
// returns its call.
func (c *Client) start(op string, args any, h *handArgs) (*call, uint64, error) {
	rq := [1]request{{op: op, h: h}}
	if h == nil {
		raw, err := encodeArgs(args)
		if err != nil {
			return nil, 0, fmt.Errorf("%s: encoding args: %w", op, err)
		}
		rq[0].raw = raw
	}
	var cl [1]*call
	if err := c.send(op, rq[:], cl[:]); err != nil {
		return nil, 0, err
	}
	return cl[0], rq[0].id, nil
}

// request is one request to send: its op and its args, written by hand
// from h if not nil, else encoded in raw; once sent, its id. It holds
// nothing send keeps: a pointer kept from it (args of type any, its
// call) would have everything it points to escape to the heap with it,
// the caller's handArgs too, an allocation for every call.
type request struct {
	op  string
	raw []byte
	h   *handArgs
	id  uint64
}

// send queues the requests on the connection as one run of lines, so
// that they go out in one write (unless a flusher or a woken caller is
// about to write them with others), and puts each one's call in cls. On
// error none of them has a call, and the error names op (the first's).
//
// Requests that could not be sent at all, on a connection that had no
// other call in flight, went nowhere (the daemon had closed the
// connection: to make room at limits.max_conns_per_uid for a newer one,
// at idle_timeout, or by a restart): they are sent once more on a new
// connection, so a client idle for less than the second revive waits
// for does not fail for nothing.
func (c *Client) send(op string, rqs []request, cls []*call) error {
	err := c.send1(op, rqs, cls)
	if err != nil && notSent(err) {
		c.mu.Lock()
		alone := len(c.pending) == 0
		c.mu.Unlock()
		if alone {
			err = c.send1(op, rqs, cls)
		}
	}
	return err
}

// send1 is one try of send.
func (c *Client) send1(op string, rqs []request, cls []*call) error {
	for i := range rqs {
		cls[i] = newCall()
	}
	c.mu.Lock()
	if len(c.pending) == 0 {
		now := time.Now()
		if c.err != nil || now.Sub(c.last) > time.Second {
			c.revive()
		}
		c.last = now
	}
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		for i := range rqs {
			cls[i].free()
			cls[i] = nil
		}
		return err
	}
	for i := range rqs {
		c.nextID++
		rqs[i].id = c.nextID
		c.pending[rqs[i].id] = cls[i]
	}
	// The requests are queued under c.mu, so the last woken caller to
	// leave sees them queued if it is left for it to write.
	var err error
	c.wmu.Lock()
	if c.werr != nil {
		err = c.werr
		c.wmu.Unlock()
		c.mu.Unlock()
	} else {
		b := c.out
		for i := range rqs {
			rq := &rqs[i]
			b = append(b, `{"id":`...)
			b = strconv.AppendUint(b, rq.id, 10)
			b = append(b, `,"op":`...)
			b = proto.AppendString(b, rq.op)
			b = append(b, `,"args":`...)
			if rq.h != nil {
				b = rq.h.append(b)
			} else {
				b = append(b, rq.raw...)
			}
			b = append(b, '}', '\n')
		}
		c.out = b
		switch {
		case c.flushing:
			// The flusher takes our lines in its next round.
			c.mu.Unlock()
			c.wmu.Unlock()
		case c.woken > 0 && !c.groupFull(len(rqs)):
			// Callers woken by replies are about to run, and most will
			// send a request too: the one that fills the group, or the
			// last of them, writes them.
			c.deferred = true
			c.ndeferred += len(rqs)
			c.mu.Unlock()
			c.wmu.Unlock()
		default:
			c.flushing = true
			c.ndeferred = 0
			c.mu.Unlock()
			err = c.flush() // unlocks
		}
	}
	if err != nil {
		c.mu.Lock()
		for i := range rqs {
			if c.pending != nil {
				delete(c.pending, rqs[i].id)
			}
			cls[i] = nil
		}
		c.mu.Unlock()
		return fmt.Errorf("%w: sending %s: %w", ErrUnreachable, op, err)
	}
	return nil
}

// revive dials the daemon again when the connection, with no call in
// flight, was closed by it: after limits.hello_timeout or idle_timeout of
// silence (a command that reads a slow pipe before its first request, a
// runner waiting on its model), or by a restart of the daemon. No request
// is lost or repeated: none was in flight. c.mu is held.
func (c *Client) revive() {
	if c.socket == "" || c.closed || c.reading {
		return
	}
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
	c.nc, c.ncw, c.r, c.hello = nc, rawWriter(nc), r, *hello
	c.werr, c.out, c.flushing = nil, c.out[:0], false
	c.wmu.Unlock()
	c.err = nil
	c.deferred, c.ndeferred = false, 0
	c.pending = map[uint64]*call{}
}

// closedByPeer reports whether the daemon has closed the idle connection
// or said it would: a line nobody asked for (its closing notice) or EOF
// is waiting to be read. c.mu is held and nobody is reading.
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
		n, err := c.ncw.Write(buf)
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
func (c *Client) next(ctx context.Context, cl *call) (proto.Reply, error) {
	c.mu.Lock()
	for {
		if rep, ok := cl.pop(); ok {
			c.leave(cl)
			return rep, nil
		}
		if cl.err != nil {
			err := cl.err
			c.leave(cl)
			if errors.Is(err, ErrUnreachable) && ctx.Err() == nil {
				err = fmt.Errorf("%w (%w: the connection was lost after the request was sent, so it may or may not have been applied; check before retrying)", err, ErrOutcomeUnknown)
			}
			return proto.Reply{}, err
		}
		if !c.reading {
			if cl.widx >= 0 {
				c.unwait(cl)
			}
			if err := c.lead(ctx, cl); err != nil {
				return proto.Reply{}, err
			}
			continue
		}
		c.wait(cl)
		c.mu.Unlock()
		if done := ctx.Done(); done == nil {
			<-cl.ready
		} else {
			select {
			case <-cl.ready:
			case <-done:
				c.mu.Lock()
				c.leave(cl)
				return proto.Reply{}, ctx.Err()
			}
		}
		c.mu.Lock()
	}
}

// lead reads the connection until a reply for cl came (or the connection
// died), queueing every reply for its call. c.mu is held on entry and on
// a nil return; an error (ctx's) has left next.
func (c *Client) lead(ctx context.Context, cl *call) error {
	c.reading = true
	nc := c.nc
	c.mu.Unlock()
	// Reading cannot watch ctx: a cancelled ctx ends the read with a
	// deadline, and the connection with it.
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { nc.SetReadDeadline(time.Unix(1, 0)) })
	}
	var wakeBuf [32]*call
	for {
		reps, rerr := c.readBatch()
		c.mu.Lock()
		wake, derr := c.deliverLocked(reps, wakeBuf[:0])
		c.batch = reps[:0]
		done := cl.has || rerr != nil || derr != nil || ctx.Err() != nil
		if done {
			c.reading = false
		}
		c.mu.Unlock()
		for i, w := range wake {
			wake[i] = nil
			w.signal()
		}
		if rerr == nil {
			rerr = derr
		}
		if rerr != nil {
			c.die(rerr)
		}
		if done {
			break
		}
	}
	if stop != nil {
		stop()
	}
	c.mu.Lock()
	if !cl.has && ctx.Err() != nil {
		c.leave(cl)
		return ctx.Err()
	}
	return nil
}

// Call sends op with args and decodes the result into result (which may be
// nil). A refusal by the daemon is returned as a *proto.Error.
func (c *Client) Call(ctx context.Context, op string, args, result any) error {
	cl, _, err := c.start(op, args, handEncoded(args))
	if err != nil {
		return err
	}
	rep, err := c.final(ctx, cl)
	if err != nil {
		return err
	}
	err = finish(&rep, result)
	cl.free()
	return err
}

// final waits for cl's final reply; the items of a stream op called
// without a handler are dropped.
func (c *Client) final(ctx context.Context, cl *call) (proto.Reply, error) {
	for {
		rep, err := c.next(ctx, cl)
		if err != nil || rep.Item == nil {
			return rep, err
		}
	}
}

// callState is Call for the frequent state ops, with no boxing of their
// args or result.
func (c *Client) callState(ctx context.Context, op string, h *handArgs, rec *proto.StateRecord) error {
	cl, _, err := c.start(op, nil, h)
	if err != nil {
		return err
	}
	rep, err := c.final(ctx, cl)
	if err != nil {
		return err
	}
	err = finishState(&rep, h, rec)
	cl.free()
	return err
}

func finishState(rep *proto.Reply, h *handArgs, rec *proto.StateRecord) error {
	if !rep.OK || rep.Result == nil {
		return finish(rep, nil)
	}
	if proto.ParseStateRecordOf(rep.Result, rec, h.agent, h.key) {
		return nil
	}
	r := new(proto.StateRecord)
	if err := json.Unmarshal(rep.Result, r); err != nil {
		*rec = proto.StateRecord{}
		return fmt.Errorf("decoding result: %w", err)
	}
	*rec = *r
	return nil
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
	cl, _, err := c.start(op, args, handEncoded(args))
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
		err = finish(&rep, result)
		cl.free()
		if err != nil {
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
		switch r := result.(type) {
		case *proto.StateRecord:
			if proto.ParseStateRecord(rep.Result, r) {
				return nil
			}
			*r = proto.StateRecord{}
		case *proto.MemRememberResult:
			if proto.ParseMemRememberResult(rep.Result, r) {
				return nil
			}
			*r = proto.MemRememberResult{}
		}
		if err := json.Unmarshal(rep.Result, result); err != nil {
			return fmt.Errorf("decoding result: %w", err)
		}
	}
	return nil
}
