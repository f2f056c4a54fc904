package runspec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/wasm"
)

func TestToolTimeoutSpecRecord(t *testing.T) {
	p, err := policy.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, qerr := ToolTimeout(p, ""); qerr != nil || (p.Tools.Timeout.D() <= 0 && d != wasm.DefaultTimeout) {
		t.Fatal(d, qerr)
	}
	if d, qerr := ToolTimeout(p, "1ms"); qerr != nil || d != time.Millisecond {
		t.Fatal(d, qerr)
	}
	if _, qerr := ToolTimeout(p, "0s"); qerr == nil || qerr.Code != proto.EINVAL {
		t.Fatal(qerr)
	}
	sp := ToolSpec("ops", "grep", []string{"-n"}, "in", "/w", p, time.Second)
	if sp.Tool != "grep" || string(sp.Stdin) != "in" || sp.Mounts[0].Host != "/w" || sp.Mounts[0].Guest != wasm.GuestWork || sp.Env[3] != "OXIOS_AGENT=ops" || sp.Timeout != time.Second {
		t.Fatalf("%+v", sp)
	}
	rec, outcome := ToolRecord("ops", "r1", "grep", wasm.Result{Status: 2, Stdout: []byte("x")}, time.Second)
	if outcome != " => status 2" || rec.Text != "grep => status 2" || len(rec.Digest) != 64 || rec.Run != "r1" {
		t.Fatalf("%q %+v", outcome, rec)
	}
	if _, outcome := ToolRecord("ops", "", "grep", wasm.Result{TimedOut: true, Trap: "x"}, time.Second); outcome != " => timed out after 1s" {
		t.Fatal(outcome)
	}
	if _, outcome := ToolRecord("ops", "", "grep", wasm.Result{Trap: "unreachable"}, time.Second); outcome != " => trapped" {
		t.Fatal(outcome)
	}
	if e, _ := ExecRecord("ops", "", nil, supervisorResult([]byte("x")), 0); e.Digest != rec.Digest {
		t.Fatal("an exec's and a tool call's digest of the same output differ")
	}
}

func TestToolErrorAndInfos(t *testing.T) {
	if e := ToolError(fmt.Errorf("open: %w", wasm.ErrNoTool), "grep", "/tools"); e.Code != proto.ENOENT || e.Message != "no tool grep in /tools" {
		t.Fatal(e)
	}
	if e := ToolError(errors.New("bad module"), "grep", "/tools"); e.Code != proto.ENOEXEC || e.Message != "bad module" {
		t.Fatal(e)
	}
	p, err := policy.Parse([]byte("[tools]\nallow = [\"grep\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	recs := ToolInfos([]wasm.Manifest{{Name: "grep", Description: "finds"}, {Name: "rm"}}, p)
	if len(recs) != 2 || recs[0].Type != proto.RecordToolInfo || !recs[0].Allowed || recs[0].Description != "finds" || recs[1].Allowed {
		t.Fatalf("%+v", recs)
	}
}

// hostileTools builds pkg/wasm's testdata/hostile as the tool "hostile"
// in a tools folder.
func hostileTools(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "hostile.wasm"), "../wasm/testdata/hostile")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("building the test tool: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "hostile.json"), []byte(`{"name":"hostile","description":"misbehaves on demand","input_schema":{"type":"object"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunTool(t *testing.T) {
	runner := wasm.New(hostileTools(t))
	defer runner.Close(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := policy.Default()
	data := t.TempDir()
	x := ToolCall{Agent: "a", Tool: "nope", Timeout: time.Minute, Caller: "r1"}
	var refused *Refusal
	if _, _, _, err := RunTool(context.Background(), runner, data, p, x, log); !errors.As(err, &refused) || refused.Err.Code != proto.ENOENT || refused.Rule != "" {
		t.Fatalf("no such tool: %v", err)
	}
	x.Tool, x.Args = "hostile", []string{"read", "/etc/passwd"}
	rec, outcome, refusals, err := RunTool(context.Background(), runner, data, p, x, log)
	if err != nil || rec.Run != "r1" || rec.Tool != "hostile" || outcome == "" {
		t.Fatalf("%+v %q %v", rec, outcome, err)
	}
	for _, r := range refusals {
		if r.Err.Code != proto.EPERM || !strings.HasPrefix(r.Rule, " [sandbox] ") {
			t.Errorf("refusal %+v", r)
		}
	}
	x.Args, x.Timeout = []string{"loop"}, 300*time.Millisecond
	_, outcome, refusals, err = RunTool(context.Background(), runner, data, p, x, log)
	if err != nil || len(refusals) != 1 || refusals[0].Err.Code != proto.ETIMEDOUT || refusals[0].Rule != outcome+" [tools.timeout]" {
		t.Fatalf("%q %+v %v", outcome, refusals, err)
	}
}
