package runspec

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
	"github.com/oxios/oxios/pkg/supervisor"
)

func TestExecTimeoutCapEnv(t *testing.T) {
	p, err := policy.Parse([]byte("[exec]\ntimeout = \"30s\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d, qerr := ExecTimeout(p, ""); qerr != nil || d != 30*time.Second {
		t.Fatal(d, qerr)
	}
	if d, qerr := ExecTimeout(p, "5s"); qerr != nil || d != 5*time.Second {
		t.Fatal(d, qerr)
	}
	if d, qerr := ExecTimeout(p, "1m"); qerr != nil || d != 30*time.Second {
		t.Fatal(d, qerr)
	}
	for _, bad := range []string{"soon", "-1s", "0s"} {
		if _, qerr := ExecTimeout(p, bad); qerr == nil || qerr.Code != proto.EINVAL {
			t.Errorf("%q: %v", bad, qerr)
		}
	}
	if c := ExecCap(p); c != 1<<20 && c != int(p.Exec.OutputCap) {
		t.Fatal(c)
	}
	env := ExecEnv("ops", "/w")
	if len(env) != 4+len(sandbox.RaceEnv) || env[1] != "HOME=/w" || env[3] != "OXIOS_AGENT=ops" || !strings.HasPrefix(env[0], "PATH=") {
		t.Fatal(env)
	}
}

func TestExecRecord(t *testing.T) {
	res := supervisor.ExecResult{Status: 1, Stdout: []byte("out\xff"), Stderr: []byte("err"), Limits: "memory", Duration: 2 * time.Second}
	rec, outcome := ExecRecord("ops", "r1", []string{"ls"}, res, time.Second)
	if outcome != " => status 1 (memory)" || rec.Text != "ls => status 1 (memory)" || rec.Stdout != "out\uFFFD" || len(rec.Digest) != 64 || rec.Run != "r1" || rec.Duration != 2 || rec.Type != proto.RecordExec {
		t.Fatalf("%q %+v", outcome, rec)
	}
	res.TimedOut, res.Limits = true, ""
	if _, outcome := ExecRecord("ops", "", []string{"ls"}, res, time.Second); outcome != " => timed out after 1s" {
		t.Fatal(outcome)
	}
}

func supervisorResult(stdout []byte) supervisor.ExecResult {
	return supervisor.ExecResult{Stdout: stdout}
}

func TestExecAndToolTargets(t *testing.T) {
	if got := ExecTarget("a", []string{"echo", "hi there"}, "", " => exit 0"); got != `a:exec echo "hi there" => exit 0` {
		t.Fatal(got)
	}
	if got := ExecTarget("a", nil, "ls | wc", ""); got != "a:exec ls | wc" {
		t.Fatal(got)
	}
	if got := ToolTarget("a", "grep\xff", " [tools.allow]"); got != "a:tool grep? [tools.allow]" {
		t.Fatal(got)
	}
}

func TestWorkspace(t *testing.T) {
	data := t.TempDir()
	dir, done, err := Workspace(data, "a", nil)
	if err != nil || filepath.Dir(dir) != filepath.Join(data, "work", "a") || !strings.HasPrefix(filepath.Base(dir), "exec-") {
		t.Fatal(dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%v %v", fi, err)
	}
	// Each exec its own: a second at once has another, and the first's
	// files are gone once it is done.
	dir2, done2, err := Workspace(data, "a", nil)
	if err != nil || dir2 == dir {
		t.Fatalf("second exec's workspace %q (the first's %q): %v", dir2, dir, err)
	}
	os.WriteFile(filepath.Join(dir, "left"), []byte("x"), 0o600)
	done()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the first exec's workspace is left: %v", err)
	}
	done2()
}

// pool is a UIDs that hands out the test's own uid (which a workspace
// may be given without privileges).
type pool struct{ out []uint32 }

func (p *pool) AcquireUID() uint32 {
	uid := uint32(os.Getuid())
	p.out = append(p.out, uid)
	return uid
}

func (p *pool) ReleaseUID(uid uint32) {
	for i, u := range p.out {
		if u == uid {
			p.out = append(p.out[:i], p.out[i+1:]...)
			return
		}
	}
}

func TestExecUID(t *testing.T) {
	dir := t.TempDir()
	p := &pool{}
	home, release, err := ExecUID(nil, nil, p, dir)
	release()
	if err != nil || home != dir || len(p.out) != 0 {
		t.Fatal(home, err, p.out)
	}
	sb := &sandbox.Spec{}
	home, release, err = ExecUID(sb, nil, p, dir)
	if err != nil || home != sandbox.WorkDir || sb.UID != uint32(os.Getuid()) || len(p.out) != 1 {
		t.Fatal(home, err, sb.UID, p.out)
	}
	release()
	if len(p.out) != 0 {
		t.Fatal("the uid was not given back", p.out)
	}
	// A workspace that cannot be given to the uid fails; the uid is
	// given back all the same.
	_, release, err = ExecUID(&sandbox.Spec{}, nil, p, filepath.Join(dir, "none"))
	release()
	if err == nil || len(p.out) != 0 {
		t.Fatal(err, p.out)
	}
}

func TestRunExec(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sup, err := supervisor.New(filepath.Join(t.TempDir(), "runs"), log)
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	p, err := policy.Parse([]byte("[sandbox]\nisolation = \"none\"\n[exec]\noutput_cap = 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	x := Execution{Agent: "a", Argv: []string{"sh", "-c", "cat; pwd"}, Stdin: "in\n", Timeout: 10 * time.Second}
	res, err := RunExec(context.Background(), Host{}, sup, data, p, x)
	if err != nil || res.Status != 0 || string(res.Stdout) != "in\n" || !res.Truncated {
		t.Fatalf("%+v %v", res, err)
	}
	var refused *Refusal
	x.Argv = []string{"no-such-program-here"}
	if _, err := RunExec(context.Background(), Host{}, sup, data, p, x); !errors.As(err, &refused) || refused.Rule != "" || refused.Err.Code != proto.ENOENT {
		t.Fatalf("a missing program: %v", err)
	}
	// A full sandbox on a machine without one is refused, with its rule.
	p.Sandbox.Isolation = policy.IsolationFull
	x.Argv = []string{"true"}
	if _, err := RunExec(context.Background(), Host{}, sup, data, p, x); !errors.As(err, &refused) || refused.Rule != " [sandbox.isolation]" || refused.Err.Code != proto.EPERM {
		t.Fatalf("no sandbox: %v", err)
	}
}
