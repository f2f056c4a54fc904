package proto

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, byte for byte what
// encoding/json writes with HTML escaping off: invalid UTF-8 becomes
// U+FFFD, and U+2028/U+2029 are escaped. Hot paths (replies, audit lines)
// encode by hand with it instead of through reflection.
func AppendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
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
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendStateRecord appends r as JSON, the same as encoding/json would.
func AppendStateRecord(b []byte, r *StateRecord) []byte {
	b = append(b, `{"type":`...)
	b = AppendString(b, r.Type)
	b = append(b, `,"agent":`...)
	b = AppendString(b, r.Agent)
	b = append(b, `,"key":`...)
	b = AppendString(b, r.Key)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, r.Size, 10)
	b = append(b, `,"modified":"`...)
	b = r.Modified.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if r.Value != nil {
		b = append(b, `,"value":`...)
		b = AppendString(b, *r.Value)
	}
	if r.Encoding != "" {
		b = append(b, `,"encoding":`...)
		b = AppendString(b, r.Encoding)
	}
	if r.Deleted {
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
		q := bytes.IndexByte(p[1:], '"')
		if q < 0 {
			return false
		}
		s := p[1 : 1+q]
		if !plain(s) {
			return false
		}
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
	size, err := strconv.ParseInt(string(p[:n]), 10, 64)
	if err != nil || n > 1 && (p[0] == '0' || p[0] == '-' && p[1] == '0') {
		return false
	}
	r.Size = size
	p = p[n:]
	if !lit(`,"modified":"`) {
		return false
	}
	q := bytes.IndexByte(p, '"')
	if q < 0 || r.Modified.UnmarshalText(p[:q]) != nil {
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
