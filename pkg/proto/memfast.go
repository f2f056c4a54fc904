package proto

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"time"
)

// The fast paths of the memory records: a bulk remember's reply holds a
// record for each memory (up to MaxRememberBatch of them) and a recall
// streams one per hit, and encoding/json spent more on them than the
// daemon spent on the memories. They are written here in the shape
// encoding/json gives them, byte for byte (Marshal), and read back in that
// shape without reflection; whatever they do not take (a float that is
// not finite, a time encoding/json refuses; a record from elsewhere, with
// its fields in another order) goes to encoding/json, which decides.
// FuzzMemoryRecord holds the two to the same results.

// appendFloat appends f as encoding/json writes a float64; ok is false
// for NaN and the infinities, which encoding/json refuses.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 is written 1e-7, as encoding/json does.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendTimeJSON appends t as time.Time.MarshalJSON writes it, quoted;
// ok is false where MarshalJSON fails (a year outside 0 to 9999, a zone
// offset of a day or more).
func appendTimeJSON(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*60*60 || off >= 24*60*60 {
		return b, false
	}
	b = append(b, '"')
	b = AppendTime(b, t)
	return append(b, '"'), true
}

// AppendMemoryRecord appends r as Marshal writes it. ok is false, with b
// as it was, for a record encoding/json would refuse (a score or an
// importance that is not finite, a time it cannot write).
func AppendMemoryRecord(b []byte, r *MemoryRecord) (_ []byte, ok bool) {
	b0 := len(b)
	b = append(b, `{"type":`...)
	b = AppendString(b, r.Type)
	b = append(b, `,"id":`...)
	b = AppendString(b, r.ID)
	b = append(b, `,"agent":`...)
	b = AppendString(b, r.Agent)
	b = append(b, `,"kind":`...)
	b = AppendString(b, r.Kind)
	if r.Text != "" {
		b = append(b, `,"text":`...)
		b = AppendString(b, r.Text)
	}
	if r.Score != 0 {
		b = append(b, `,"score":`...)
		if b, ok = appendFloat(b, r.Score); !ok {
			return b[:b0], false
		}
	}
	if len(r.Tags) > 0 {
		b = appendStrings(append(b, `,"tags":`...), r.Tags)
	}
	if r.Source != "" {
		b = append(b, `,"source":`...)
		b = AppendString(b, r.Source)
	}
	b = append(b, `,"created":`...)
	if b, ok = appendTimeJSON(b, r.Created); !ok {
		return b[:b0], false
	}
	if r.Importance != 0 {
		b = append(b, `,"importance":`...)
		if b, ok = appendFloat(b, r.Importance); !ok {
			return b[:b0], false
		}
	}
	if r.Expires != nil {
		b = append(b, `,"expires":`...)
		if b, ok = appendTimeJSON(b, *r.Expires); !ok {
			return b[:b0], false
		}
	}
	if r.Forgotten {
		b = append(b, `,"forgotten":true`...)
	}
	return append(b, '}'), true
}

// appendStrings appends ss as a JSON array of strings.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// memoryRecordSize is about what AppendMemoryRecord writes for r, to
// size a buffer once.
func memoryRecordSize(r *MemoryRecord) int {
	n := 160 + len(r.ID) + len(r.Agent) + len(r.Kind) + len(r.Text) + len(r.Source)
	for _, t := range r.Tags {
		n += len(t) + 3
	}
	return n
}

// AppendMemRememberResult appends res as Marshal writes it (ok as
// AppendMemoryRecord's).
func AppendMemRememberResult(b []byte, res *MemRememberResult) ([]byte, bool) {
	if res.Memories == nil {
		return append(b, `{"memories":null}`...), true
	}
	b0 := len(b)
	b = append(b, `{"memories":[`...)
	for i := range res.Memories {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = AppendMemoryRecord(b, &res.Memories[i]); !ok {
			return b[:b0], false
		}
	}
	return append(b, ']', '}'), true
}

