package proto

import (
	"encoding/base64"
	"encoding/binary"
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
	Agent    string `json:"agent"`
	Key      string `json:"key"`
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
	// Mode and Changed are what the mount shows besides the value (they
	// do not travel on the wire): the permission bits with ModeSet, or 0
	// for a key never given a mode (shown 0644), and the time of the
	// key's last change of any kind (value, mode or time): its ctime.
	Mode    uint32    `json:"-"`
	Changed time.Time `json:"-"`
}

// ModeSet marks StateRecord.Mode as set (a mode of 0 is one).
const ModeSet = 1 << 31

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
	i := 0
	for i < len(v) {
		// Whole words of printable ASCII have no control byte.
		for i+8 <= len(v) && printableWord(binary.LittleEndian.Uint64(v[i:])) {
			i += 8
		}
		for limit := min(i+8, len(v)); i < limit; i++ {
			if c := v[i]; c < 0x20 && c != '\n' && c != '\t' && c != '\r' {
				ctl++
			}
		}
	}
	return ctl*15 <= len(v) && utf8.Valid(v)
}

// MaxLineFor is the request line size that a value of maxValue bytes needs
// in the worst case (base64) plus room for the envelope.
func MaxLineFor(maxValue int) int {
	return (maxValue+2)/3*4 + 64<<10
}
