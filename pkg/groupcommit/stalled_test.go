package groupcommit

import (
	"testing"
	"time"
)

// TestStalled: an idle queue is not stalled however long it idles; one
// whose barrier holds it is, once nothing moved for the time asked, and
// is no longer once the barrier is done.
func TestStalled(t *testing.T) {
	s := &store{vals: map[string]int{}}
	q := newQueue(s)
	q.Start()
	defer q.Stop()
	if err := submit(q, &ftx{key: "a", val: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if q.Stalled(10 * time.Millisecond) {
		t.Fatal("an idle queue is stalled")
	}
	release := make(chan struct{})
	held := &ftx{barrier: func() { <-release }}
	if err := q.Submit(held, false); err != nil {
		t.Fatal(err)
	}
	if q.Stalled(time.Hour) {
		t.Fatal("stalled for an hour at once")
	}
	time.Sleep(30 * time.Millisecond)
	if !q.Stalled(10 * time.Millisecond) {
		t.Fatal("a queue held by a barrier for 30 ms is not stalled for 10 ms")
	}
	close(release)
	if err := submit(q, &ftx{key: "b", val: 2}); err != nil {
		t.Fatal(err)
	}
	if q.Stalled(10 * time.Millisecond) {
		t.Fatal("stalled after the barrier is done")
	}
}
