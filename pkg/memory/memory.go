// Package memory is the file format of an agent's memories: one file per
// memory, agents/<agent>/mem/<kind>/<id>.md in the git work tree, holding a
// small front matter and the text (issue 5). The format is written and read
// by hand, strictly, so that a file either parses to exactly what was
// written or is refused with the line that is wrong:
//
//	---
//	id: 01JD3XQ4R6ZP1V3W5KQ8M2N7TB
//	kind: episodic
//	tags: [nginx, disk]
//	source: journalctl
//	created: 2026-11-22T02:36:48.123456789Z
//	importance: 0.5
//	expires: 2026-11-23T02:36:48Z
//	---
//	the text, as given, to the end of the file
//
// Keys come in this order; tags, source, importance and expires may be
// left out. Tags are [a-z0-9._:/-] words; source is one line of text.
package memory

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oxios/oxios/pkg/frontmatter"
	"github.com/oxios/oxios/pkg/proto"
)

// Kinds of memory.
const (
	Working  = proto.MemWorking
	Episodic = proto.MemEpisodic
	Semantic = proto.MemSemantic
)

// Kinds lists the kinds, in the order they are shown.
var Kinds = []string{Working, Episodic, Semantic}

// Limits of the fields.
const (
	MaxTags      = 32
	MaxTagLen    = proto.MaxTagLen
	MaxSourceLen = 256
	IDLen        = proto.MemIDLen
)

// Memory is one memory.
type Memory struct {
	ID         string
	Kind       string
	Tags       []string
	Source     string
	Created    time.Time
	Importance float64
	Expires    time.Time // zero: never
	Text       string
}

// CheckKind reports why k is not a kind (proto.CheckMemKind).
func CheckKind(k string) error { return asError(proto.CheckMemKind(k)) }

// CheckTag reports why t is not a valid tag (proto.CheckTag).
func CheckTag(t string) error { return asError(proto.CheckTag(t)) }

// CheckID reports why id is not a memory id (proto.CheckMemID).
func CheckID(id string) error { return asError(proto.CheckMemID(id)) }

// asError keeps a nil *proto.Error from becoming a non-nil error, and
// gives the message without its errno suffix, as these checks always did.
func asError(e *proto.Error) error {
	if e == nil {
		return nil
	}
	return errors.New(e.Message)
}

// Check reports why m cannot be stored.
func (m *Memory) Check() error {
	if err := CheckID(m.ID); err != nil {
		return err
	}
	if err := CheckKind(m.Kind); err != nil {
		return err
	}
	if len(m.Tags) > MaxTags {
		return fmt.Errorf("%d tags, more than %d", len(m.Tags), MaxTags)
	}
	for _, t := range m.Tags {
		if err := CheckTag(t); err != nil {
			return err
		}
	}
	if len(m.Source) > MaxSourceLen {
		return fmt.Errorf("source is %d bytes, more than %d", len(m.Source), MaxSourceLen)
	}
	if !utf8.ValidString(m.Source) || strings.ContainsAny(m.Source, "\r\n") || m.Source != strings.TrimSpace(m.Source) {
		return fmt.Errorf("source %.40q: want one line of UTF-8 without surrounding spaces", m.Source)
	}
	if !(m.Importance >= 0 && m.Importance <= 1) {
		return fmt.Errorf("importance %v: want a number from 0 to 1", m.Importance)
	}
	if m.Created.IsZero() {
		return fmt.Errorf("no creation time")
	}
	if strings.TrimSpace(m.Text) == "" {
		return fmt.Errorf("text is empty")
	}
	if !utf8.ValidString(m.Text) {
		return fmt.Errorf("text is not valid UTF-8")
	}
	return nil
}

// Key is the memory's path below the agent's mem folder: <kind>/<id>.md.
func (m *Memory) Key() string { return m.Kind + "/" + m.ID + ".md" }

// SplitKey is Key's inverse.
func SplitKey(key string) (kind, id string, ok bool) {
	kind, file, ok := strings.Cut(key, "/")
	if !ok || CheckKind(kind) != nil {
		return "", "", false
	}
	id, ok = strings.CutSuffix(file, ".md")
	if !ok || CheckID(id) != nil {
		return "", "", false
	}
	return kind, id, true
}

const timeLayout = time.RFC3339Nano

// Encode returns the file of m. m should pass Check.
func (m *Memory) Encode() []byte {
	b := make([]byte, 0, 160+len(m.Text))
	b = append(b, "---\nid: "...)
	b = append(b, m.ID...)
	b = append(b, "\nkind: "...)
	b = append(b, m.Kind...)
	if len(m.Tags) > 0 {
		b = append(b, "\ntags: ["...)
		for i, t := range m.Tags {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = append(b, t...)
		}
		b = append(b, ']')
	}
	if m.Source != "" {
		b = append(b, "\nsource: "...)
		b = append(b, m.Source...)
	}
	b = append(b, "\ncreated: "...)
	b = proto.AppendTime(b, m.Created.UTC())
	if m.Importance != 0 {
		b = append(b, "\nimportance: "...)
		b = strconv.AppendFloat(b, m.Importance, 'g', -1, 64)
	}
	if !m.Expires.IsZero() {
		b = append(b, "\nexpires: "...)
		b = proto.AppendTime(b, m.Expires.UTC())
	}
	b = append(b, "\n---\n"...)
	b = append(b, m.Text...)
	return b
}

