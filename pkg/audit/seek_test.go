package audit

import (
	"slices"
	"testing"
	"time"
)

// TestSince: the seq Since gives is at or before the first entry of a
// time, in its segment or the one before, over a log of many segments.
func TestSince(t *testing.T) {
	l := open(t, t.TempDir(), Options{SegmentBytes: 2 << 10})
	defer l.Close()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 600
	es := entries(0, n)
	for i, e := range es {
		e.Time = base.Add(time.Duration(i) * time.Second) // seq i+1
	}
	for i := 0; i < n; i += 10 { // a segment closes between appends
		if err := l.Append(es[i : i+10]); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	segs := slices.Clone(l.segs)
	l.mu.Unlock()
	if len(segs) < 10 {
		t.Fatalf("only %d segments", len(segs))
	}
	for k := 0; k < n; k += 7 {
		seq := uint64(k + 1) // the first entry of base+k s
		got := l.Since(base.Add(time.Duration(k) * time.Second))
		// The segment of seq, or, when seq begins one, the one before.
		want := uint64(1)
		for _, s := range segs {
			if s < seq {
				want = s
			}
		}
		if got != want {
			t.Errorf("Since(base+%ds) = %d, want %d (entry %d)", k, got, want, seq)
		}
	}
	if got := l.Since(base.Add(-time.Hour)); got != 1 {
		t.Errorf("before the first entry: %d", got)
	}
	if got := l.Since(base.Add(time.Hour)); got != segs[len(segs)-1] {
		t.Errorf("after the last entry: %d, want the last segment's %d", got, segs[len(segs)-1])
	}
}
