package writeback

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBufferWritesAndLimits(t *testing.T) {
	w := Buffer{Max: 16}
	if err := w.WriteAt([]byte("abc"), 2); err != nil {
		t.Fatal(err)
	}
	if got := w.Bytes(); !bytes.Equal(got, []byte("\x00\x00abc")) {
		t.Fatalf("a write past the end zero-fills the gap: %q", got)
	}
	if err := w.WriteAt([]byte("0123456789abcdef!"), 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a write past Max: %v", err)
	}
	if got := w.Bytes(); !bytes.Equal(got, []byte("\x00\x00abc")) {
		t.Fatalf("a refused write changed the content: %q", got)
	}
	if err := w.Truncate(17); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("truncate past Max: %v", err)
	}
	w.Truncate(1)
	w.Truncate(4)
	if got := w.Bytes(); !bytes.Equal(got, []byte{0, 0, 0, 0}) {
		t.Fatalf("shrink then grow must zero-fill, not bring back old bytes: %q", got)
	}
	dest := make([]byte, 8)
	if got := w.ReadAt(dest, 3); len(got) != 1 {
		t.Fatalf("ReadAt near the end: %q", got)
	}
	if got := w.ReadAt(dest, 9); len(got) != 0 {
		t.Fatalf("ReadAt past the end: %q", got)
	}
}

// TestBufferCopiesWhatItGaveAway: content taken by a save, or shared from
// the store, is never changed by later writes.
func TestBufferCopiesWhatItGaveAway(t *testing.T) {
	var w Buffer
	w.WriteAt([]byte("hello"), 0)
	saved := w.Take()
	w.WriteAt([]byte("J"), 0)
	w.WriteAt([]byte("!"), 5)
	if string(saved) != "hello" || string(w.Bytes()) != "Jello!" {
		t.Fatalf("saved %q, working copy %q", saved, w.Bytes())
	}
	store := []byte("store")
	w.Share(store)
	w.Truncate(3)
	w.WriteAt([]byte("X"), 0)
	if string(store) != "store" || string(w.Bytes()) != "Xto" {
		t.Fatalf("store %q, working copy %q", store, w.Bytes())
	}
	// Appends grow in amortized O(1): capacity doubles.
	var a Buffer
	for i := 0; i < 1000; i++ {
		a.WriteAt([]byte("x"), int64(a.Len()))
	}
	if cap(a.b) > 2048 || a.Len() != 1000 {
		t.Fatalf("len %d cap %d", a.Len(), cap(a.b))
	}
}

// fakeSave is a save the test completes by hand.
type fakeSave struct {
	done chan struct{}
	err  error
}

func newFake() *fakeSave                  { return &fakeSave{done: make(chan struct{})} }
func (f *fakeSave) Wait() error           { <-f.done; return f.err }
func (f *fakeSave) Done() <-chan struct{} { return f.done }

// TestQueueShowsUntilDurable: readers see the last save's content while
// it is in flight, and the store's as soon as it is durable, even before
// the queue has recorded it (the stale read of issue 25: a socket save
// made after it, and durable, was hidden by the mount's older content).
func TestQueueShowsUntilDurable(t *testing.T) {
	var mu sync.Mutex
	var inflight atomic.Int64
	var recorded []bool
	q := Queue{Lock: &mu, InFlight: &inflight}
	q.Recorded = func(last bool, err error) { recorded = append(recorded, last) }
	s1, s2 := newFake(), newFake()
	mu.Lock()
	q.Add([]byte("one"), s1)
	q.Add([]byte("two"), s2)
	v, ok := q.Shown()
	mu.Unlock()
	if !ok || string(v) != "two" || inflight.Load() != 2 {
		t.Fatalf("shown %q %v, in flight %d", v, ok, inflight.Load())
	}
	// The first save lands: the second is still shown.
	close(s1.done)
	waitFor(t, func() bool { return inflight.Load() == 1 })
	mu.Lock()
	v, ok = q.Shown()
	busy := q.Busy()
	mu.Unlock()
	if !ok || string(v) != "two" || !busy {
		t.Fatalf("after the first save: shown %q %v busy %v", v, ok, busy)
	}
	// Hold the lock so the second cannot be recorded: once it is durable
	// the content is no longer shown all the same.
	mu.Lock()
	close(s2.done)
	time.Sleep(10 * time.Millisecond)
	if _, ok := q.Shown(); ok {
		mu.Unlock()
		t.Fatal("a durable save's content is still shown instead of the store's")
	}
	settled := q.Settled()
	mu.Unlock()
	<-settled
	mu.Lock()
	defer mu.Unlock()
	if q.Busy() || len(recorded) != 2 || recorded[0] || !recorded[1] {
		t.Fatalf("busy %v, recorded %v (want [false true])", q.Busy(), recorded)
	}
}

// TestQueueRecordsInOrder: outcomes are recorded in the order the saves
// were added, whatever order they complete in, and a failure is reported
// once.
func TestQueueRecordsInOrder(t *testing.T) {
	var mu sync.Mutex
	var order []bool
	q := Queue{Lock: &mu}
	q.Recorded = func(last bool, err error) { order = append(order, err != nil) }
	s1, s2 := newFake(), newFake()
	s1.err = errors.New("disk full")
	mu.Lock()
	q.Add([]byte("a"), s1)
	q.Add([]byte("b"), s2)
	settled := q.Settled()
	mu.Unlock()
	close(s2.done) // the later one completes first
	time.Sleep(5 * time.Millisecond)
	mu.Lock()
	if len(order) != 0 {
		mu.Unlock()
		t.Fatalf("the second save was recorded before the first: %v", order)
	}
	mu.Unlock()
	close(s1.done)
	<-settled
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || !order[0] || order[1] {
		t.Fatalf("recorded %v, want [failed ok]", order)
	}
	if err := q.TakeErr(); err == nil || err.Error() != "disk full" {
		t.Fatalf("TakeErr: %v", err)
	}
	if err := q.TakeErr(); err != nil {
		t.Fatalf("a failure is reported once: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not within 5s")
		}
	}
}
