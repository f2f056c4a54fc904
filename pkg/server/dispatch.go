package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/serve"
)

// The ops served are those pkg/serve adapts, which are those of the
// kernel's syscall table that a front end may call (serve.Lookup): the
// server has no list of its own. Inline syscalls are quick and never
// block (loads, hello): they run on the reading goroutine, which keeps a
// sequential client at one goroutine hop per request. Alone syscalls
// (saves, deletes, remembers: quick, but they wait for their commit) run
// there too when they are the connection's only request, as a sequential
// client's are. The others, and alone ones that come pipelined, run on
// their own goroutine so requests behind them proceed and group-commit
// together.

// decodeRequest parses one request line into req and returns its
// syscall. The error names the problem; req holds what could be read
// (its id) even then.
func decodeRequest(line []byte, req *proto.Request) (serve.Handler, *proto.Error) {
	if r, ok := fastRequest(line); ok {
		if h, ok := serve.Lookup(r.Op); ok {
			*req = r
			return h, nil
		}
	}
	*req = proto.Request{}
	if perr := proto.CheckText(line); perr != nil {
		return serve.Handler{}, perr
	}
	if err := json.Unmarshal(line, req); err != nil {
		*req = proto.Request{}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return serve.Handler{}, proto.Errorf(proto.EBADMSG, "request line is not a JSON object (got %s)", ute.Value)
		}
		if errors.As(err, &ute) {
			return serve.Handler{}, proto.Errorf(proto.EBADMSG, "bad request: field %q must be a %s, not %s", ute.Field, typeName(ute.Field), ute.Value)
		}
		return serve.Handler{}, proto.Errorf(proto.EBADMSG, "request line is not a JSON object: %v", err)
	}
	if perr := proto.CheckFields(line, nil); perr != nil {
		req.ID = 0 // the reply takes the first "id", not the last
		return serve.Handler{}, perr
	}
	if req.Op == "" {
		return serve.Handler{}, proto.Errorf(proto.EBADMSG, "request has no \"op\"")
	}
	h, ok := serve.Lookup(req.Op)
	if !ok {
		return serve.Handler{}, proto.Errorf(proto.ENOSYS, "unknown op %q", req.Op)
	}
	return h, nil
}

func typeName(field string) string {
	switch field {
	case "id":
		return "non-negative integer"
	case "op":
		return "string"
	case "args":
		return "object"
	}
	return "different type"
}

// dispatch serves one request line. held is the budget the line's own
// buffer holds (0 when it is the reader's buffer): given back once the
// request is done with it.
func (c *conn) dispatch(ctx context.Context, line []byte, held int64, r *bufio.Reader) {
	c.s.quiet.touch()
	// The inline call is the connection's own (one at a time, on this
	// goroutine): no allocation for the request or its Out.
	ic := &c.icall
	ic.c = c
	h, perr := decodeRequest(line, &ic.req)
	if perr != nil {
		c.s.buffered.give(held)
		id := ic.req.ID
		if id == 0 {
			id = peekID(line)
		}
		c.sendError(id, perr)
		c.flushIf(r)
		return
	}
	if h.Inline || h.Alone && c.alone(r) {
		c.serveInline(ctx, h, held, r.Buffered() > 0)
		return
	}
	req := ic.req
	ic.req.Args = nil
	if held == 0 {
		// The line is the reader's buffer: keep what the handler needs.
		req.Args = append(json.RawMessage(nil), req.Args...)
	}
	c.sem <- struct{}{}
	c.inflight.Add(1)
	c.nflight.Add(1)
	go func() {
		defer func() { c.nflight.Add(-1); <-c.sem; c.inflight.Done() }()
		res, err := c.call(ctx, h.Serve, &call{c: c, req: req})
		c.s.buffered.give(held)
		c.wmu.Lock()
		c.writeReply(req.ID, res, err)
		c.flushLocked()
		c.wmu.Unlock()
	}()
}

// serveInline serves c.icall on the reading goroutine, and flushes the
// reply unless more requests are buffered behind it (more): a pipelining
// client gets its replies batched into fewer writes.
func (c *conn) serveInline(ctx context.Context, h serve.Handler, held int64, more bool) {
	ic := &c.icall
	ic.Buf = c.scratch
	res, err := c.call(ctx, h.Serve, ic)
	c.s.buffered.give(held)
	c.reply(ic.req.ID, res, err)
	ic.req.Args = nil
	// The reply is in the write buffer: the result's buffer serves the
	// next inline call, unless it grew big.
	if cap(ic.Buf) <= maxScratch {
		c.scratch = ic.Buf
	}
	ic.Buf = nil
	if !more {
		c.flush()
	}
}

