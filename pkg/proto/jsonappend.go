package proto

import (
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
