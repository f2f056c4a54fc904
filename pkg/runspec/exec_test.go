package runspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
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
	if len(env) != 4 || env[1] != "HOME=/w" || env[3] != "OXIOS_AGENT=ops" || !strings.HasPrefix(env[0], "PATH=") {
		t.Fatal(env)
	}
}

func TestExecRecord(t *testing.T) {
	res := supervisor.ExecResult{Status: 1, Stdout: []byte("out\xff"), Stderr: []byte("err"), Limits: "memory", Duration: 2 * time.Second}
	rec, outcome := ExecRecord("ops", "r1", []string{"ls"}, res, time.Second)
	if outcome != " => status 1 (memory)" || rec.Stdout != "out\uFFFD" || len(rec.Digest) != 64 || rec.Run != "r1" || rec.Duration != 2 || rec.Type != proto.RecordExec {
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
	dir, err := Workspace(data, "a", nil)
	if err != nil || dir != filepath.Join(data, "work", "a", "exec") {
		t.Fatal(dir, err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%v %v", fi, err)
	}
}
