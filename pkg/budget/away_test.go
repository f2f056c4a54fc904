package budget

import (
	"fmt"
	"testing"
	"time"
)

// TestPruneAway: a home keeps a run it placed until charged and old, the
// newest MaxCharged charged runs for KeepCharged, and a run never
// charged for KeepPlaced.
func TestPruneAway(t *testing.T) {
	now := time.Now()
	b := &File{Away: map[string]*Away{}}
	at := func(d time.Duration) *time.Time { x := now.Add(-d); return &x }
	for i := range MaxCharged + 10 {
		b.Away[AwayKey("b", fmt.Sprint("c", i))] = &Away{Placed: *at(time.Hour), Charged: at(time.Duration(i) * time.Second)}
	}
	b.Away[AwayKey("b", "old-charged")] = &Away{Placed: *at(KeepCharged + 2*time.Hour), Charged: at(KeepCharged + time.Hour)}
	b.Away[AwayKey("b", "pending")] = &Away{Placed: *at(KeepPlaced - time.Hour)}
	b.Away[AwayKey("b", "lost")] = &Away{Placed: *at(KeepPlaced + time.Hour)}
	pruneAway(b, now)
	for key, want := range map[string]bool{
		AwayKey("b", "c0"): true, AwayKey("b", fmt.Sprint("c", MaxCharged-1)): true,
		AwayKey("b", fmt.Sprint("c", MaxCharged)): false, AwayKey("b", "old-charged"): false,
		AwayKey("b", "pending"): true, AwayKey("b", "lost"): false,
	} {
		if _, got := b.Away[key]; got != want {
			t.Errorf("%s kept: %v, want %v", key, got, want)
		}
	}
	if len(b.Away) != MaxCharged+1 {
		t.Errorf("%d entries kept, want %d", len(b.Away), MaxCharged+1)
	}
}
