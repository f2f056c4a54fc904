package audit

import (
	"slices"
	"sort"
	"time"
)

// Since is a seq from which a scan finds every entry of time t or later,
// reading little before them: the first entry of the last segment whose
// first entry is older than t (1 when there is none). It reads one line
// of each of about log2(segments) segments. Entries' times follow their
// seqs, but where the clock stepped back: a caller that does not find
// what it looks for from there looks from 1.
func (l *Log) Since(t time.Time) uint64 {
	l.mu.Lock()
	segs := slices.Clone(l.segs)
	l.mu.Unlock()
	want := FormatTime(t)
	// The first segment whose first entry is of t or later.
	i := sort.Search(len(segs), func(i int) bool {
		line, err := l.Line(segs[i])
		in, ok := Peek(line)
		return err != nil || !ok || in.Time >= want
	})
	if i == 0 {
		return 1
	}
	return segs[i-1]
}
