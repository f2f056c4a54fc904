package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/proto"
)

// Actor is who made a call: the peer's credentials and, when the process
// belongs to a run, the agent and run.
type Actor struct {
	UID   uint32 `json:"uid"`
	PID   int32  `json:"pid,omitempty"`
	Agent string `json:"agent,omitempty"`
	Run   string `json:"run,omitempty"`
	// Node is the fleet node a call came from (its signature verified),
	// "" for a call made here.
	Node string `json:"node,omitempty"`
}

// Entry is one audit record. Its JSON line is the on-disk form and the
// `audit` record that ox-audit prints.
type Entry struct {
	Type   string    `json:"type"`   // always "audit"
	Seq    uint64    `json:"seq"`    // 1, 2, 3 ... without gaps
	Time   time.Time `json:"time"`   // UTC, RFC 3339 with nanoseconds
	Actor  Actor     `json:"actor"`  // who
	Op     string    `json:"op"`     // e.g. "state.save"
	Target string    `json:"target"` // e.g. "ops:notes/today.md"
	Args   string    `json:"args"`   // ArgsDigest of the request's args
	Result string    `json:"result"` // "ok" or an errno name like "ENOENT"
	// Count, First and Last make the entry a summary: Count refusals like
	// it (actor, op, target, result) between First and Last that were not
	// logged one by one (see Coalescer). Absent on every other entry.
	Count uint64    `json:"count,omitempty"`
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	Prev  string    `json:"prev"` // hash of the previous entry (64 zeros for seq 1)
	Hash  string    `json:"hash"` // hex BLAKE3(prev raw || body)
}

// Recorder commits an entry another package made and waits until it is
// durable: event, when not "", names its bus event (else its op does),
// agent and key name the agent and the key of the event, data is the
// event's (it must not change once given). It is the kernel's group
// commit, as the subsystems that record their own entries see it.
type Recorder func(ctx context.Context, e *Entry, event, agent, key string, data any) error

// ArgsDigest is the hex BLAKE3-256 digest of a request's arguments, the
// Args of its entry: the log proves what was asked without holding the
// (possibly large or secret) arguments themselves.
func ArgsDigest(args []byte) string {
	sum := blake3.Sum256(args)
	var h [64]byte // one allocation, the string's (EncodeToString makes two)
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// The fixed parts of an entry line that verification finds by offset.
const (
	linePrefix = `{"type":"audit","seq":`
	prevKey    = `,"prev":"`
	hashKey    = `,"hash":"`
	hexLen     = 64
	// hashTail is the length of `,"hash":"<64 hex>"}`, the bytes after the body.
	hashTail = len(hashKey) + hexLen + 2
	// prevTail is the length of `,"prev":"<64 hex>"`, the end of the body.
	prevTail = len(prevKey) + hexLen + 1
	// minLine is shorter than any real line; it only keeps offsets in range.
	minLine = len(linePrefix) + 2 + prevTail + hashTail

	// timeLayout is RFC 3339 with all nine digits of nanoseconds, so every
	// time has the same width.
	timeLayout = proto.TimeNano9
)

// FormatTime formats t as entries write their time (UTC, nanoseconds, fixed
// width), so that records derived from entries read the same.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// MaxLineBytes bounds one entry's line. Append refuses a longer entry (the
// kernel bounds targets and ops well below it), and Verify, Open and Scan
// treat a longer line as damage rather than read it into memory.
const MaxLineBytes = 1 << 20

var zeroHex = bytes.Repeat([]byte{'0'}, hexLen)

var errTimeRange = errors.New("audit: entry time outside years 0000-9999")

// appendBody appends the body of e's line (everything the hash covers) to b.
// e.Time must already be UTC.
func appendBody(b []byte, e *Entry, prev *[32]byte) []byte {
	b = append(b, linePrefix...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"time":"`...)
	b = proto.AppendTimeNano9(b, e.Time)
	b = append(b, `","actor":{"uid":`...)
	b = strconv.AppendUint(b, uint64(e.Actor.UID), 10)
	if e.Actor.PID != 0 {
		b = append(b, `,"pid":`...)
		b = strconv.AppendInt(b, int64(e.Actor.PID), 10)
	}
	if e.Actor.Agent != "" {
		b = append(b, `,"agent":`...)
		b = proto.AppendString(b, e.Actor.Agent)
	}
	if e.Actor.Run != "" {
		b = append(b, `,"run":`...)
		b = proto.AppendString(b, e.Actor.Run)
	}
	if e.Actor.Node != "" {
		b = append(b, `,"node":`...)
		b = proto.AppendString(b, e.Actor.Node)
	}
	b = append(b, `},"op":`...)
	b = proto.AppendString(b, e.Op)
	b = append(b, `,"target":`...)
	b = proto.AppendString(b, e.Target)
	b = append(b, `,"args":`...)
	b = proto.AppendString(b, e.Args)
	b = append(b, `,"result":`...)
	b = proto.AppendString(b, e.Result)
	if e.Count > 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, e.Count, 10)
		b = append(b, `,"first":"`...)
		b = e.First.UTC().AppendFormat(b, timeLayout)
		b = append(b, `","last":"`...)
		b = e.Last.UTC().AppendFormat(b, timeLayout)
		b = append(b, '"')
	}
	b = append(b, prevKey...)
	b = hex.AppendEncode(b, prev[:])
	b = append(b, '"')
	return b
}

