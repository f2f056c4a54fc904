package bus

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestOrderFilterAndLoss(t *testing.T) {
	b := New()
	all := b.Subscribe(3, nil)
	ops := b.Subscribe(10, func(e *Event) bool { return e.Agent == "ops" })
	defer all.Close()
	defer ops.Close()
	for i := 1; i <= 5; i++ {
		agent := "dev"
		if i%2 == 1 {
			agent = "ops"
		}
		b.Publish(Event{Name: "state.changed", Seq: uint64(i), Agent: agent})
	}
	select {
	case <-all.Ready():
	default:
		t.Fatal("Ready not signalled")
	}
	evs, lost := all.Take(nil)
	if len(evs) != 3 || lost != 2 {
		t.Fatalf("full queue: got %d events, %d lost; want 3 and 2", len(evs), lost)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if evs, lost = all.Take(evs[:0]); len(evs) != 0 || lost != 0 {
		t.Fatalf("second Take: %d events, %d lost", len(evs), lost)
	}
	evs, lost = ops.Take(nil)
	if lost != 0 || len(evs) != 3 || evs[0].Seq != 1 || evs[1].Seq != 3 || evs[2].Seq != 5 {
		t.Fatalf("filtered: %+v lost %d", evs, lost)
	}
}

func TestCloseStopsDelivery(t *testing.T) {
	b := New()
	s := b.Subscribe(4, nil)
	s.Close()
	s.Close()
	if n := b.Subscribers(); n != 0 {
		t.Fatalf("%d subscribers after Close", n)
	}
	b.Publish(Event{Name: "x"})
	if evs, _ := s.Take(nil); len(evs) != 0 {
		t.Fatalf("closed sub got %d events", len(evs))
	}
}

// A subscriber that never reads must not slow the publisher down or make
// it block.
func TestSlowSubscriberNeverBlocks(t *testing.T) {
	b := New()
	slow := b.Subscribe(1, nil)
	defer slow.Close()
	fast := b.Subscribe(1<<20, nil)
	defer fast.Close()
	var got int
	var wg sync.WaitGroup
	wg.Add(1)
	stop := make(chan struct{})
	go func() {
		defer wg.Done()
		var buf []Event
		for {
			select {
			case <-fast.Ready():
				buf, _ = fast.Take(buf[:0])
				got += len(buf)
			case <-stop:
				buf, _ = fast.Take(buf[:0])
				got += len(buf)
				return
			}
		}
	}()
	const n = 100000
	done := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			b.Publish(Event{Seq: uint64(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("publisher blocked on a subscriber that does not read")
	}
	close(stop)
	wg.Wait()
	if got != n {
		t.Fatalf("reading subscriber got %d of %d", got, n)
	}
	evs, lost := slow.Take(nil)
	if len(evs) != 1 || lost != n-1 {
		t.Fatalf("slow subscriber: %d events, %d lost; want 1 and %d", len(evs), lost, n-1)
	}
}

// TestEncodedOnce: with several subscribers an event is encoded once, and
// every subscriber gets the same bytes.
func TestEncodedOnce(t *testing.T) {
	b := New()
	subs := []*Sub{b.Subscribe(10, nil), b.Subscribe(10, nil), b.Subscribe(10, nil)}
	b.Publish(Event{Name: "state.changed", Key: "k"})
	calls := 0
	var got []string
	for _, s := range subs {
		evs, _ := s.Take(nil)
		if len(evs) != 1 {
			t.Fatalf("got %d events", len(evs))
		}
		enc, err := evs[0].Encoded(func() ([]byte, error) {
			calls++
			return []byte(evs[0].Name + " " + evs[0].Key), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(enc))
	}
	if calls != 1 || got[0] != "state.changed k" || got[1] != got[0] || got[2] != got[0] {
		t.Fatalf("encoded %d times: %q", calls, got)
	}
}

func TestFollow(t *testing.T) {
	b := New()
	s := b.Subscribe(2, nil)
	defer s.Close()
	b.Publish(Event{Name: "old", Seq: 1}, Event{Name: "new", Seq: 2}, Event{Name: "x", Seq: 3}, Event{Name: "y", Seq: 4})
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	var lost uint64
	flushes := 0
	err := s.Follow(ctx, 1, func() error { flushes++; return nil }, func(ev *Event) error {
		got = append(got, ev.Name)
		return nil
	}, func(n uint64) error {
		lost += n
		cancel()
		return nil
	})
	if err != nil || len(got) != 1 || got[0] != "new" || lost != 2 || flushes != 2 {
		t.Fatal(got, lost, flushes, err)
	}
	boom := errors.New("boom")
	b.Publish(Event{Name: "z"})
	if err := s.Follow(context.Background(), 0, func() error { return nil }, func(*Event) error { return boom }, nil); err != boom {
		t.Fatal(err)
	}
}

// A storm of events reaches a follower a batch per flush (FollowGap
// apart), while an event after a quiet spell is flushed at once.
func TestFollowBatchesAStorm(t *testing.T) {
	b := New()
	s := b.Subscribe(1000, nil)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	flushes, got := 0, 0
	flushed := make(chan int, 1000)
	done := make(chan error, 1)
	go func() {
		done <- s.Follow(ctx, 0, func() error {
			mu.Lock()
			flushes++
			n := got
			mu.Unlock()
			flushed <- n
			return nil
		}, func(*Event) error {
			mu.Lock()
			got++
			mu.Unlock()
			return nil
		}, func(uint64) error { return nil })
	}()
	<-flushed // the first flush, before any event
	// 50 events 100 us apart (a busy wait: sleeps are coarser): one
	// flush each without the gap, one per FollowGap with it.
	const storm = 50
	start := time.Now()
	for i := range storm {
		b.Publish(Event{Name: "e", Seq: uint64(i + 1)})
		for t0 := time.Now(); time.Since(t0) < 100*time.Microsecond; {
		}
	}
	for n := 0; n < storm; n = <-flushed {
	}
	elapsed := time.Since(start)
	mu.Lock()
	stormFlushes := flushes - 1
	mu.Unlock()
	if limit := int(elapsed/FollowGap) + 2; stormFlushes > limit {
		t.Fatalf("%d events over %v took %d flushes, more than one per %v (%d)", storm, elapsed, stormFlushes, FollowGap, limit)
	}
	// After a quiet spell, one event is flushed.
	time.Sleep(2 * FollowGap)
	b.Publish(Event{Name: "lone", Seq: storm + 1})
	for n := 0; n < storm+1; {
		select {
		case n = <-flushed: // a wake with nothing new flushes too
		case <-time.After(10 * time.Second):
			t.Fatal("the lone event was never flushed")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
