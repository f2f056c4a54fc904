package runspec

import (
	"errors"
	"fmt"
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
