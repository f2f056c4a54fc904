package kernel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// queueKernel is a kernel on data with no scheduler.
func queueKernel(t testing.TB, data string) *Kernel {
	t.Helper()
	cfg := config.Default()
	cfg.Data = data
	cfg.Socket = filepath.Join(data, "none.sock")
	cfg.NoMount = true
	k, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func saveTx(agent, key, value string) *tx {
	return &tx{change: &state.Change{Agent: agent, Key: key, Value: []byte(value)},
		entry: &audit.Entry{Actor: audit.Actor{UID: 0}, Op: proto.OpStateSave, Target: target(agent, key)}}
}

// Callers that lead and the committer goroutine together commit every
// transaction once, in order: a barrier sees every save queued before it
// and none queued after it, whoever runs it. (pkg/groupcommit tests the
// queue alone; this is the kernel's use of it, with the store.)
func TestCommitQueueOrder(t *testing.T) {
	k := queueKernel(t, t.TempDir())
	defer k.Close()
	ctx := context.Background()
	const writers, saves = 8, 60
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
				if err := k.submit(ctx, saveTx("q", key, fmt.Sprint(i)), true); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				last[key] = i
				mu.Unlock()
				if i%10 == 0 {
					// A barrier sees at least what was acknowledged before
					// it was queued.
					mu.Lock()
					want := map[string]int{}
					for k, v := range last {
						want[k] = v
					}
					mu.Unlock()
					err := k.barrier(ctx, func() {
						for key, n := range want {
							v, _, err := k.state.Load("q", key)
							var got int
							fmt.Sscan(string(v), &got)
							if err != nil || got < n {
								errs <- fmt.Errorf("barrier: %s = %q %v, acknowledged %d before it", key, v, err, n)
							}
						}
					})
					if err != nil {
						errs <- err
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range writers {
		if v, _, err := k.state.Load("q", fmt.Sprint("w", w)); err != nil || string(v) != fmt.Sprint(saves-1) {
			t.Errorf("w%d = %q %v", w, v, err)
		}
	}
}

// Close commits what is queued and refuses what comes after.
func TestCommitQueueClose(t *testing.T) {
	k := queueKernel(t, t.TempDir())
	ctx := context.Background()
	if err := k.submit(ctx, saveTx("q", "k", "v"), false); err != nil {
		t.Fatal(err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if err := k.submit(ctx, saveTx("q", "k", "w"), true); code(err) != proto.ESHUTDOWN {
		t.Fatalf("a save after Close: %v", err)
	}
	k2 := queueKernel(t, k.cfg.Data)
	defer k2.Close()
	if v, _, err := k2.state.Load("q", "k"); err != nil || string(v) != "v" {
		t.Fatalf("the save queued before Close: %q %v", v, err)
	}
}

// A panic while leading stops the daemon (the queue's own test is
// pkg/groupcommit's TestLeaderPanicCrashes), even on a caller's goroutine
// whose panics the server recovers from: a leader that is gone would
// leave every later write waiting forever. The test runs itself as the
// daemon that panics.
func TestCommitLeaderPanicCrashes(t *testing.T) {
	if os.Getenv("OXIOS_TEST_LEADER_PANIC") != "" {
		k := queueKernel(t, os.Getenv("OXIOS_TEST_LEADER_PANIC"))
		func() {
			defer func() { recover() }() // as the server does for a request
			k.barrier(context.Background(), func() { panic("a bug in a barrier") })
		}()
		time.Sleep(10 * time.Second)
		t.Fatal("still running after a panic in the group commit")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCommitLeaderPanicCrashes$", "-test.v")
	cmd.Env = append(os.Environ(), "OXIOS_TEST_LEADER_PANIC="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !bytes.Contains(out, []byte("group commit: a bug in a barrier")) {
		t.Fatalf("exit %v, want a crash with the panic:\n%s", err, out)
	}
}
