package serve

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
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

// gatedArgs are, for each served op, args that decode and name what the
// test's fixtures hold (the agent ops, its run, its job), so that a call
// gets as far as the gate. A new op fails TestEveryServedOpGated until
// it has its args here.
func gatedArgs(run, pending string) map[string]string {
	return map[string]string{
		proto.OpHello:          `{}`,
		proto.OpStateSave:      `{"agent":"ops","key":"k","value":"v"}`,
		proto.OpStateDelete:    `{"agent":"ops","key":"k"}`,
		proto.OpStateLoad:      `{"agent":"ops","key":"k"}`,
		proto.OpStateList:      `{"agent":"ops"}`,
		proto.OpMemRemember:    `{"agent":"ops","memories":[{"kind":"episodic","text":"t"}]}`,
		proto.OpMemForget:      `{"agent":"ops","ids":["x"]}`,
		proto.OpMemRecall:      `{"agent":"ops","query":"q"}`,
		proto.OpMemList:        `{"agent":"ops"}`,
		proto.OpCommit:         `{"agent":"ops"}`,
		proto.OpCommitTag:      `{"name":"t1"}`,
		proto.OpCommitRestore:  `{"agent":"ops","rev":"HEAD"}`,
		proto.OpCommitLog:      `{"agent":"ops"}`,
		proto.OpCommitShow:     `{"agent":"ops","rev":"HEAD"}`,
		proto.OpCommitDiff:     `{"agent":"ops"}`,
		proto.OpAuditLog:       `{}`,
		proto.OpAuditShow:      `{"seq":1}`,
		proto.OpAuditHead:      `{}`,
		proto.OpAuditVerify:    `{}`,
		proto.OpAuditExport:    `{}`,
		proto.OpEvents:         `{}`,
		proto.OpPolicyShow:     `{"agent":"ops"}`,
		proto.OpPolicySet:      `{"agent":"ops","text":""}`,
		proto.OpPolicyCheck:    `{"agent":"ops","op":"state.load","args":["k"]}`,
		proto.OpPolicyTest:     `{"agent":"ops","policy":"","entries":[]}`,
		proto.OpResources:      `{}`,
		proto.OpStatus:         `{}`,
		proto.OpRunSpawn:       `{"agent":"ops","command":["true"]}`,
		proto.OpRunAttach:      `{"run":"` + run + `"}`,
		proto.OpRunWait:        `{"runs":["` + run + `"]}`,
		proto.OpRunKill:        `{"runs":["` + run + `"]}`,
		proto.OpRunStdin:       `{"run":"` + run + `","close":true}`,
		proto.OpRunPs:          `{}`,
		proto.OpExec:           `{"agent":"ops","argv":["true"]}`,
		proto.OpNetFetch:       `{"agent":"ops","url":"http://127.0.0.1:1/"}`,
		proto.OpToolRun:        `{"agent":"ops","tool":"t"}`,
		proto.OpToolList:       `{"agent":"ops"}`,
		proto.OpBudgetShow:     `{"agent":"ops"}`,
		proto.OpBudgetSet:      `{"agent":"ops"}`,
		proto.OpBudgetReset:    `{"agent":"ops"}`,
		proto.OpBudgetCheck:    `{"agent":"ops"}`,
		proto.OpBudgetCharge:   `{"agent":"ops","prompt_tokens":1,"completion_tokens":1}`,
		proto.OpScheduleAdd:    `{"agent":"ops","name":"j2","schedule":"@daily","command":["true"]}`,
		proto.OpScheduleRm:     `{"name":"j1"}`,
		proto.OpScheduleRun:    `{"name":"j1"}`,
		proto.OpScheduleEnable: `{"name":"j1","disable":true}`,
		proto.OpScheduleList:   `{}`,
		proto.OpLLMGate:        `{"agent":"ops","endpoint":"http://127.0.0.1:1/"}`,
		proto.OpLLMChat:        `{"agent":"ops","messages":[{"role":"user","content":"hi"}]}`,
		proto.OpMCPServers:     `{"agent":"ops"}`,
		proto.OpMCPCall:        `{"agent":"ops","server":"s","tool":"t"}`,
		proto.OpMCPResult:      `{"agent":"ops","server":"s","tool":"t"}`,
		proto.OpAgentList:      `{}`,
		proto.OpAgentShow:      `{"agent":"ops"}`,
		proto.OpAgentRemove:    `{"agent":"ops"}`,
		proto.OpAgentFork:      `{"agent":"ops","name":"ops2"}`,
		proto.OpAgentDiff:      `{"agent":"ops"}`,
		proto.OpMsgSend:        `{"to":"ops","from":"ops","text":"hi"}`,
		proto.OpMsgList:        `{"agent":"ops"}`,
		proto.OpMsgRecv:        `{"agent":"ops"}`,
		proto.OpApproveList:    `{}`,
		proto.OpApproveDecide:  `{"id":"` + pending + `","approve":true}`,
		proto.OpFleetStatus:    `{}`,
		proto.OpFleetCall:      `{"op":"state.load","args":{"agent":"ops","key":"k"}}`,
		proto.OpFleetWitness:   `{}`,
		proto.OpVersionPush:    `{"remote":"origin"}`,
		proto.OpWorkList:       `{}`,
		proto.OpWorkDiff:       `{"run":"` + run + `"}`,
		proto.OpWorkView:       `{"run":"` + run + `"}`,
		proto.OpWorkApply:      `{"run":"` + run + `"}`,
		proto.OpWorkDiscard:    `{"run":"` + run + `"}`,
		proto.OpRunReceipt:     `{"run":"` + run + `"}`,
	}
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
		a, ok := args[sc.Op]
		if !ok {
			t.Errorf("%s: no args in gatedArgs: add some that reach its gate", sc.Op)
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
