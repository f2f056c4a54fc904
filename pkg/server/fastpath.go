package server

import (
	"bytes"
	"unicode/utf8"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// The fast path decodes the requests that clients send most, in the shape
// pkg/client writes them, without reflection:
//
//	{"id":7,"op":"state.load","args":{"agent":"ops","key":"k"}}
//
// Anything else (whitespace, escapes in strings, invalid UTF-8, numbers or
// unknown fields in args) falls back to encoding/json, which then also
// produces the error messages. The fuzz test holds the two paths to the
// same results.

// fastRequest parses the envelope. ok is false when the line is not in
// the canonical shape. It does not allocate for an op of the table: Op is
// the table's string.
func fastRequest(line []byte) (req proto.Request, ok bool) {
	const pre = `{"id":`
	if !bytes.HasPrefix(line, []byte(pre)) || len(line) < len(pre)+20 || line[len(line)-1] != '}' {
		return req, false
	}
	p := line[len(pre):]
	n := 0
	for n < len(p) && n < 20 && p[n] >= '0' && p[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && p[0] == '0' {
		return req, false
	}
	id, ok := parseUint(p[:n])
	if !ok {
		return req, false
	}
	p = p[n:]
	const opKey = `,"op":"`
	if !bytes.HasPrefix(p, []byte(opKey)) {
		return req, false
	}
	p = p[len(opKey):]
	q := bytes.IndexByte(p, '"')
	if q <= 0 {
		return req, false
	}
	op := p[:q]
	for _, c := range op {
		if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			return req, false
		}
	}
	p = p[q+1:]
	const argsKey = `,"args":`
	if !bytes.HasPrefix(p, []byte(argsKey)) {
		return req, false
	}
	args := p[len(argsKey) : len(p)-1]
	// Trailing fields after args would otherwise be taken for part of it.
	// Args of plain string fields (what clients send for the frequent ops)
	// are checked by a quick pass that also proves them valid; the rest
	// by proto.Valid (json.Valid's answer, a string's plain runs 8 bytes
	// at a time).
	if len(args) < 2 || args[0] != '{' || args[len(args)-1] != '}' || !proto.PlainObject(args) && !proto.Valid(args) {
		return req, false
	}
	req = proto.Request{ID: id, Args: args}
	if sc := kernel.Lookup(string(op)); sc != nil {
		req.Op = sc.Op
	} else {
		req.Op = string(op)
	}
	return req, true
}

// parseUint parses up to 20 decimal digits without allocating; ok is
// false past the range of uint64.
func parseUint(d []byte) (n uint64, ok bool) {
	for _, c := range d {
		if n > (1<<64-1)/10 {
			return 0, false
		}
		n1 := n*10 + uint64(c-'0')
		if n1 < n*10 {
			return 0, false
		}
		n = n1
	}
	return n, true
}
