package serve

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
	"github.com/oxios/oxios/pkg/work"
)

// TestMain lets the test binary be the init of the runs a test spawns.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}

// discard is the Out of a call whose items the test does not read; a
// call that follows ends at once.
type discard struct{ done context.Context }

func (discard) Item([]byte) error         { return nil }
func (discard) Flush()                    {}
func (d discard) Follow() context.Context { return d.done }

// gatedArgs are, for each served op, the args of its definition's
// Example, naming what the test's fixtures hold (the agent ops, its run,
// its job, the approval pending), so that a call gets as far as the
// gate. A new op fails TestEveryServedOpGated until its Example reaches
// its gate.
func gatedArgs(run, pending string) map[string]string {
	args := map[string]string{}
	for _, sc := range kernel.Syscalls() {
		if d := kernel.DefOf(sc.Op); d != nil {
			ex, _ := d.Sample()
			args[sc.Op] = strings.NewReplacer("$RUN", run, "$APPROVAL", pending).Replace(ex)
		}
	}
	return args
}

// dryArgs are the words ox-policy check takes for the call gatedArgs
// makes of op (its definition's Dry).
func dryArgs(op string) []string {
	_, dry := kernel.DefOf(op).Sample()
	return dry
}

// TestEveryServedOpGated: no op a front end serves can be reached without
// the gate. Each is called as the socket and the fleet call it (its
// handler) by a user granted no agent, and the gate must be the first
// thing it meets, under its own op (a method that called another's gate
// would audit a refusal under the wrong op).
// gatedFixture is a kernel whose agent ops has a key k, a run (sleeping
// a minute, killed at the end of the test), a job j1 and an approval
// pending (an exec that an ask rule holds, which closes asked once it
// returns), as gatedArgs name them.
func gatedFixture(t *testing.T) (k *kernel.Kernel, run, pending string, asked <-chan struct{}) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Data = filepath.Join(dir, "data")
	cfg.Socket = filepath.Join(dir, "s.sock")
	cfg.NoMount = true
	k, err := kernel.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	if err := k.StartScheduler(nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := &kernel.Cred{Admin: true}
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "ops", Key: "k", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := k.RunSpawn(ctx, admin, proto.SpawnArgs{Agent: "ops", Command: []string{"sleep", "60"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.RunKill(ctx, admin, proto.KillArgs{Runs: []string{r.ID}}, nil, func(*proto.RunRecord) error { return nil })
	})
	// The run's work on a folder, as a spawn with --work records it.
	if err := (work.Store{Root: filepath.Join(cfg.Data, "work-pending")}).Begin(r.ID, "ops", dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := k.ScheduleAdd(ctx, admin, proto.ScheduleAddArgs{Agent: "ops", Name: "j1", Schedule: "@daily", Command: []string{"true"}}, nil); err != nil {
		t.Fatal(err)
	}
	// A pending approval: an exec that an ask rule holds, waiting.
	if _, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: "ops", Text: "[ask]\nexec = [\"true\"]\n"}, nil); err != nil {
		t.Fatal(err)
	}
	asking, stopAsking := context.WithCancel(ctx)
	t.Cleanup(stopAsking)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.Exec(asking, admin, proto.ExecArgs{Agent: "ops", Argv: []string{"true"}}, nil)
	}()
	for i := 0; pending == "" && i < 500; i++ {
		k.ApproveList(ctx, admin, proto.ApproveListArgs{}, nil, func(r *proto.ApprovalRecord) error {
			pending = r.ID
			return nil
		})
		time.Sleep(10 * time.Millisecond)
	}
	if pending == "" {
		t.Fatal("the exec that asks is not pending")
	}
	return k, r.ID, pending, done
}

func TestEveryServedOpGated(t *testing.T) {
	k, run, pending, _ := gatedFixture(t)
	ctx := context.Background()
	var mu sync.Mutex
	var seen []string
	k.OnGate(func(op string) {
		mu.Lock()
		seen = append(seen, op)
		mu.Unlock()
	})
	done, cancel := context.WithCancel(ctx)
	cancel()
	stranger := &kernel.Cred{UID: 4242, PID: 1, Grants: []string{"team-*"}}
	args := gatedArgs(run, pending)
	n := 0
	for _, sc := range kernel.Syscalls() {
		h, ok := Lookup(sc.Op)
		if !ok {
			continue
		}
		n++
		a := args[sc.Op]
		if a == "" {
			t.Errorf("%s: its definition has no Example: give it args that reach its gate", sc.Op)
			continue
		}
		mu.Lock()
		seen = seen[:0]
		mu.Unlock()
		_, err := h.Serve(k, ctx, stranger, &Request{Op: sc.Op, Args: json.RawMessage(a), Out: discard{done}})
		mu.Lock()
		first := ""
		if len(seen) > 0 {
			first = seen[0]
		}
		mu.Unlock()
		if first != sc.Op {
			t.Errorf("%s: the gate saw %q first (err %v): a served op must go through the gate under its own op", sc.Op, first, err)
		}
	}
	if n < 50 {
		t.Fatalf("only %d served ops: the table is broken", n)
	}
}
