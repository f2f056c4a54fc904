package proto

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// encoding/json is lenient where a request must not be: it turns invalid
// UTF-8 and lone surrogate escapes into U+FFFD (two different keys then
// become one), takes the last of two fields of one name ("op" twice turns
// a load into a save), matches field names case-insensitively (so "OP" is
// "op" a second time), and cannot tell an absent field from an empty one.
// These checks run on the lines the fast path does not take, before they
// are decoded; they name what is wrong.

// CheckText reports a line that is not valid UTF-8 or holds a \u escape
// of half a surrogate pair.
func CheckText(line []byte) *Error {
	if !utf8.Valid(line) {
		i := 0
		for i < len(line) {
			r, n := utf8.DecodeRune(line[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		return Errorf(EBADMSG, "request line is not valid UTF-8 (byte %d); text travels as UTF-8, binary values as base64 with \"encoding\":\"base64\"", i)
	}
	for i := 0; i < len(line); i++ {
		if line[i] != '\\' {
			continue
		}
		i++
		if i >= len(line) || line[i] != 'u' || i+5 > len(line) {
			continue
		}
		r, err := strconv.ParseUint(string(line[i+1:i+5]), 16, 32)
		if err != nil {
			continue
		}
		switch {
		case r >= 0xd800 && r < 0xdc00:
			// A high surrogate must be followed by a low one.
			if j := i + 5; j+6 <= len(line) && line[j] == '\\' && line[j+1] == 'u' {
				if lo, err := strconv.ParseUint(string(line[j+2:j+6]), 16, 32); err == nil && lo >= 0xdc00 && lo < 0xe000 {
					i = j + 5
					continue
				}
			}
			return Errorf(EBADMSG, "request line has a lone surrogate \\u%04x (byte %d): not a character", r, i-1)
		case r >= 0xdc00 && r < 0xe000:
			return Errorf(EBADMSG, "request line has a lone surrogate \\u%04x (byte %d): not a character", r, i-1)
		}
		i += 4
	}
	return nil
}

// CheckFields walks a JSON value (already known to be valid) and reports
// an object with two fields of one name, names compared as encoding/json
// matches them (unescaped, case-insensitively). top, when not nil,
// receives the names of the fields of the outermost object.
func CheckFields(b []byte, top map[string]bool) *Error {
	w := fieldWalker{b: b}
	return w.value(top)
}

// fieldWalker walks a valid JSON value. It allocates nothing on the way
// (a batch of a thousand memories is three thousand fields): the names of
// an object are compared in place, and the path of the one being walked,
// for an error, is a buffer pushed and popped.
type fieldWalker struct {
	b    []byte
	i    int
	path []byte // "a.b." of the object being walked
}

func (w *fieldWalker) ws() {
	for w.i < len(w.b) && (w.b[w.i] == ' ' || w.b[w.i] == '\t' || w.b[w.i] == '\n' || w.b[w.i] == '\r') {
		w.i++
	}
}

// str skips a string and returns it raw (without its quotes).
func (w *fieldWalker) str() []byte {
	start := w.i + 1
	for w.i++; w.i < len(w.b); w.i++ {
		switch w.b[w.i] {
		case '\\':
			w.i++
		case '"':
			w.i++
			return w.b[start : w.i-1]
		}
	}
	return w.b[start:]
}

// value walks one value; top, when not nil, gets the names of the object
// it is (in lower case).
func (w *fieldWalker) value(top map[string]bool) *Error {
	w.ws()
	if w.i >= len(w.b) {
		return nil
	}
	switch w.b[w.i] {
	case '{':
		w.i++
		var small [8][]byte
		seen := small[:0]
		for {
			w.ws()
			if w.i >= len(w.b) || w.b[w.i] == '}' {
				w.i++
				return nil
			}
			if w.b[w.i] == ',' {
				w.i++
				continue
			}
			name := w.str()
			if bytes.IndexByte(name, '\\') >= 0 {
				var s string
				json.Unmarshal(append(append([]byte{'"'}, name...), '"'), &s)
				name = []byte(s)
			}
			for _, n := range seen {
				if bytes.EqualFold(n, name) {
					return Errorf(EBADMSG, "request has the field %q more than once (names match regardless of case); give each field once", string(w.path)+string(name))
				}
			}
			seen = append(seen, name)
			if top != nil {
				top[strings.ToLower(string(name))] = true
			}
			w.ws()
			w.i++ // ':'
			n := len(w.path)
			w.path = append(append(w.path, name...), '.')
			err := w.value(nil)
			w.path = w.path[:n]
			if err != nil {
				return err
			}
		}
	case '[':
		w.i++
		for {
			w.ws()
			if w.i >= len(w.b) || w.b[w.i] == ']' {
				w.i++
				return nil
			}
			if w.b[w.i] == ',' {
				w.i++
				continue
			}
			if err := w.value(nil); err != nil {
				return err
			}
		}
	case '"':
		w.str()
	default:
		for w.i < len(w.b) && !strings.ContainsRune(",}] \t\r\n", rune(w.b[w.i])) {
			w.i++
		}
	}
	return nil
}

// required lists, per args type, the fields a request must give even
// though their zero value is valid: those tagged `wire:"required"`.
var required sync.Map // reflect.Type -> []string

func requiredFields(v any) []string {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if r, ok := required.Load(t); ok {
		return r.([]string)
	}
	var names []string
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Tag.Get("wire") == "required" {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				names = append(names, name)
			}
		}
	}
	required.Store(t, names)
	return names
}
