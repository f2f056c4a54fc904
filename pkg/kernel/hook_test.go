package kernel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// hookScripts are the hooks of TestHooks, as shell scripts: each reads
// the record on its stdin.
var hookScripts = map[string]string{
	// Allows, once it has read a record of an exec of echo.
	"allow":  `rec=$(cat); case "$rec" in *'"argv":["echo","hi"]'*) exit 0;; esac; echo "not the record: $rec"; exit 77`,
	"refuse": `cat >/dev/null; echo "echo is loud today"; echo "second line"; exit 77`,
	"sleep":  `exec sleep 30`,
	"crash":  `kill -SEGV $$`,
	// Garbage: control characters, bytes that are not UTF-8, a line
	// longer than a reason may be, then a status that means nothing.
	"garbage":      `printf 'bad\001\033[31m\377\376'; i=0; while [ $i -lt 100 ]; do printf 'xxxxxxxxxx'; i=$((i+1)); done; exit 77`,
	"garbage-exit": `printf '\377\377 whatever'; exit 3`,
}

// TestHooks: a policy's hook answers the question of an exec: it allows
// (0), refuses with its reason (77), and a hook that times out, crashes,
// prints garbage or exits with another status refuses (it fails
// closed). Each verdict is audited (a refusal under exec, with its
// rule; an allow as policy.hook), ox-policy check answers the same, and
// ox-policy test replays it against a past exec.
func TestHooks(t *testing.T) {
	dir := t.TempDir()
	k := testKernel(t, filepath.Join(dir, "data"), nil)
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{Admin: true}
	run := &Cred{UID: 1000, PID: 7, Agent: "ops", Run: "r1"}
	hooks := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range hookScripts {
		if err := os.WriteFile(filepath.Join(hooks, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The hook that sleeps is given 3 s; the others 60 s, which a hook
	// sandboxed on a loaded machine needs (3 s was too little for the
	// crash to be the answer at a load average of 30).
	policyWith := func(hook string) string {
		timeout := "60s"
		if hook == "sleep" {
			timeout = "3s"
		}
		return "[exec]\nallow = [\"echo\"]\n[sandbox]\nread_only = [\"" + hooks + "\"]\n[hooks]\nexec = [\"" + filepath.Join(hooks, hook) + "\"]\ntimeout = \"" + timeout + "\"\n"
	}
	// A past exec, allowed and done, for ox-policy test to replay.
	if _, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: "ops", Text: "[exec]\nallow = [\"echo\"]\n"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Exec(ctx, run, proto.ExecArgs{Agent: "ops", Argv: []string{"echo", "hi"}}, nil); err != nil {
		t.Fatal(err)
	}
	past := auditLines(t, k, proto.OpExec)
	if len(past) != 1 {
		t.Fatalf("%d exec entries, want 1", len(past))
	}

	for _, c := range []struct {
		hook string
		why  string // "" allowed, else in the refusal
	}{
		{"allow", ""},
		{"refuse", "refused: echo is loud today"},
		{"sleep", "gave no answer within 3s"},
		{"crash", "was killed by SEGV"},
		{"garbage", "refused: bad??[31m?xxxxxxxx"},
		{"garbage-exit", "exited 3 (0 allows, 77 refuses)"},
	} {
		text := policyWith(c.hook)
		if _, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: "ops", Text: text}, nil); err != nil {
			t.Fatalf("%s: %v", c.hook, err)
		}
		execs, hooked := len(auditLines(t, k, proto.OpExec)), len(auditLines(t, k, opHook))
		_, err := k.Exec(ctx, run, proto.ExecArgs{Agent: "ops", Argv: []string{"echo", "hi"}}, nil)
		rec, cerr := k.PolicyCheck(ctx, run, proto.PolicyCheckArgs{Agent: "ops", Op: proto.OpExec, Args: []string{"echo", "hi"}}, nil)
		if cerr != nil {
			t.Fatalf("%s: ox-policy check: %v", c.hook, cerr)
		}
		var tested []string
		res, terr := k.PolicyTest(ctx, run, proto.PolicyTestArgs{Agent: "ops", Policy: text, Entries: past}, nil, func(r *proto.PolicyTestRecord) error {
			tested = append(tested, r.Change+" "+r.Rule)
			return nil
		})
		if terr != nil {
			t.Fatalf("%s: ox-policy test: %v", c.hook, terr)
		}
		newExecs, newHooked := auditLines(t, k, proto.OpExec)[execs:], auditLines(t, k, opHook)[hooked:]
		if c.why == "" {
			if err != nil {
				t.Errorf("%s: the exec: %v", c.hook, err)
			}
			if !rec.Allowed {
				t.Errorf("%s: ox-policy check refuses: %s", c.hook, rec.Text)
			}
			if len(tested) != 0 || res.Judged != 1 {
				t.Errorf("%s: ox-policy test: %v %+v", c.hook, tested, res)
			}
			if len(newHooked) != 1 || !strings.Contains(newHooked[0], `[hooks.exec]`) || !strings.Contains(newHooked[0], `"result":"ok"`) {
				t.Errorf("%s: the hook's allow is not audited: %q", c.hook, newHooked)
			}
			if len(newExecs) != 1 || !strings.Contains(newExecs[0], `"result":"ok"`) {
				t.Errorf("%s: the exec's entries: %q", c.hook, newExecs)
			}
			continue
		}
		if code(err) != proto.EPERM || !strings.Contains(err.Error(), c.why) || !strings.Contains(err.Error(), "hooks.exec") {
			t.Errorf("%s: the exec answers %v, want EPERM saying %q", c.hook, err, c.why)
		}
		if len(rec.Reason) > 400 || strings.ContainsAny(rec.Reason, "\x00\x01\x1b\n") {
			t.Errorf("%s: the reason is not cleaned and bounded: %q", c.hook, rec.Reason)
		}
		if rec.Allowed || rec.Rule != "hooks.exec" || !strings.Contains(rec.Reason, c.why) {
			t.Errorf("%s: ox-policy check: %+v", c.hook, rec)
		}
		if len(tested) != 1 || tested[0] != "refuse hooks.exec" {
			t.Errorf("%s: ox-policy test: %v %+v", c.hook, tested, res)
		}
		if len(newExecs) != 1 || !strings.Contains(newExecs[0], `[hooks.exec]`) || !strings.Contains(newExecs[0], `"result":"EPERM"`) {
			t.Errorf("%s: the refusal is not audited under exec: %q", c.hook, newExecs)
		}
		if len(newHooked) != 0 {
			t.Errorf("%s: a refusal audited as an allow: %q", c.hook, newHooked)
		}
	}
}

// TestHookThroughTheGate: a hook of the state's class is asked by the
// gate itself (a load by a run of the agent), not of the admin, whom the
// agent's policy does not bind for its state; the dry run replays it.
func TestHookThroughTheGate(t *testing.T) {
	dir := t.TempDir()
	k := testKernel(t, filepath.Join(dir, "data"), nil)
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{Admin: true}
	run := &Cred{UID: 1000, PID: 7, Agent: "ops", Run: "r1"}
	hooks := filepath.Join(dir, "hooks")
	if err := os.Mkdir(hooks, 0o755); err != nil {
		t.Fatal(err)
	}
	hook := filepath.Join(hooks, "refuse")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"+hookScripts["refuse"]+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := "[state]\nread = [\"**\"]\n[sandbox]\nread_only = [\"" + hooks + "\"]\n[hooks]\nstate = [\"" + hook + "\"]\n"
	if _, err := k.PolicySet(ctx, admin, proto.PolicySetArgs{Agent: "ops", Text: text}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "ops", Key: "k", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err := k.StateLoad(ctx, run, proto.StateArgs{Agent: "ops", Key: "k"}, nil)
	if code(err) != proto.EPERM || !strings.Contains(err.Error(), "echo is loud today") {
		t.Errorf("the run's load: %v", err)
	}
	if _, _, err := k.StateLoad(ctx, admin, proto.StateArgs{Agent: "ops", Key: "k"}, nil); err != nil {
		t.Errorf("the admin's load: %v", err)
	}
	if c, rule, err := k.Verdict(run, "ops", proto.OpStateLoad, []string{"k"}); c != proto.EPERM || rule != "hooks.state" || err != nil {
		t.Errorf("the dry run: %q %q %v", c, rule, err)
	}
	if refused := auditLines(t, k, proto.OpStateLoad); len(refused) != 1 || !strings.Contains(refused[0], "[hooks.state]") {
		t.Errorf("the refusal's entries: %q", refused)
	}
}

// auditLines are the audit entries of op, as JSON lines.
func auditLines(t *testing.T, k *Kernel, op string) []string {
	t.Helper()
	k.refusals.Flush()
	// A save waited for: what was submitted before it is on the log.
	if _, err := k.StateSave(context.Background(), &Cred{Admin: true}, proto.StateSaveArgs{Agent: "zz", Key: "sync", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	var out []string
	err := k.AuditLog(context.Background(), &Cred{Admin: true}, proto.AuditLogArgs{Op: op}, nil, func(line []byte) error {
		var e struct{ Op string }
		if json.Unmarshal(line, &e) == nil && e.Op == op {
			out = append(out, string(line))
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
