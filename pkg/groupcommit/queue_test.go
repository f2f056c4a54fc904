package groupcommit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// ftx is a transaction of the tests: a value for a key, or a barrier.
type ftx struct {
	key     string
	val     int
	barrier func()
	done    chan struct{}
	err     error
}

// store is what the tests' queue commits to: touched by the leader only.
type store struct {
	vals    map[string]int
	commits int // groups committed
	block   chan struct{}
}

func newQueue(s *store) *Queue[*ftx] {
	return New(Hooks[*ftx]{
		Barrier: func(t *ftx) func() { return t.barrier },
		Commit: func(group []*ftx) {
			if s.block != nil {
				<-s.block
			}
			s.commits++
			for _, t := range group {
				s.vals[t.key] = t.val
			}
		},
		Done: func(t *ftx) {
			if t.done != nil {
				close(t.done)
			}
		},
		Published: func([]*ftx) {},
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

// submit is Submit as a caller that waits uses it.
func submit(q *Queue[*ftx], t *ftx) error {
	t.done = make(chan struct{})
	if err := q.Submit(t, true); err != nil {
		return err
	}
	<-t.done
	return t.err
}

// Callers that lead and the committer goroutine together commit every
// transaction once, in order: a barrier sees every transaction queued
// before it and none queued after it, whoever runs it.
func TestOrder(t *testing.T) {
	s := &store{vals: map[string]int{}}
	q := newQueue(s)
	q.Start()
	const writers, saves = 8, 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	last := map[string]int{} // the newest value each writer's save was acknowledged for
	errs := make(chan error, writers*saves)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprint("w", w)
			for i := range saves {
				if err := submit(q, &ftx{key: key, val: i}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				last[key] = i
				mu.Unlock()
				if i%10 != 0 {
					continue
				}
				// A barrier sees at least what was acknowledged before
				// it was queued.
				mu.Lock()
				want := map[string]int{}
				for k, v := range last {
					want[k] = v
				}
				mu.Unlock()
				b := &ftx{barrier: func() {
					for key, n := range want {
						if got, ok := s.vals[key]; !ok || got < n {
							errs <- fmt.Errorf("barrier: %s = %d, acknowledged %d before it", key, got, n)
						}
					}
				}}
				if err := submit(q, b); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	q.Shut()
	q.Stop()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range writers {
		if v := s.vals[fmt.Sprint("w", w)]; v != saves-1 {
			t.Errorf("w%d = %d", w, v)
		}
	}
}

// A caller that waits and finds nobody leading commits its own
// transaction before Submit returns; a caller that does not wait never
// leads.
func TestWhoLeads(t *testing.T) {
	s := &store{vals: map[string]int{}}
	q := newQueue(s)
	q.Start()
	own := &ftx{key: "a", val: 1, done: make(chan struct{})}
	if err := q.Submit(own, true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-own.done:
	default:
		t.Fatal("Submit of a waiting caller returned before its own group was committed")
	}
	s.block = make(chan struct{})
	other := &ftx{key: "b", val: 2, done: make(chan struct{})}
	submitted := make(chan error, 1)
	go func() { submitted <- q.Submit(other, false) }()
	select {
	case err := <-submitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a caller that does not wait led the commit")
	}
	close(s.block)
	<-other.done
	q.Shut()
	q.Stop()
	if s.vals["b"] != 2 {
		t.Fatalf("b = %d", s.vals["b"])
	}
}

// A caller leads only the group its own transaction is in: a barrier
// queued behind it runs on the committer goroutine, and the caller has
// its answer without waiting for it.
func TestLeaderLeavesBarriers(t *testing.T) {
	s := &store{vals: map[string]int{}}
	q := newQueue(s)
	q.Start()
	defer func() { q.Shut(); q.Stop() }()
	release := make(chan struct{})
	ran := make(chan struct{})
	own := &ftx{key: "k", val: 1, done: make(chan struct{})}
	b := &ftx{barrier: func() { close(ran); <-release }, done: make(chan struct{})}
	q.mu.Lock()
	if q.leading {
		q.mu.Unlock()
		t.Fatal("the queue of an idle owner has a leader")
	}
	q.q = append(q.q, own, b)
	q.leading = true
	q.mu.Unlock()
	led := make(chan struct{})
	go func() { q.lead(own, true); close(led) }()
	select {
	case <-led:
	case <-time.After(5 * time.Second):
		close(release) // the caller ran the barrier itself: let it end
		t.Fatal("the caller's lead did not end while a barrier behind it ran")
	}
	select {
	case <-own.done:
	default:
		t.Fatal("own tx not committed when its lead ended")
	}
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the barrier left to the committer goroutine never ran")
	}
	close(release)
	<-b.done
}

// Stop commits what is queued; Submit after Shut is refused.
func TestShutStop(t *testing.T) {
	s := &store{vals: map[string]int{}}
	q := newQueue(s)
	queued := &ftx{key: "early", val: 1, done: make(chan struct{})}
	if err := q.Submit(queued, false); err != nil { // before Start: it waits
		t.Fatal(err)
	}
	q.Start()
	if err := q.Submit(&ftx{key: "k", val: 2}, false); err != nil {
		t.Fatal(err)
	}
	if !q.Shut() {
		t.Fatal("Shut of an open queue: false")
	}
	if q.Shut() {
		t.Fatal("Shut of a shut queue: true")
	}
	if err := q.Submit(&ftx{key: "k", val: 3}, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Shut: %v", err)
	}
	q.Stop()
	<-queued.done
	if s.vals["early"] != 1 || s.vals["k"] != 2 {
		t.Fatalf("after Stop: %v", s.vals)
	}
}

// A panic while leading stops the process, even on a caller's goroutine
// whose panics are recovered (as a server does for a request): a leader
// that is gone would leave every later transaction waiting forever. The
// test runs itself as the process that panics.
func TestLeaderPanicCrashes(t *testing.T) {
	if os.Getenv("OXIOS_TEST_GROUPCOMMIT_PANIC") != "" {
		q := newQueue(&store{vals: map[string]int{}})
		q.Start()
		func() {
			defer func() { recover() }()
			submit(q, &ftx{barrier: func() { panic("a bug in a barrier") }})
		}()
		time.Sleep(10 * time.Second)
		t.Fatal("still running after a panic in the group commit")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaderPanicCrashes$", "-test.v")
	cmd.Env = append(os.Environ(), "OXIOS_TEST_GROUPCOMMIT_PANIC=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("group commit: a bug in a barrier")) {
		t.Fatalf("exit %v, want a crash with the panic:\n%s", err, out)
	}
}
