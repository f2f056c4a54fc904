package proto

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The fast path of mem.remember's args: a batch of up to MaxRememberBatch
// memories in the shape encoding/json writes them (pkg/client, so
// ox-remember and the runner), decoded in one pass without reflection. A
// batch was four passes before (CheckText, encoding/json's scan and its
// decode, CheckFields) and about 2 us of the daemon's CPU per memory.
// Anything else (whitespace, fields out of order or unknown or repeated,
// null, a lone surrogate, invalid UTF-8, a number encoding/json would not
// take) declines, and DecodeArgs decides. FuzzRememberArgs holds the two
// to the same results.

// fastRememberArgs decodes args into a (which it may leave half-filled
// when it declines).
func fastRememberArgs(args []byte, a *MemRememberArgs) bool {
	p, ok := bytes.CutPrefix(args, []byte(`{"agent":`))
	if !ok {
		return false
	}
	if a.Agent, p, ok = jsonString(p); !ok {
		return false
	}
	if p, ok = bytes.CutPrefix(p, []byte(`,"memories":[`)); !ok {
		return false
	}
	if p, ok = bytes.CutPrefix(p, []byte(`]}`)); ok {
		a.Memories = []MemoryInput{}
		return len(p) == 0
	}
	a.Memories = make([]MemoryInput, 0, bytes.Count(p, []byte(`{"`)))
	for {
		var m MemoryInput
		if p, ok = memoryInput(p, &m); !ok {
			return false
		}
		a.Memories = append(a.Memories, m)
		if len(p) == 0 {
			return false
		}
		if p[0] == ',' {
			p = p[1:]
			continue
		}
		return string(p) == "]}"
	}
}

// memoryInput decodes one memory's object at the start of p.
func memoryInput(p []byte, m *MemoryInput) ([]byte, bool) {
	if len(p) < 2 || p[0] != '{' {
		return nil, false
	}
	p = p[1:]
	var seen uint8
	for {
		if len(p) == 0 || p[0] != '"' {
			return nil, false
		}
		q := bytes.IndexByte(p[1:], '"')
		if q < 0 || len(p) < q+3 || p[q+2] != ':' {
			return nil, false
		}
		name := p[1 : 1+q]
		p = p[q+3:]
		var bit uint8
		var ok bool
		switch string(name) {
		case "kind":
			bit = 1
			m.Kind, p, ok = jsonString(p)
		case "text":
			bit = 2
			m.Text, p, ok = jsonString(p)
		case "tags":
			bit = 4
			m.Tags, p, ok = jsonStrings(p)
		case "source":
			bit = 8
			m.Source, p, ok = jsonString(p)
		case "importance":
			bit = 16
			m.Importance, p, ok = jsonFloat(p)
		case "ttl":
			bit = 32
			m.TTL, p, ok = jsonString(p)
		}
		if !ok || seen&bit != 0 || len(p) == 0 {
			return nil, false
		}
		seen |= bit
		switch p[0] {
		case ',':
			p = p[1:]
		case '}':
			return p[1:], true
		default:
			return nil, false
		}
	}
}

// jsonStrings decodes an array of strings at the start of p.
func jsonStrings(p []byte) ([]string, []byte, bool) {
	if len(p) < 2 || p[0] != '[' {
		return nil, nil, false
	}
	if p[1] == ']' {
		return []string{}, p[2:], true
	}
	var out []string
	p = p[1:]
	for {
		s, rest, ok := jsonString(p)
		if !ok || len(rest) == 0 {
			return nil, nil, false
		}
		out = append(out, s)
		switch rest[0] {
		case ',':
			p = rest[1:]
		case ']':
			return out, rest[1:], true
		default:
			return nil, nil, false
		}
	}
}

// jsonString decodes the string at the start of p: valid UTF-8, no
// control bytes, escapes as JSON has them (a \u escape of half a
// surrogate pair declines, as CheckText refuses it).
func jsonString(p []byte) (string, []byte, bool) {
	if len(p) < 2 || p[0] != '"' {
		return "", nil, false
	}
	p = p[1:]
	i := 0
	ascii := true
	for ; i < len(p); i++ {
		c := p[i]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if i == len(p) || p[i] < 0x20 {
		return "", nil, false
	}
	if !ascii && !utf8.Valid(p[:i]) {
		return "", nil, false
	}
	if p[i] == '"' {
		return string(p[:i]), p[i+1:], true
	}
	// Escapes: decode the rest byte by byte.
	b := make([]byte, i, i+16)
	copy(b, p[:i])
	for i < len(p) {
		c := p[i]
		switch {
		case c == '"':
			if !utf8.Valid(b) {
				return "", nil, false
			}
			return string(b), p[i+1:], true
		case c < 0x20:
			return "", nil, false
		case c != '\\':
			b = append(b, c)
			i++
			continue
		}
		if i+1 >= len(p) {
			return "", nil, false
		}
		switch e := p[i+1]; e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := hex4(p[i+2:])
			if !ok {
				return "", nil, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || i+7 >= len(p) || p[i+2] != '\\' || p[i+3] != 'u' {
					return "", nil, false
				}
				lo, ok := hex4(p[i+4:])
				if !ok || lo < 0xdc00 || lo >= 0xe000 {
					return "", nil, false
				}
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", nil, false
		}
		i += 2
	}
	return "", nil, false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(p []byte) (rune, bool) {
	if len(p) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// jsonFloat decodes the number at the start of p, written as JSON writes
// numbers (-?int frac? exp?).
func jsonFloat(p []byte) (float64, []byte, bool) {
	i := skipNumber(p, 0)
	if i < 0 {
		return 0, nil, false
	}
	f, err := strconv.ParseFloat(string(p[:i]), 64)
	if err != nil {
		return 0, nil, false
	}
	return f, p[i:], true
}
