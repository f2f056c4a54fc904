package proto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// DecodeArgs strictly decodes the args of a request of op into v: unknown
// fields are refused so that a typo does not silently do something else.
// Every front end decodes args with it (the kernel's syscall table does),
// so a request reads the same whichever way it came.
func DecodeArgs(op string, args json.RawMessage, v any) *Error {
	if len(args) == 0 || string(args) == "null" {
		return Errorf(EINVAL, "%s: missing args", op)
	}
	if ra, ok := v.(*MemRememberArgs); ok {
		if fastRememberArgs(args, ra) {
			return nil
		}
		*ra = MemRememberArgs{}
	}
	if perr := CheckText(args); perr != nil {
		return Errorf(EINVAL, "%s: bad args: %s", op, argsWords.Replace(perr.Message))
	}
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return Errorf(EINVAL, "%s: bad args: %v", op, err)
	}
	if d.More() {
		return Errorf(EINVAL, "%s: bad args: more than one JSON value", op)
	}
	given := map[string]bool{}
	if perr := CheckFields(args, given); perr != nil {
		return Errorf(EINVAL, "%s: bad args: %s", op, argsWords.Replace(perr.Message))
	}
	for _, name := range requiredFields(v) {
		if !given[name] {
			return Errorf(EINVAL, "%s: args have no %q; it is required (give it empty for an empty one)", op, name)
		}
	}
	return nil
}

// argsWords turns an error about a request line into one about its args.
var argsWords = strings.NewReplacer("request line is", "args are", "request line has", "args have", "request has", "args have")

// DecodeOptionalArgs is DecodeArgs for an op whose args are all optional:
// absent args leave v as it is.
func DecodeOptionalArgs(op string, args json.RawMessage, v any) *Error {
	if len(args) == 0 || string(args) == "null" {
		return nil
	}
	return DecodeArgs(op, args, v)
}

// DecodeStateArgs decodes the args of state.load and state.delete: the
// fast path below for the shape clients send, or else DecodeArgs with its
// error messages.
func DecodeStateArgs(op string, args json.RawMessage, a *StateArgs) *Error {
	if fastStateArgs(args, a) {
		return nil
	}
	// Decoded into its own struct: a, given to encoding/json, would be
	// moved to the heap on every call, the fast ones too.
	b := new(StateArgs)
	perr := DecodeArgs(op, args, b)
	*a = *b
	return perr
}

// DecodeSaveArgs decodes the args of state.save like DecodeStateArgs.
func DecodeSaveArgs(args json.RawMessage, a *StateSaveArgs) *Error {
	if fastSaveArgs(args, a) {
		return nil
	}
	b := new(StateSaveArgs) // as in DecodeStateArgs
	perr := DecodeArgs(OpStateSave, args, b)
	*a = *b
	return perr
}

// The fast path decodes the args clients send most, in the shape
// pkg/client writes them ({"agent":"ops","key":"k"}), without reflection.
// Anything else (whitespace, escapes, invalid UTF-8, numbers, unknown or
// repeated fields) declines, and encoding/json decides. FuzzFastArgs holds
// the two to the same results.

// Flat string args are an object of string fields only, with plain names
// and values (no escapes, no control bytes, valid UTF-8). flatBody and
// flatField parse them.

// flatBody returns what is between the braces of args, for flatField.
func flatBody(args []byte) ([]byte, bool) {
	if len(args) < 2 || args[0] != '{' || args[len(args)-1] != '}' {
		return nil, false
	}
	return args[1 : len(args)-1], true
}

// flatField parses the first field of p, the body of flat string args
// (flatBody) or what is left of it, and returns its name and value and
// the rest of p after it (and its comma). ok is false if the field is not
// a plain string field, or nothing follows a comma.
func flatField(p []byte) (name, value, rest []byte, ok bool) {
	if len(p) < 5 || p[0] != '"' {
		return nil, nil, nil, false
	}
	q := plainString(p[1:])
	if q < 0 {
		return nil, nil, nil, false
	}
	name = p[1 : 1+q]
	p = p[q+2:]
	if len(p) < 2 || p[0] != ':' || p[1] != '"' {
		return nil, nil, nil, false
	}
	p = p[2:]
	q = plainString(p)
	if q < 0 {
		return nil, nil, nil, false
	}
	value, p = p[:q], p[q+1:]
	if len(p) == 0 {
		return name, value, p, true
	}
	if p[0] != ',' || len(p) == 1 {
		return nil, nil, nil, false
	}
	return name, value, p[1:], true
}

// plainString returns the index in p of the quote that ends the string p
// begins with, or -1 if there is none or the string is not plain: not
// valid UTF-8, or holding an escape or a control byte (what may stand
// between quotes in JSON as it is). It looks at 8 bytes a step while they
// are printable ASCII.
func plainString(p []byte) int {
	i := 0
	for i+8 <= len(p) && plainWord(binary.LittleEndian.Uint64(p[i:])) {
		i += 8
	}
	ascii := true
	for ; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			if !ascii && !utf8.Valid(p[:i]) {
				return -1
			}
			return i
		case c < 0x20 || c == '\\':
			return -1
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return -1
}

// PlainObject reports whether b is a JSON object of string fields only,
// each name and value plain (see flatField): the shape clients send the
// args of the frequent ops in. Such an object is valid JSON with nothing
// after it, which the server's fast path then need not check with a full
// scan.
func PlainObject(b []byte) bool {
	p, ok := flatBody(b)
	for ok && len(p) > 0 {
		_, _, p, ok = flatField(p)
	}
	return ok
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
//
// It loops over flatField itself, with no closure: dst, pointers into
// the caller's args struct, then stays on the caller's stack.
func fastFieldsSeen(args []byte, names []string, dst ...*string) (seen uint32, ok bool) {
	p, ok := flatBody(args)
fields:
	for ok && len(p) > 0 {
		var name, v []byte
		if name, v, p, ok = flatField(p); !ok {
			break
		}
		for i, n := range names {
			if n == string(name) && seen&(1<<i) == 0 {
				*dst[i] = string(v)
				seen |= 1 << i
				continue fields
			}
		}
		ok = false
	}
	return seen, ok
}

var (
	stateFields = []string{"agent", "key"}
	saveFields  = []string{"agent", "key", "value", "encoding"}
)

// fastStateArgs decodes state.load/state.delete args.
func fastStateArgs(args []byte, a *StateArgs) bool {
	return fastFields(args, stateFields, &a.Agent, &a.Key)
}

// fastSaveArgs decodes state.save args.
func fastSaveArgs(args []byte, a *StateSaveArgs) bool {
	// Args without a value fall back, for DecodeArgs to say it is missing.
	seen, ok := fastFieldsSeen(args, saveFields, &a.Agent, &a.Key, &a.Value, &a.Encoding)
	return ok && seen&(1<<2) != 0
}