// hashLine computes the hash of a line from its prev (raw) and body, using
// scratch to avoid an allocation; it returns the (possibly grown) scratch.
func hashLine(scratch []byte, prev *[32]byte, body []byte) ([32]byte, []byte) {
	scratch = append(append(scratch[:0], prev[:]...), body...)
	return blake3.Sum256(scratch), scratch
}

// lineParts are the pieces of an entry line found by offset.
type lineParts struct {
	seq  uint64
	body []byte // everything the hash covers
	prev []byte // 64 hex digits, inside body
	hash []byte // 64 hex digits, after body
}

// splitLine finds seq, body, prev and hash of one entry line (without its
// newline) by fixed offsets, without parsing the JSON in between. It
// returns a short reason when the line does not have the shape of an entry.
func splitLine(line []byte) (p lineParts, why string) {
	n := len(line)
	if n < minLine || !bytes.HasPrefix(line, []byte(linePrefix)) {
		return p, "not an audit entry line"
	}
	i := len(linePrefix)
	if line[i] < '1' || line[i] > '9' {
		return p, "seq is not a positive integer"
	}
	var seq uint64
	for ; i < n && line[i] >= '0' && line[i] <= '9'; i++ {
		d := uint64(line[i] - '0')
		if seq > (1<<64-1-d)/10 {
			return p, "seq overflows"
		}
		seq = seq*10 + d
	}
	if i == n || line[i] != ',' {
		return p, "seq is not a positive integer"
	}
	if line[n-1] != '}' || line[n-2] != '"' || string(line[n-hashTail:n-hashTail+len(hashKey)]) != hashKey {
		return p, `line does not end with "hash"`
	}
	body := line[:n-hashTail]
	m := len(body)
	if m-prevTail < i || body[m-1] != '"' || string(body[m-prevTail:m-prevTail+len(prevKey)]) != prevKey {
		return p, `"prev" does not come right before "hash"`
	}
	return lineParts{seq: seq, body: body, prev: body[m-1-hexLen : m-1], hash: line[n-2-hexLen : n-2]}, ""
}

// unhex maps a lowercase hex digit to its value and anything else to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	return t
}()

// decodeHex decodes 64 lowercase hex digits. Upper case is refused so that
// one hash has exactly one spelling.
func decodeHex(dst *[32]byte, src []byte) bool {
	if len(src) != hexLen {
		return false
	}
	var bad byte
	for i := range dst {
		hi, lo := unhex[src[2*i]], unhex[src[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo
	}
	return bad&0xf0 == 0
}

// parseSeq reads the seq of a line cheaply (0 if it is not an entry line).
func parseSeq(line []byte) uint64 {
	if !bytes.HasPrefix(line, []byte(linePrefix)) {
		return 0
	}
	var seq uint64
	for _, c := range line[len(linePrefix):] {
		if c < '0' || c > '9' {
			break
		}
		seq = seq*10 + uint64(c-'0')
	}
	return seq
}
