package memory

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oxios/oxios/pkg/proto"
)

// FromInput checks a memory as a remember gives it and makes the memory,
// created now: its tags sorted without repeats, its expiry from its ttl
// (working memories without one live workingTTL, if positive), a new id.
func FromInput(in proto.MemoryInput, now time.Time, workingTTL time.Duration) (*Memory, error) {
	m := &Memory{Kind: in.Kind, Tags: in.Tags, Source: in.Source, Importance: in.Importance, Text: in.Text, Created: now}
	if m.Kind == "" {
		m.Kind = Episodic
	}
	if !utf8.ValidString(in.Text) {
		return nil, proto.Errorf(proto.EINVAL, "text is not valid UTF-8")
	}
	if strings.TrimSpace(in.Text) == "" {
		return nil, proto.Errorf(proto.EINVAL, "text is empty")
	}
	if len(m.Tags) > 0 {
		tags := append([]string(nil), m.Tags...)
		sort.Strings(tags)
		m.Tags = tags[:0]
		for i, tg := range tags {
			if i == 0 || tg != tags[i-1] {
				m.Tags = append(m.Tags, tg)
			}
		}
	}
	ttl := time.Duration(-1)
	if in.TTL != "" {
		d, err := time.ParseDuration(in.TTL)
		if err != nil || d < 0 {
			return nil, proto.Errorf(proto.EINVAL, "ttl %q: want a duration such as 90m or 24h", in.TTL)
		}
		ttl = d
	} else if m.Kind == Working {
		ttl = workingTTL
	}
	if ttl > 0 {
		m.Expires = now.Add(ttl)
	}
	m.ID = NewID(now)
	if err := m.Check(); err != nil {
		return nil, proto.Errorf(proto.EINVAL, "%v", err)
	}
	return m, nil
}

// Record is m's record, as agent's.
func (m *Memory) Record(agent string) proto.MemoryRecord {
	r := proto.MemoryRecord{Type: proto.RecordMemory, ID: m.ID, Agent: agent, Kind: m.Kind, Text: m.Text,
		Tags: m.Tags, Source: m.Source, Created: m.Created, Importance: m.Importance}
	if !m.Expires.IsZero() {
		e := m.Expires
		r.Expires = &e
	}
	return r
}

// CheckBatch checks the size of a remember of n memories: one at least,
// at most proto.MaxRememberBatch.
func CheckBatch(n int) error {
	if n == 0 {
		return proto.Errorf(proto.EINVAL, "mem.remember: no memories given")
	}
	if n > proto.MaxRememberBatch {
		return proto.Errorf(proto.E2BIG, "mem.remember: %d memories in one request, more than %d", n, proto.MaxRememberBatch)
	}
	return nil
}

// KindsOf are the kinds of mems, in order (what a policy checks).
func KindsOf(mems []*Memory) []string {
	kinds := make([]string, len(mems))
	for i, m := range mems {
		kinds[i] = m.Kind
	}
	return kinds
}

// Remembered is the reply of a remember of mems of agent: their
// records, without their text.
func Remembered(agent string, mems []*Memory) proto.MemRememberResult {
	res := proto.MemRememberResult{Memories: make([]proto.MemoryRecord, len(mems))}
	for i, m := range mems {
		r := m.Record(agent)
		r.Text = ""
		res.Memories[i] = r
	}
	return res
}

// Texts are the texts of mems, in order (what is embedded).
func Texts(mems []*Memory) []string {
	texts := make([]string, len(mems))
	for i, m := range mems {
		texts[i] = m.Text
	}
	return texts
}

// FromInputs is FromInput of each memory of a remember of agent, with
// its file: all or none. A memory whose text leaves its file more than
// maxValue bytes is E2BIG; the error names the memory by its position
// when there are several, and says nothing was remembered.
func FromInputs(agent string, ins []proto.MemoryInput, now time.Time, workingTTL time.Duration, maxValue int64) ([]*Memory, [][]byte, error) {
	n := len(ins)
	mems := make([]*Memory, n)
	files := make([][]byte, n)
	for i, in := range ins {
		m, err := FromInput(in, now, workingTTL)
		if err == nil && len(m.Text) > int(maxValue)-512 {
			err = proto.Errorf(proto.E2BIG, "text is %d bytes, more than limits.max_value allows", len(m.Text))
		}
		if err != nil {
			var pe *proto.Error
			code := proto.EINVAL
			if errors.As(err, &pe) {
				code = pe.Code
			}
			where := ""
			if n > 1 {
				where = fmt.Sprintf("memory %d of %d: ", i+1, n)
			}
			return nil, nil, proto.Errorf(code, "%s: %s%v; nothing was remembered", agent, where, strings.TrimSuffix(err.Error(), " ("+code+")"))
		}
		mems[i], files[i] = m, m.Encode()
	}
	return mems, files, nil
}
