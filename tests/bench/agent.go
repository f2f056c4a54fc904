package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// The LLM runner's cost per model turn beyond the endpoint's own time,
// against the local test server: once in-process (the runner loop, the
// HTTP client, streaming, tool dispatch, records) with a kernel that
// answers at once, and once end to end (ox-agent under oxiosd, each turn
// also a budget check, a durable audited budget charge and a tool
// syscall).

// nopKernel answers every syscall at once.
type nopKernel struct{}

func (nopKernel) StateLoad(context.Context, string) ([]byte, error) { return []byte("v"), nil }
func (nopKernel) StateSave(context.Context, string, []byte) error   { return nil }
func (nopKernel) StateList(context.Context, string) ([]proto.StateRecord, error) {
	return []proto.StateRecord{{Key: "notes/a", Size: 10}}, nil
}
func (nopKernel) Remember(context.Context, proto.MemoryInput) (proto.MemoryRecord, error) {
	return proto.MemoryRecord{ID: "m"}, nil
}
func (nopKernel) Recall(context.Context, string, int) ([]proto.MemoryRecord, error) { return nil, nil }
func (nopKernel) Exec(context.Context, proto.ExecArgs) (proto.ExecRecord, error) {
	return proto.ExecRecord{}, nil
}
func (nopKernel) ToolList(context.Context) ([]proto.ToolInfoRecord, error) { return nil, nil }
func (nopKernel) ToolRun(context.Context, proto.ToolRunArgs) (proto.ToolRecord, error) {
	return proto.ToolRecord{}, nil
}

func (nopKernel) Fetch(context.Context, proto.FetchArgs) (proto.FetchRecord, error) {
	return proto.FetchRecord{Status: 200, Body: "ok"}, nil
}
func (nopKernel) BudgetCheck(context.Context, int64) (proto.BudgetRecord, error) {
	return proto.BudgetRecord{}, nil
}
func (nopKernel) BudgetCharge(context.Context, string, int64, int64) (proto.BudgetRecord, error) {
	return proto.BudgetRecord{}, nil
}

// script is turns-1 tool-calling turns and a finish.
func script(turns int) []llmtest.Turn {
	var s []llmtest.Turn
	for i := 0; i < turns-1; i++ {
		s = append(s, llmtest.Turn{Content: "Looking at my notes.", ToolCalls: []llmtest.Call{{Name: "state_list", Arguments: `{"prefix":"notes/"}`}},
			PromptTokens: 500, CompletionTokens: 20})
	}
	return append(s, llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "finish", Arguments: `{"summary":"done"}`}}, PromptTokens: 500, CompletionTokens: 10})
}

