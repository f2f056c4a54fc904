package proto

import (
	"bytes"
	"encoding/json"
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
	d := json.NewDecoder(bytes.NewReader(args))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return Errorf(EINVAL, "%s: bad args: %v", op, err)
	}
	return nil
}

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
	*a = StateArgs{}
	return DecodeArgs(op, args, a)
}

// DecodeSaveArgs decodes the args of state.save like DecodeStateArgs.
func DecodeSaveArgs(args json.RawMessage, a *StateSaveArgs) *Error {
	if fastSaveArgs(args, a) {
		return nil
	}
	*a = StateSaveArgs{}
	return DecodeArgs(OpStateSave, args, a)
}

// The fast path decodes the args clients send most, in the shape
// pkg/client writes them ({"agent":"ops","key":"k"}), without reflection.
// Anything else (whitespace, escapes, invalid UTF-8, numbers, unknown or
// repeated fields) declines, and encoding/json decides. FuzzFastArgs holds
// the two to the same results.

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
	var seen uint32
	return flatStrings(args, func(name string, v []byte) bool {
		for i, n := range names {
			if n == name && seen&(1<<i) == 0 {
				*dst[i] = string(v)
				seen |= 1 << i
				return true
			}
		}
		return false
	})
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
	return fastFields(args, saveFields, &a.Agent, &a.Key, &a.Value, &a.Encoding)
}