// AppendMemRememberArgs appends a as encoding/json writes it, but for
// HTML's characters, which stay as they are: the shape the daemon's fast
// path reads (fastRememberArgs), with room made for it at once. ok is
// false, with b as it was, for an importance that is not finite.
func AppendMemRememberArgs(b []byte, a *MemRememberArgs) (_ []byte, ok bool) {
	b = slices.Grow(b, memRememberArgsSize(a))
	b0 := len(b)
	b = append(b, `{"agent":`...)
	b = AppendString(b, a.Agent)
	if a.Memories == nil {
		return append(b, `,"memories":null}`...), true
	}
	b = append(b, `,"memories":[`...)
	for i := range a.Memories {
		m := &a.Memories[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		if m.Kind != "" {
			b = append(b, `"kind":`...)
			b = AppendString(b, m.Kind)
			b = append(b, ',')
		}
		b = append(b, `"text":`...)
		b = AppendString(b, m.Text)
		if len(m.Tags) > 0 {
			b = appendStrings(append(b, `,"tags":`...), m.Tags)
		}
		if m.Source != "" {
			b = append(b, `,"source":`...)
			b = AppendString(b, m.Source)
		}
		if m.Importance != 0 {
			b = append(b, `,"importance":`...)
			if b, ok = appendFloat(b, m.Importance); !ok {
				return b[:b0], false
			}
		}
		if m.TTL != "" {
			b = append(b, `,"ttl":`...)
			b = AppendString(b, m.TTL)
		}
		b = append(b, '}')
	}
	return append(b, ']', '}'), true
}

// memRememberArgsSize is about what AppendMemRememberArgs writes for a.
func memRememberArgsSize(a *MemRememberArgs) int {
	n := 32 + len(a.Agent)
	for i := range a.Memories {
		m := &a.Memories[i]
		n += 64 + len(m.Kind) + len(m.Text) + len(m.Source) + len(m.TTL)
		for _, t := range m.Tags {
			n += len(t) + 3
		}
	}
	return n
}

// ParseMemoryRecord reads into r a record in the shape AppendMemoryRecord
// writes it, without reflection. It reports false, leaving r in an
// unspecified state, for anything else, which the caller then decodes
// with encoding/json.
func ParseMemoryRecord(b []byte, r *MemoryRecord) bool {
	rest, ok := parseMemoryRecord(b, r, "", "")
	return ok && len(rest) == 0
}

// parseMemoryRecord reads the record at the start of p into r and
// returns what follows it. An agent or a kind equal to agent or kind
// reuses that string rather than allocating its own (a remember's records
// are mostly of one agent and one kind), as a type of "memory" does.
func parseMemoryRecord(p []byte, r *MemoryRecord, agent, kind string) (_ []byte, ok bool) {
	*r = MemoryRecord{}
	lit := func(s string) bool {
		if len(p) < len(s) || string(p[:len(s)]) != s {
			return false
		}
		p = p[len(s):]
		return true
	}
	str := func(dst *string) bool {
		*dst, p, ok = jsonString(p)
		return ok
	}
	known := func(dst *string, s string) bool {
		if len(p) > 0 && p[0] == '"' {
			if q := plainString(p[1:]); q >= 0 && string(p[1:1+q]) == s {
				*dst, p = s, p[q+2:]
				return true
			}
		}
		return str(dst)
	}
	num := func(dst *float64) bool {
		*dst, p, ok = jsonFloat(p)
		return ok
	}
	when := func(dst *time.Time) bool {
		if len(p) == 0 || p[0] != '"' {
			return false
		}
		q := bytes.IndexByte(p[1:], '"')
		if q < 0 {
			return false
		}
		s := p[1 : 1+q]
		if t, ok := parseTime(s); ok {
			*dst = t
		} else if dst.UnmarshalText(s) != nil {
			return false
		}
		p = p[q+2:]
		return true
	}
	if !lit(`{"type":`) || !known(&r.Type, RecordMemory) || !lit(`,"id":`) || !str(&r.ID) ||
		!lit(`,"agent":`) || !known(&r.Agent, agent) || !lit(`,"kind":`) || !known(&r.Kind, kind) {
		return nil, false
	}
	if lit(`,"text":`) && !str(&r.Text) {
		return nil, false
	}
	if lit(`,"score":`) && !num(&r.Score) {
		return nil, false
	}
	if lit(`,"tags":`) {
		if r.Tags, p, ok = jsonStrings(p); !ok {
			return nil, false
		}
	}
	if lit(`,"source":`) && !str(&r.Source) {
		return nil, false
	}
	if !lit(`,"created":`) || !when(&r.Created) {
		return nil, false
	}
	if lit(`,"importance":`) && !num(&r.Importance) {
		return nil, false
	}
	if lit(`,"expires":`) {
		r.Expires = new(time.Time)
		if !when(r.Expires) {
			return nil, false
		}
	}
	if lit(`,"forgotten":true`) {
		r.Forgotten = true
	}
	if !lit("}") {
		return nil, false
	}
	return p, true
}

// ParseMemRememberResult reads into res a reply in the shape
// AppendMemRememberResult writes it (see ParseMemoryRecord).
func ParseMemRememberResult(b []byte, res *MemRememberResult) bool {
	p, ok := bytes.CutPrefix(b, []byte(`{"memories":[`))
	if !ok {
		return false
	}
	if string(p) == "]}" {
		res.Memories = []MemoryRecord{}
		return true
	}
	// A record is at least 80 bytes: room for all, without growing.
	res.Memories = make([]MemoryRecord, 0, bytes.Count(p, []byte(`{"type":`)))
	var agent, kind string // the record before's
	for {
		res.Memories = append(res.Memories, MemoryRecord{})
		r := &res.Memories[len(res.Memories)-1]
		if p, ok = parseMemoryRecord(p, r, agent, kind); !ok || len(p) == 0 {
			return false
		}
		agent, kind = r.Agent, r.Kind
		if p[0] != ',' {
			return string(p) == "]}"
		}
		p = p[1:]
	}
}

// AppendRecord appends v as Marshal writes it, for the records that have
// a fast path here, with room made for it at once; ok is false, with b as
// it was, for others.
func AppendRecord(b []byte, v any) ([]byte, bool) {
	switch r := v.(type) {
	case *MemoryRecord:
		return AppendMemoryRecord(slices.Grow(b, memoryRecordSize(r)), r)
	case MemoryRecord:
		return AppendMemoryRecord(slices.Grow(b, memoryRecordSize(&r)), &r)
	case *MemRememberResult:
		n := 16
		for i := range r.Memories {
			n += memoryRecordSize(&r.Memories[i])
		}
		return AppendMemRememberResult(slices.Grow(b, n), r)
	}
	return b, false
}
