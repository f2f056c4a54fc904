package proto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// AppendString appends s as a JSON string, byte for byte what
// encoding/json writes with HTML escaping off: invalid UTF-8 becomes
// U+FFFD, and U+2028/U+2029 are escaped. Hot paths (replies, audit lines)
// encode by hand with it instead of through reflection.
func AppendString(b []byte, s string) []byte { return appendString(b, s) }

// AppendBytes is AppendString of the bytes of v, with no copy of them to
// a string first (v is only read, and not kept).
func AppendBytes(b []byte, v []byte) []byte {
	return appendString(b, unsafe.String(unsafe.SliceData(v), len(v)))
}

// Words of 8 bytes are tested at once (SWAR): text that needs no escape,
// most of what is encoded, is copied 8 bytes a step instead of one.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// plainWord reports whether each of the 8 bytes of w is printable ASCII
// that a JSON string holds as it is: 0x20 to 0x7f except the quote and
// the backslash.
// (Each test below is exact for "some byte is": x-ones&^x&highs is
// non-zero iff a byte of x is 0, and w-0x20*ones&^w&highs iff a byte of
// w is below 0x20, given none is 0x80 or more, which w&highs tests.)
func plainWord(w uint64) bool { return (w|loud(w))&highs == 0 }

// quietWord reports whether none of the 8 bytes of w is a control byte
// (below 0x20), the quote or the backslash: plainWord without its test
// for bytes from 0x80 up, which a JSON string may hold as they are.
func quietWord(w uint64) bool { return loud(w)&highs == 0 }

// loud has, under highs, a bit set if some byte of w is a control byte,
// the quote or the backslash (exact for "some byte is", whatever the
// other bytes: the has-zero and has-less-than-n tests, n up to 0x80).
func loud(w uint64) uint64 {
	q := w ^ 0x22*ones // zero where '"'
	e := w ^ 0x5c*ones // zero where a backslash
	return (w-0x20*ones)&^w | (q-ones)&^q | (e-ones)&^e
}

// printableWord reports whether each of the 8 bytes of w is 0x20 to 0x7f
// (see plainWord).
func printableWord(w uint64) bool { return (w|(w-0x20*ones)&^w)&highs == 0 }