// Parse reads a memory file. The error names the line that is wrong.
func Parse(b []byte) (*Memory, error) {
	m := &Memory{}
	keys := []string{"id", "kind", "tags", "source", "created", "importance", "expires"}
	next := 0
	rest, opened, err := frontmatter.Scan(b, func(line int, l string) error {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			return fmt.Errorf("line %d: want \"key: value\"", line)
		}
		i := next
		for i < len(keys) && keys[i] != k {
			i++
		}
		if i == len(keys) {
			return fmt.Errorf("line %d: unknown, repeated or misplaced key %q", line, k)
		}
		next = i + 1
		var err error
		switch k {
		case "id":
			m.ID = v
		case "kind":
			m.Kind = v
		case "tags":
			inner, ok := strings.CutPrefix(v, "[")
			if inner, ok2 := strings.CutSuffix(inner, "]"); ok && ok2 && inner != "" {
				m.Tags = strings.Split(inner, ", ")
			} else {
				err = fmt.Errorf("want [tag, tag]")
			}
		case "source":
			m.Source = v
			if v == "" {
				err = fmt.Errorf("empty source")
			}
		case "created":
			m.Created, err = parseTime(v)
		case "importance":
			m.Importance, err = strconv.ParseFloat(v, 64)
			if err == nil && (m.Importance == 0 || strconv.FormatFloat(m.Importance, 'g', -1, 64) != v) {
				err = fmt.Errorf("not in canonical form")
			}
		case "expires":
			m.Expires, err = parseTime(v)
		}
		if err != nil {
			return fmt.Errorf("line %d: %s: %v", line, k, err)
		}
		return nil
	})
	if !opened {
		return nil, fmt.Errorf("line 1: want \"---\" opening the front matter")
	}
	if err != nil {
		return nil, err
	}
	m.Text = string(rest)
	if m.ID == "" || m.Kind == "" || m.Created.IsZero() {
		return nil, fmt.Errorf("front matter lacks id, kind or created")
	}
	if err := m.Check(); err != nil {
		return nil, err
	}
	return m, nil
}

// parseTime reads a time as Encode writes it, and only so: UTC, RFC 3339
// with as many fraction digits as needed.
func parseTime(v string) (time.Time, error) {
	t, err := time.Parse(timeLayout, v)
	if err != nil {
		return t, err
	}
	t = t.UTC()
	if t.Format(timeLayout) != v {
		return time.Time{}, fmt.Errorf("%q is not in canonical form (UTC, RFC 3339)", v)
	}
	return t, nil
}

// Crockford's base32, as ULIDs use it.
const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

var decode = func() (d [256]int8) {
	for i := range d {
		d[i] = -1
	}
	for i := 0; i < len(alphabet); i++ {
		d[alphabet[i]] = int8(i)
	}
	return d
}()

// IDs are ULID-like: 48 bits of milliseconds then 80 bits that are random
// for the first id of a millisecond and incremented after it, so ids sort
// by creation time and stay unique within one process.
var idState struct {
	sync.Mutex
	ms   uint64
	hi   uint16
	lo   uint64
	seed bool
}

// NewID returns a new id for a memory made at t.
func NewID(t time.Time) string {
	ms := uint64(t.UnixMilli())
	s := &idState
	s.Lock()
	if ms <= s.ms && s.seed {
		ms = s.ms
		s.lo++
		if s.lo == 0 {
			s.hi++
		}
	} else {
		var r [10]byte
		if _, err := rand.Read(r[:]); err != nil {
			panic(err)
		}
		s.ms, s.hi, s.lo, s.seed = ms, binary.BigEndian.Uint16(r[:2])>>1, binary.BigEndian.Uint64(r[2:]), true
	}
	hi, lo := s.hi, s.lo
	s.Unlock()
	// 128 bits: ms(48) hi(16) lo(64), written as 26 base32 digits (130 bits,
	// the top two zero).
	var id [IDLen]byte
	v0 := ms<<16 | uint64(hi) // top 64 bits
	v1 := lo
	for i := IDLen - 1; i >= 0; i-- {
		id[i] = alphabet[v1&31]
		v1 = v1>>5 | (v0&31)<<59
		v0 >>= 5
	}
	return string(id[:])
}

// IDTime is the creation time encoded in id (to the millisecond).
func IDTime(id string) time.Time {
	// The first 10 digits are 50 bits: two zero bits, then the 48 of ms.
	var v0 uint64
	for i := 0; i < 10 && i < len(id); i++ {
		v0 = v0<<5 | uint64(decode[id[i]]&31)
	}
	return time.UnixMilli(int64(v0))
}
