package proto

import (
	"encoding/base64"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits that are part of the contract: the daemon enforces them, clients
// may check early to give a usage error without a round trip.
const (
	MaxAgentLen = 63
	// MaxKeyLen bounds a key in bytes. Each path element is also bounded by
	// MaxKeyElem, the usual NAME_MAX, so that every key is a valid file name.
	MaxKeyLen  = 1024
	MaxKeyElem = 255
	// DefaultMaxValue is the default for limits.max_value.
	DefaultMaxValue = 16 << 20
)

// EncodingBase64 marks a value carried as standard base64. Values that are
// valid UTF-8 travel as plain JSON strings, so `jq -r .value` works.
const EncodingBase64 = "base64"

// StateArgs names one key of one agent: the args of state.load and
// state.delete.
type StateArgs struct {
	Agent string `json:"agent"`
	Key   string `json:"key"`
}

// StateSaveArgs are the args of state.save.
type StateSaveArgs struct {
	Agent string `json:"agent"`
	Key   string `json:"key"`
	// Value is required: a save without one is refused, not taken for an
	// empty value.
	Value    string `json:"value" wire:"required"`
	Encoding string `json:"encoding,omitempty"`
}

// StateListArgs are the args of state.list.
type StateListArgs struct {
	Agent  string `json:"agent"`
	Prefix string `json:"prefix,omitempty"`
}

// StateRecord is the "state" record: the result of save, load (with the
// value) and delete, and each item of list.
type StateRecord struct {
	Type     string    `json:"type"` // always "state"
	Agent    string    `json:"agent"`
	Key      string    `json:"key"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	Value    *string   `json:"value,omitempty"`
	Encoding string    `json:"encoding,omitempty"`
	Deleted  bool      `json:"deleted,omitempty"`
}

// RecordState is the record type of StateRecord.
const RecordState = "state"

// EncodeValue returns v as it travels on the wire: itself when it is text
// that JSON carries without blowing up, base64 otherwise.
func EncodeValue(v []byte) (value, encoding string) {
	if isText(v) {
		return string(v), ""
	}
	return base64.StdEncoding.EncodeToString(v), EncodingBase64
}

// DecodeValue is the inverse of EncodeValue.
func DecodeValue(value, encoding string) ([]byte, *Error) {
	switch encoding {
	case "":
		return []byte(value), nil
	case EncodingBase64:
		b, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return nil, Errorf(EINVAL, "value is not valid base64: %v", err)
		}
		return b, nil
	default:
		return nil, Errorf(EINVAL, "unknown value encoding %q (want \"\" or %q)", encoding, EncodingBase64)
	}
}

// isText reports whether v is valid UTF-8 with few enough control bytes
// that JSON escaping (up to 6 bytes each) cannot grow it past base64's 4/3.
func isText(v []byte) bool {
	ctl := 0
	for _, c := range v {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
			ctl++
		}
	}
	return ctl*15 <= len(v) && utf8.Valid(v)
}

// MaxLineFor is the request line size that a value of maxValue bytes needs
// in the worst case (base64) plus room for the envelope.
func MaxLineFor(maxValue int) int {
	return (maxValue+2)/3*4 + 64<<10
}

// CheckAgent reports why name is not a valid agent name, or nil.
// Agent names are [a-z0-9][a-z0-9._-]{0,62}: they are directory names,
// user-visible in paths, and safe in shells without quoting.
func CheckAgent(name string) *Error {
	if name == "" {
		return Errorf(EINVAL, "agent name is empty (give one with -a AGENT)")
	}
	if len(name) > MaxAgentLen {
		return Errorf(ENAMETOOLONG, "agent name %.20q... is %d bytes, more than %d", name, len(name), MaxAgentLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		lower := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if lower || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		return Errorf(EINVAL, "agent name %q: byte %d (%q) not allowed; names are [a-z0-9][a-z0-9._-]{0,62}", name, i, c)
	}
	return nil
}

// CheckKey reports why key is not a valid state key, or nil. A key is a
// relative slash-separated path: not empty, not absolute, no "." or ".."
// or empty element, valid UTF-8 without control characters (a newline in
// a key would break every line-based list of keys, the daemon's own list
// of uncommitted paths among them), at most MaxKeyLen bytes.
func CheckKey(key string) *Error {
	return checkPath("key", key, false)
}

// CheckPrefix is CheckKey for a list prefix, which may be empty and may end
// in a slash.
func CheckPrefix(prefix string) *Error {
	if prefix == "" {
		return nil
	}
	return checkPath("prefix", strings.TrimSuffix(prefix, "/"), true)
}

// isControl reports whether r is a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }

func checkPath(what, key string, prefix bool) *Error {
	switch {
	case key == "" && !prefix:
		return Errorf(EINVAL, "%s is empty", what)
	case len(key) > MaxKeyLen:
		return Errorf(ENAMETOOLONG, "%s is %d bytes, more than %d", what, len(key), MaxKeyLen)
	case strings.IndexByte(key, 0) >= 0:
		return Errorf(EINVAL, "%s %q contains a NUL byte", what, key)
	case !utf8.ValidString(key):
		return Errorf(EINVAL, "%s %q is not valid UTF-8", what, key)
	case strings.IndexFunc(key, isControl) >= 0:
		i := strings.IndexFunc(key, isControl)
		r, _ := utf8.DecodeRuneInString(key[i:])
		return Errorf(EINVAL, "%s %q has a control character (%U) at byte %d; keys are printable text", what, key, r, i)
	case key[0] == '/':
		return Errorf(EINVAL, "%s %q is absolute; keys are relative paths like notes/today.md", what, key)
	}
	for elem := range strings.SplitSeq(key, "/") {
		switch {
		case elem == "":
			return Errorf(EINVAL, "%s %q has an empty path element", what, key)
		case elem == "." || elem == "..":
			return Errorf(EINVAL, "%s %q has a %q element; keys may not leave the agent's state", what, key, elem)
		case len(elem) > MaxKeyElem:
			return Errorf(ENAMETOOLONG, "%s %q has an element of %d bytes, more than %d", what, key, len(elem), MaxKeyElem)
		}
	}
	return nil
}
