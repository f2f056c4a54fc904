package proto

import "encoding/binary"

// maxDepth is encoding/json's bound on nesting: deeper is invalid.
const maxDepth = 10000

// Valid reports whether b is one JSON value (with white space around it),
// as json.Valid does, for every input (FuzzValid holds the two to it). It
// skips the plain runs of a string 8 bytes at a time: a request's args
// are mostly text, which json.Valid's scanner reads a byte and a state
// change at a time (a bulk remember's 130 KB request took it 300 us).
func Valid(b []byte) bool {
	// stack holds, for each open container, '{' or '['.
	var stack []byte
	i := skipSpace(b, 0)
	for {
		// A value at b[i].
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == maxDepth {
				return false
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = skipString(b, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = skipNumber(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = skipLiteral(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = skipLiteral(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = skipLiteral(b, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// After a value: close containers, or go on to the next value.
	next:
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top, c := stack[len(stack)-1], b[i]
			switch {
			case c == ',':
				i = skipSpace(b, i+1)
				if top == '{' {
					if i = objectKey(b, i); i < 0 {
						return false
					}
				}
				break next
			case top == '{' && c == '}' || top == '[' && c == ']':
				stack = stack[:len(stack)-1]
				i++
			default:
				return false
			}
		}
	}
}

// objectKey skips a member's name and its colon at b[i], and the white
// space after it: the index of its value, or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = skipString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// skipSpace is the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString is the index after the string that starts at b[i] (a
// quote), or -1. As json.Valid, it takes any byte from 0x20 up but the
// quote and the backslash as it is, invalid UTF-8 too.
func skipString(b []byte, i int) int {
	i++
	for {
		for i+8 <= len(b) && quietWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b[i+2:]); !ok {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			i++
		}
	}
}

// skipNumber is the index after the number that starts at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) int {
	digits := func(i int) (int, bool) {
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j, j > i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i, _ = digits(i)
	default:
		return -1
	}
	var ok bool
	if i < len(b) && b[i] == '.' {
		if i, ok = digits(i + 1); !ok {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i, ok = digits(i); !ok {
			return -1
		}
	}
	return i
}

// skipLiteral is the index after lit at b[i], or -1.
func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