func benchAgent(dir string) {
	const turns, runs = 20, 30
	// In-process.
	var wall, busy time.Duration
	for i := 0; i < runs; i++ {
		s := llmtest.New(script(turns)...)
		cfg := llm.DefaultConfig(s.URL, "", "bench")
		r := agent.New(agent.Config{Agent: "bench", Run: "r", Model: "bench", Task: "check the notes",
			Emit: func(rec any) { agent.Marshal(rec) }}, nopKernel{}, llm.New(cfg))
		t := time.Now()
		res, err := r.Run(context.Background())
		check(err)
		wall += time.Since(t)
		busy += s.Busy()
		s.Close()
		if res.Turns != turns {
			fatal(fmt.Errorf("agent bench: %d turns, want %d", res.Turns, turns))
		}
	}
	n := time.Duration(turns * runs)
	reportMs("baseline: test server's own time per turn", busy/n, 0, "")
	reportMs("runner overhead per turn, in-process", (wall-busy)/n, 0, "<= 1 ms")

	// Streaming: from the server's first token (written and flushed) to
	// the runner's first delta record (marshalled, as it goes out).
	const answers = 200
	lat := make([]time.Duration, 0, answers)
	s := llmtest.New(llmtest.Turn{Content: strings.Repeat("streamed words ", 20), Pace: llmtest.Duration(time.Millisecond), Repeat: -1})
	for i := 0; i < answers; i++ {
		var first time.Time
		cfg := llm.DefaultConfig(s.URL, "", "bench")
		r := agent.New(agent.Config{Agent: "bench", Run: "r", Model: "bench", Task: "say something", Recall: -1, NoSummary: true, Stream: true,
			Emit: func(rec any) {
				b := agent.Marshal(rec)
				if _, ok := rec.(*proto.DeltaRecord); ok && first.IsZero() && len(b) > 0 {
					first = time.Now()
				}
			}}, nopKernel{}, llm.New(cfg))
		_, err := r.Run(context.Background())
		check(err)
		q := s.Requests()[i]
		if first.IsZero() || q.FirstToken.IsZero() {
			fatal(fmt.Errorf("agent bench: no delta, or no first token"))
		}
		lat = append(lat, first.Sub(q.FirstToken))
	}
	s.Close()
	slices.Sort(lat)
	reportMs("first delta after the server's first token, p50", lat[answers/2], 0, "<= 1 ms")
	reportMs("first delta after the server's first token, p99", lat[answers*99/100], 0, "")

	benchKernelCalls(dir, turns)

	// End to end: ox-agent under oxiosd. The per-turn figure is the
	// difference between a 20-turn and a 1-turn run, so the runner's
	// start and the first recall are not in it.
	e2e := func(turns int) (time.Duration, time.Duration) {
		var wall, busy time.Duration
		for i := 0; i < 10; i++ {
			s := llmtest.New(script(turns)...)
			ddir := filepath.Join(dir, fmt.Sprintf("agent-%d-%d", turns, i))
			check(os.MkdirAll(ddir, 0o700))
			cf := filepath.Join(ddir, "oxios.toml")
			check(os.WriteFile(cf, []byte(fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"bench\"\n", s.URL)), 0o600))
			d := startDaemonConfig(ddir, cf)
			c := dial(d.sock)
			t := time.Now()
			status := -1
			check(c.SpawnAttach(context.Background(), proto.SpawnArgs{Agent: "bench", Task: "check the notes"}, func(b json.RawMessage) error {
				var ex proto.ExitRecord
				if json.Unmarshal(b, &ex) == nil && ex.Type == proto.RecordExit {
					status = ex.Status
				}
				return nil
			}))
			wall += time.Since(t)
			busy += s.Busy()
			c.Close()
			d.stop()
			s.Close()
			if status != 0 || len(s.Requests()) != turns {
				fatal(fmt.Errorf("agent bench: run exited %d after %d requests", status, len(s.Requests())))
			}
		}
		return wall / 10, busy / 10
	}
	w1, b1 := e2e(1)
	w20, b20 := e2e(turns)
	reportMs("LLM run of 1 turn under oxiosd (mean)", w1, 0, "")
	reportMs("overhead per turn, ox-agent under oxiosd", ((w20-b20)-(w1-b1))/(turns-1), 0, "(with 3 syscalls a turn)")
}

// startDaemonConfig starts an oxiosd with a config file.
func startDaemonConfig(dir, config string) *daemon {
	sock := filepath.Join(dir, "oxiosd.sock")
	cmd := exec.Command(filepath.Join(*binDir, "oxiosd"), "--config", config, "--no-mount", "--log-level", "warn",
		"--data", filepath.Join(dir, "data"), "--socket", sock)
	cmd.Stderr = os.Stderr
	start(cmd)
	return waitDaemon(cmd, sock)
}

// chargingKernel is nopKernel whose budget calls go to oxiosd, as the
// runner made them before the kernel made its model calls: a check before
// each call, a durable charge after it (as the admin: budget.charge is
// now the admin's).
type chargingKernel struct {
	nopKernel
	c *client.Client
}

func (k chargingKernel) BudgetCheck(ctx context.Context, tokens int64) (proto.BudgetRecord, error) {
	return k.c.BudgetCheck(ctx, "bench", tokens)
}

func (k chargingKernel) BudgetCharge(ctx context.Context, model string, p, c int64) (proto.BudgetRecord, error) {
	return k.c.BudgetCharge(ctx, proto.BudgetChargeArgs{Agent: "bench", Model: model, PromptTokens: p, CompletionTokens: c})
}

