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

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// The ops served are those the kernel's syscall table gives a Serve
// (kernel.Lookup): the server has no list of its own. Inline syscalls are
// quick and never block (loads, hello): they run on the reading goroutine,
// which keeps a sequential client at one goroutine hop per request. The
// others (anything that waits for a commit, or streams) run on their own
// goroutine so pipelined requests behind them proceed and group-commit
// together.
func served(op string) *kernel.Syscall {
	if sc := kernel.Lookup(op); sc != nil && sc.Serve != nil {
		return sc
	}
	return nil
}

// decodeRequest parses one request line. The error names the problem.
func decodeRequest(line []byte) (*proto.Request, *proto.Error) {
	if req, ok := fastRequest(line); ok {
		if served(req.Op) != nil {
			return req, nil
		}
	}
	var req proto.Request
	if err := json.Unmarshal(line, &req); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field == "" {
			return nil, proto.Errorf(proto.EBADMSG, "request line is not a JSON object (got %s)", ute.Value)
		}
		if errors.As(err, &ute) {
			return nil, proto.Errorf(proto.EBADMSG, "bad request: field %q must be a %s, not %s", ute.Field, typeName(ute.Field), ute.Value)
		}
		return nil, proto.Errorf(proto.EBADMSG, "request line is not a JSON object: %v", err)
	}
	if req.Op == "" {
		return &req, proto.Errorf(proto.EBADMSG, "request has no \"op\"")
	}
	if served(req.Op) == nil {
		return &req, proto.Errorf(proto.ENOSYS, "unknown op %q", req.Op)
	}
	return &req, nil
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
	req, perr := decodeRequest(line)
	if perr != nil {
		c.s.buffered.give(held)
		id := peekID(line)
		if req != nil {
			id = req.ID
		}
		c.sendError(id, perr)
		c.flushIf(r)
		return
	}
	sc := served(req.Op)
	if sc.Inline {
		res, err := c.call(ctx, sc, req)
		c.s.buffered.give(held)
		c.reply(req.ID, res, err)
		c.flushIf(r)
		return
	}
	if held == 0 {
		// The line is the reader's buffer: keep what the handler needs.
		req.Args = append(json.RawMessage(nil), req.Args...)
	}
	c.sem <- struct{}{}
	c.inflight.Add(1)
	c.nflight.Add(1)
	go func() {
		defer func() { c.nflight.Add(-1); <-c.sem; c.inflight.Done() }()
		res, err := c.call(ctx, sc, req)
		c.s.buffered.give(held)
		c.wmu.Lock()
		c.writeReply(req.ID, res, err)
		c.flushLocked()
		c.wmu.Unlock()
	}()
}

// call runs a handler. A panic is a bug, but one request's bug must not take
// the kernel down with every other client: it is logged with its stack and
// answered with EIO.
func (c *conn) call(ctx context.Context, sc *kernel.Syscall, req *proto.Request) (res []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.s.log.Error("panic serving request", "op", req.Op, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, proto.Errorf(proto.EIO, "internal error serving %s (logged by oxiosd)", req.Op)
		}
	}()
	return sc.Serve(c.s.k, ctx, c.cred, &kernel.Request{Op: req.Op, Args: req.Args, Out: out{c, req.ID}})
}

// out is where the items of request id go: the kernel.Out of a call.
type out struct {
	c  *conn
	id uint64
}

func (o out) Item(rec []byte) error   { return o.c.sendItem(o.id, rec) }
func (o out) Flush()                  { o.c.flush() }
func (o out) Follow() context.Context { return o.c.follow }

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
	var b []byte
	if err != nil {
		b = appendError(nil, id, err)
	} else {
		b = appendOK(nil, id, res)
	}
	w := c.writer()
	w.Write(b)
	c.werr = w.WriteByte('\n')
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

func appendOK(b []byte, id uint64, res []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"ok":true`...)
	if res == nil {
		return append(b, `,"done":true}`...)
	}
	b = append(b, `,"result":`...)
	b = append(b, res...)
	return append(b, '}')
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding reply: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
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