// word is the 8 bytes of s from i, little-endian (the compiler makes it
// one load).
func word(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && plainWord(word(s, i)) {
			i += 8
		}
		// Byte by byte up to the end of the word that held something
		// to look at (a rune may take the step past it), and on while
		// runes of more than one byte follow: text in a script other than
		// Latin fails every word's test, so it is not tried for them.
		for limit := min(i+8, len(s)); i < limit; {
			c := s[i]
			if c < utf8.RuneSelf {
				if c >= 0x20 && c != '"' && c != '\\' {
					i++
					continue
				}
				b = append(b, s[start:i]...)
				switch c {
				case '"', '\\':
					b = append(b, '\\', c)
				case '\n':
					b = append(b, '\\', 'n')
				case '\r':
					b = append(b, '\\', 'r')
				case '\t':
					b = append(b, '\\', 't')
				case '\b':
					b = append(b, '\\', 'b')
				case '\f':
					b = append(b, '\\', 'f')
				default:
					b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
				}
				i++
				start = i
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			if r == '\u2028' || r == '\u2029' {
				b = append(b, s[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
				i += size
				start = i
				continue
			}
			i += size
			limit = min(i+8, len(s))
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendStateRecord appends r as JSON, the same as encoding/json would.
func AppendStateRecord(b []byte, r *StateRecord) []byte {
	b = appendStateHead(b, r)
	if r.Value != nil {
		b = append(b, `,"value":`...)
		b = AppendString(b, *r.Value)
	}
	return appendStateTail(b, r.Encoding, r.Deleted)
}

// AppendStateRecordValue appends r as JSON with the value v, as
// AppendStateRecord would with r.Value and r.Encoding set by EncodeValue
// (which it ignores), without making v a string first.
func AppendStateRecordValue(b []byte, r *StateRecord, v []byte) []byte {
	b = append(appendStateHead(b, r), `,"value":`...)
	enc := ""
	if isText(v) {
		b = AppendBytes(b, v)
	} else {
		b = append(base64.StdEncoding.AppendEncode(append(b, '"'), v), '"')
		enc = EncodingBase64
	}
	return appendStateTail(b, enc, r.Deleted)
}

// appendStateHead appends a state record's fields up to its value.
func appendStateHead(b []byte, r *StateRecord) []byte {
	b = append(b, `{"type":`...)
	b = AppendString(b, r.Type)
	b = append(b, `,"agent":`...)
	b = AppendString(b, r.Agent)
	b = append(b, `,"key":`...)
	b = AppendString(b, r.Key)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.Size, 10)
	b = append(b, `,"modified":"`...)
	b = AppendTime(b, r.Modified)
	return append(b, '"')
}

// appendStateTail appends a state record's fields after its value, and
// closes it.
func appendStateTail(b []byte, encoding string, deleted bool) []byte {
	if encoding != "" {
		b = append(b, `,"encoding":`...)
		b = AppendString(b, encoding)
	}
	if deleted {
		b = append(b, `,"deleted":true`...)
	}
	return append(b, '}')
}

// ParseStateRecord reads into r a record in the shape AppendStateRecord
// writes it, with plain strings (no escapes), without reflection. It
// reports false, leaving r in an unspecified state, for anything else,
// which the caller then decodes with encoding/json.
func ParseStateRecord(b []byte, r *StateRecord) bool {
	return ParseStateRecordOf(b, r, "", "")
}

// ParseStateRecordOf is ParseStateRecord for the record of agent's key (a
// reply to a request that named them): a type, agent, key or encoding
// equal to what is expected reuses that string instead of allocating it.
func ParseStateRecordOf(b []byte, r *StateRecord, agent, key string) bool {
	*r = StateRecord{}
	p := b
	lit := func(s string) bool {
		if len(p) < len(s) || string(p[:len(s)]) != s {
			return false
		}
		p = p[len(s):]
		return true
	}
	str := func(dst *string, known string) bool {
		if len(p) == 0 || p[0] != '"' {
			return false
		}
		q := plainString(p[1:])
		if q < 0 {
			return false
		}
		s := p[1 : 1+q]
		if string(s) == known {
			*dst = known
		} else {
			*dst = string(s)
		}
		p = p[q+2:]
		return true
	}
	if !lit(`{"type":`) || !str(&r.Type, RecordState) || !lit(`,"agent":`) || !str(&r.Agent, agent) ||
		!lit(`,"key":`) || !str(&r.Key, key) || !lit(`,"size":`) {
		return false
	}
	n := 0
	for n < len(p) && n < 19 && (p[n] >= '0' && p[n] <= '9' || n == 0 && p[n] == '-') {
		n++
	}
	var size int64
	var err error
	if n > 0 && n < 19 && p[0] != '-' {
		for _, c := range p[:n] { // 18 digits cannot overflow
			size = size*10 + int64(c-'0')
		}
	} else {
		size, err = strconv.ParseInt(string(p[:n]), 10, 64)
	}
	if err != nil || n > 1 && (p[0] == '0' || p[0] == '-' && p[1] == '0') {
		return false
	}
	r.Size = size
	p = p[n:]
	if !lit(`,"modified":"`) {
		return false
	}
	q := bytes.IndexByte(p, '"')
	if q < 0 {
		return false
	}
	if t, ok := parseTime(p[:q]); ok {
		r.Modified = t
	} else if r.Modified.UnmarshalText(p[:q]) != nil {
		return false
	}
	p = p[q+1:]
	if lit(`,"value":`) {
		v := new(string)
		if !str(v, "") {
			return false
		}
		r.Value = v
	}
	if lit(`,"encoding":`) && !str(&r.Encoding, EncodingBase64) {
		return false
	}
	if lit(`,"deleted":true`) {
		r.Deleted = true
	}
	return string(p) == "}"
}

// Marshal encodes a record as oxiosd's replies and every ox-* command
// have it: json.Marshal without HTML escaping (values are data: `<`
// stays `<` for jq, and for size), with no newline.
func Marshal(v any) ([]byte, error) {
	if b, ok := AppendRecord(nil, v); ok {
		return b, nil
	}
	return marshalJSON(v)
}

// marshalJSON is Marshal through encoding/json, for every record.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