// benchKernelCalls compares the runner's model calls made by the kernel
// (llm.chat over the socket, each attempt budgeted, charged durably and
// audited) with the same runner calling the endpoint directly, as it did
// before: per turn, and from the server's first token to the runner's
// first delta. The two alternate, run by run, against one oxiosd.
func benchKernelCalls(dir string, turns int) {
	ddir := filepath.Join(dir, "agent-kernel")
	check(os.MkdirAll(ddir, 0o700))
	s := llmtest.New()
	defer s.Close()
	cf := filepath.Join(ddir, "oxios.toml")
	check(os.WriteFile(cf, []byte(fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"bench\"\n", s.URL)), 0o600))
	d := startDaemonConfig(ddir, cf)
	defer d.stop()
	c := dial(d.sock)
	defer c.Close()
	_, err := c.StateSave(context.Background(), "bench", "notes/a", []byte("x"))
	check(err)
	direct := llm.New(llm.DefaultConfig(s.URL, "", "bench"))
	kernel := &agent.KernelModel{C: c, Agent: "bench"}
	const runs = 15
	var wall, busy [2]time.Duration
	for i := 0; i < 2*runs; i++ {
		// Before: the runner calls the endpoint, checks and charges its
		// budget with two syscalls a turn. Now: one llm.chat a turn.
		var m agent.Model = direct
		var k agent.Kernel = chargingKernel{c: c}
		if i%2 == 1 {
			m, k = kernel, nopKernel{}
		}
		s.Push(script(turns)...)
		b0 := s.Busy()
		r := agent.New(agent.Config{Agent: "bench", Run: "r", Model: "bench", Task: "check the notes",
			Emit: func(rec any) { agent.Marshal(rec) }}, k, m)
		t := time.Now()
		res, err := r.Run(context.Background())
		check(err)
		wall[i%2] += time.Since(t)
		busy[i%2] += s.Busy() - b0
		if res.Turns != turns {
			fatal(fmt.Errorf("agent bench: %d turns, want %d", res.Turns, turns))
		}
	}
	n := time.Duration(turns * runs)
	over := [2]time.Duration{(wall[0] - busy[0]) / n, (wall[1] - busy[1]) / n}
	reportMs("model call per turn, runner direct + budget calls", over[0], 0, "(before: check, call, charge)")
	reportMs("model call per turn, through the kernel", over[1], over[0], "<= +1 ms")

	// First delta: from the server's first token to the runner's first
	// delta record, each way.
	const answers = 100
	s.Push(llmtest.Turn{Content: strings.Repeat("streamed words ", 20), Pace: llmtest.Duration(time.Millisecond), Repeat: -1})
	lat := [2][]time.Duration{}
	for i := 0; i < 2*answers; i++ {
		var m agent.Model = direct
		if i%2 == 1 {
			m = kernel
		}
		var first time.Time
		n := len(s.Requests())
		r := agent.New(agent.Config{Agent: "bench", Run: "r", Model: "bench", Task: "say something", Recall: -1, NoSummary: true, Stream: true,
			Emit: func(rec any) {
				b := agent.Marshal(rec)
				if _, ok := rec.(*proto.DeltaRecord); ok && first.IsZero() && len(b) > 0 {
					first = time.Now()
				}
			}}, nopKernel{}, m)
		_, err := r.Run(context.Background())
		check(err)
		q := s.Requests()[n]
		if first.IsZero() || q.FirstToken.IsZero() {
			fatal(fmt.Errorf("agent bench: no delta, or no first token"))
		}
		lat[i%2] = append(lat[i%2], first.Sub(q.FirstToken))
	}
	for i := range lat {
		slices.Sort(lat[i])
	}
	reportMs("first delta, runner direct (before), p50", lat[0][answers/2], 0, "")
	reportMs("first delta, through the kernel, p50", lat[1][answers/2], lat[0][answers/2], "<= +1 ms")
}
