package server

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

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
// the canonical shape.
func fastRequest(line []byte) (req *proto.Request, ok bool) {
	const pre = `{"id":`
	if !bytes.HasPrefix(line, []byte(pre)) || len(line) < len(pre)+20 || line[len(line)-1] != '}' {
		return nil, false
	}
	p := line[len(pre):]
	n := 0
	for n < len(p) && n < 20 && p[n] >= '0' && p[n] <= '9' {
		n++
	}
	if n == 0 || n > 1 && p[0] == '0' {
		return nil, false
	}
	id, err := strconv.ParseUint(string(p[:n]), 10, 64)
	if err != nil {
		return nil, false
	}
	p = p[n:]
	const opKey = `,"op":"`
	if !bytes.HasPrefix(p, []byte(opKey)) {
		return nil, false
	}
	p = p[len(opKey):]
	q := bytes.IndexByte(p, '"')
	if q <= 0 {
		return nil, false
	}
	op := p[:q]
	for _, c := range op {
		if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			return nil, false
		}
	}
	p = p[q+1:]
	const argsKey = `,"args":`
	if !bytes.HasPrefix(p, []byte(argsKey)) {
		return nil, false
	}
	args := p[len(argsKey) : len(p)-1]
	// json.Valid (a scan, no reflection) rules out trailing fields after
	// args, which would otherwise be taken for part of it.
	if len(args) < 2 || args[0] != '{' || args[len(args)-1] != '}' || !json.Valid(args) {
		return nil, false
	}
	return &proto.Request{ID: id, Op: string(op), Args: args}, true
}