// alone reports whether the request just read from r is all the
// connection has: none in flight, no bytes received behind it. An Alone
// syscall then runs on the reading goroutine, since nothing would proceed
// beside it; what the client sends meanwhile waits in the socket and is
// read when it is done (then, with the others, on goroutines of their
// own).
func (c *conn) alone(r *bufio.Reader) bool {
	return c.nflight.Load() == 0 && r.Buffered() == 0 && len(c.primed.b) == 0
}

// call runs a handler. A panic is a bug, but one request's bug must not take
// the kernel down with every other client: it is logged with its stack and
// answered with EIO.
func (c *conn) call(ctx context.Context, serveFn serve.Func, r *call) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("panic serving request", "op", r.req.Op, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, proto.Errorf(proto.EIO, "internal error serving %s (logged by oxiosd)", r.req.Op)
		}
	}()
	r.Request = serve.Request{Op: r.req.Op, Args: r.req.Args, Out: r, Buf: r.Buf}
	return serveFn(c.s.k, ctx, c.cred, &r.Request)
}

// call is one request in flight: the request, the serve.Request of it,
// and its Out, where its items go (one allocation for all, or none for
// the connection's inline call).
type call struct {
	serve.Request
	c   *conn
	req proto.Request
}

func (r *call) Item(rec []byte) error   { return r.c.sendItem(r.req.ID, rec) }
func (r *call) Flush()                  { r.c.flush() }
func (r *call) Follow() context.Context { return r.c.follow }

func (c *conn) reply(id uint64, res []byte, err error) {
	c.wmu.Lock()
	c.writeReply(id, res, err)
	c.wmu.Unlock()
}

// writeReply writes a final reply; c.wmu is held.
func (c *conn) writeReply(id uint64, res []byte, err error) {
	if c.werr != nil {
		return
	}
	w := c.writer()
	if err != nil {
		w.Write(appendError(nil, id, err))
		c.werr = w.WriteByte('\n')
		return
	}
	// Written in pieces into the buffer: no copy of res.
	c.ibuf = strconv.AppendUint(append(c.ibuf[:0], `{"id":`...), id, 10)
	w.Write(c.ibuf)
	if res == nil {
		_, c.werr = w.WriteString(`,"ok":true,"done":true}` + "\n")
		return
	}
	w.WriteString(`,"ok":true,"result":`)
	w.Write(res)
	_, c.werr = w.WriteString("}\n") // a bufio.Writer's error sticks
}

// sendItem sends one stream item (its JSON) of request id.
func (c *conn) sendItem(id uint64, item []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	b := append(c.ibuf[:0], `{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"item":`...)
	b = append(b, item...)
	b = append(b, '}', '\n')
	c.ibuf = b
	_, c.werr = c.writer().Write(b)
	return c.werr
}

func appendError(b []byte, id uint64, err error) []byte {
	var pe *proto.Error
	if !errors.As(err, &pe) {
		if errors.Is(err, context.Canceled) {
			pe = proto.Errorf(proto.ESHUTDOWN, "request cancelled: connection closing")
		} else {
			pe = proto.Errorf(proto.EIO, "%v", err)
		}
	}
	e, _ := marshal(pe)
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"ok":false,"error":`...)
	b = append(b, e...)
	return append(b, '}')
}

func appendHello(b []byte, h *proto.Hello) []byte {
	e, _ := marshal(h)
	b = append(b, `{"hello":`...)
	b = append(b, e...)
	return append(b, '}')
}

// marshal is json.Marshal without HTML escaping: values are data, and
// `<` should stay `<` for jq and for size.
func marshal(v any) ([]byte, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil // encoded already (an event shared by subscribers)
	}
	b, err := proto.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding reply: %w", err)
	}
	return b, nil
}

// peekID recovers the id of a request line that could not be decoded, so
// a pipelining client can match the error to its request; 0 if none.
func peekID(line []byte) uint64 {
	i := bytes.Index(line, []byte(`"id"`))
	if i < 0 {
		return 0
	}
	rest := bytes.TrimLeft(line[i+4:], " \t")
	if len(rest) == 0 || rest[0] != ':' {
		return 0
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	id, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if err != nil {
		return 0
	}
	return id
}
