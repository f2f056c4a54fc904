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

// flatStrings parses args made only of string fields with plain values (no
// escapes, valid UTF-8) and calls set for each; set reports whether it
// knows the field. ok is false if anything is off.
func flatStrings(args []byte, set func(name string, value []byte) bool) bool {
	if len(args) < 2 || args[0] != '{' || args[len(args)-1] != '}' {
		return false
	}
	p := args[1 : len(args)-1]
	if len(p) == 0 {
		return true
	}
	for {
		if len(p) < 5 || p[0] != '"' {
			return false
		}
		q := bytes.IndexByte(p[1:], '"')
		if q < 0 {
			return false
		}
		name := p[1 : 1+q]
		p = p[q+2:]
		if len(p) < 2 || p[0] != ':' || p[1] != '"' {
			return false
		}
		p = p[2:]
		q = bytes.IndexByte(p, '"')
		if q < 0 {
			return false
		}
		val := p[:q]
		for _, c := range val {
			if c < 0x20 || c == '\\' {
				return false
			}
		}
		if !utf8.Valid(val) || !set(string(name), val) {
			return false
		}
		p = p[q+1:]
		if len(p) == 0 {
			return true
		}
		if p[0] != ',' {
			return false
		}
		p = p[1:]
	}
}

// fastFields fills dst[i] from the field names[i] of args: string fields
// only, each at most once (a repeated field falls back, as encoding/json
// would take the last one and the fast path does not try to).
func fastFields(args []byte, names []string, dst ...*string) bool {
	_, ok := fastFieldsSeen(args, names, dst...)
	return ok
}

// fastFieldsSeen is fastFields, and says which fields were given (bit i
// for names[i]).
func fastFieldsSeen(args []byte, names []string, dst ...*string) (seen uint32, ok bool) {
	ok = flatStrings(args, func(name string, v []byte) bool {
		for i, n := range names {
			if n == name && seen&(1<<i) == 0 {
				*dst[i] = string(v)
				seen |= 1 << i
				return true
			}
		}
		return false
	})
	return seen, ok
}

var (
	stateFields = []string{"agent", "key"}
	saveFields  = []string{"agent", "key", "value", "encoding"}
)

// fastStateArgs decodes state.load/state.delete args.
func fastStateArgs(args []byte, a *proto.StateArgs) bool {
	return fastFields(args, stateFields, &a.Agent, &a.Key)
}

// fastSaveArgs decodes state.save args. Args without a value fall back,
// for decodeArgs to say it is missing.
func fastSaveArgs(args []byte, a *proto.StateSaveArgs) bool {
	seen, ok := fastFieldsSeen(args, saveFields, &a.Agent, &a.Key, &a.Value, &a.Encoding)
	return ok && seen&(1<<2) != 0
}
