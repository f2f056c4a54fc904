package expiry

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestFiresInOrderOnce: deadlines fire once each, none early, the earliest
// first, whatever order they were added in; after Stop nothing fires.
func TestFiresInOrderOnce(t *testing.T) {
	var mu sync.Mutex
	var got []string
	fired := make(chan struct{}, 16)
	tm := New(func(now int64, due map[string][]string) {
		mu.Lock()
		for agent, ids := range due {
			for _, id := range ids {
				got = append(got, agent+"/"+id)
			}
		}
		mu.Unlock()
		fired <- struct{}{}
	})
	base := time.Now()
	at := func(d time.Duration) int64 { return base.Add(d).UnixNano() }
	tm.Reset([]Item{{At: at(60 * time.Millisecond), Agent: "a", ID: "2"}})
	tm.Add(Item{At: at(20 * time.Millisecond), Agent: "a", ID: "1"}, Item{At: at(time.Hour), Agent: "b", ID: "late"})
	for range 2 {
		select {
		case <-fired:
		case <-time.After(5 * time.Second):
			t.Fatal("a deadline did not fire")
		}
	}
	if time.Since(base) < 60*time.Millisecond {
		t.Fatal("fired early")
	}
	mu.Lock()
	if !slices.Equal(got, []string{"a/1", "a/2"}) {
		t.Fatalf("fired %v, want a/1 then a/2", got)
	}
	mu.Unlock()
	tm.Stop()
	tm.Add(Item{At: at(0), Agent: "c", ID: "after-stop"})
	select {
	case <-fired:
		t.Fatal("fired after Stop")
	case <-time.After(100 * time.Millisecond):
	}
}
