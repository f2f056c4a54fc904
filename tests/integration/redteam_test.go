package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// The red-team suite of issue 7: a real oxiosd on a temp dir, its real
// socket and FUSE mount, real runs and WASM tools, attacked the ways the
// issue lists. Every attempt goes through attempt (or, where the attack is
// not refused by design, through confined), which records it; the counts
// go to the file named by $OXIOS_REDTEAM_REPORT (make test prints it) and
// to the test log. An attempt passes only if it was refused with the
// right error and its refusal is on the audit log.
//
// The fork bomb and the memory bomb (limits_test.go) need the cgroups
// oxiosd makes where the machine allows: rlimits alone do not bind root.

// rtOutcome is one recorded attempt.
type rtOutcome struct {
	Name string `json:"name"`
	// "attempt" (must be denied and audited), "confined" (allowed by
	// design, must stay inside) or "impossible" (what it is after does not
	// exist in the sandbox: the attack must fail the way that shows it).
	Kind    string `json:"kind"`
	Denied  bool   `json:"denied"`
	Audited bool   `json:"audited"`
	OK      bool   `json:"ok"`
}

// redTeam collects the outcomes of one TestRedTeam.
type redTeam struct {
	mu  sync.Mutex
	out []rtOutcome
}

var rt redTeam

// attempt runs one attack. fn reports whether it was refused with the
// right error and whether that refusal is on the audit log; the test fails
// unless both hold. fn may log what it saw with t.Logf.
func attempt(t *testing.T, name string, fn func() (denied, audited bool)) {
	t.Helper()
	denied, audited := fn()
	rt.add(rtOutcome{Name: name, Kind: "attempt", Denied: denied, Audited: audited, OK: denied && audited})
	if !denied {
		t.Errorf("red-team %q: NOT DENIED", name)
	}
	if !audited {
		t.Errorf("red-team %q: denied but not on the audit log as a denial", name)
	}
}

// confined runs an attack that is not refused by design (a valid key
// that merely looks like a path, say); fn reports whether it stayed inside
// the agent's tree. It is counted apart from the denials.
func confined(t *testing.T, name string, fn func() bool) {
	t.Helper()
	ok := fn()
	rt.add(rtOutcome{Name: name, Kind: "confined", OK: ok})
	if !ok {
		t.Errorf("red-team %q: NOT CONFINED", name)
	}
}

// impossible runs an attack that the sandbox makes impossible by
// construction (the data directory does not exist in a run's world, other
// runs are in other pid namespaces...): nothing is there to refuse, so
// nothing is audited. fn reports whether it failed the way the sandbox
// makes it fail (the error asserted, not the absence of output).
func impossible(t *testing.T, name string, fn func() bool) {
	t.Helper()
	ok := fn()
	rt.add(rtOutcome{Name: name, Kind: "impossible", OK: ok})
	if !ok {
		t.Errorf("red-team %q: NOT IMPOSSIBLE: it got through", name)
	}
}

func (r *redTeam) add(o rtOutcome) {
	r.mu.Lock()
	r.out = append(r.out, o)
	r.mu.Unlock()
}

// report logs the summary line and writes the report file.
func (r *redTeam) report(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n, denied, audited, conf, confOK, imp, impOK int
	for _, o := range r.out {
		if o.Kind == "impossible" {
			imp++
			if o.OK {
				impOK++
			}
			continue
		}
		if o.Kind == "confined" {
			conf++
			if o.OK {
				confOK++
			}
			continue
		}
		n++
		if o.Denied {
			denied++
		}
		if o.Audited {
			audited++
		}
	}
	summary := fmt.Sprintf("red-team: %d attempts, %d denied, %d audited", n, denied, audited)
	t.Log(summary)
	t.Logf("red-team: %d allowed by design, %d of them confined", conf, confOK)
	t.Logf("red-team: %d impossible by construction (the sandbox), %d of them held", imp, impOK)
	f := os.Getenv("OXIOS_REDTEAM_REPORT")
	if f == "" {
		return
	}
	var b bytes.Buffer
	fmt.Fprintln(&b, summary)
	fmt.Fprintf(&b, "red-team: %d allowed by design, %d of them confined\n", conf, confOK)
	fmt.Fprintf(&b, "red-team: %d impossible by construction (the sandbox), %d of them held\n", imp, impOK)
	outs := append([]rtOutcome(nil), r.out...)
	sort.SliceStable(outs, func(i, j int) bool { return outs[i].Kind < outs[j].Kind })
	for _, o := range outs {
		res := "denied+audited"
		switch {
		case o.Kind == "confined" && o.OK:
			res = "confined"
		case o.Kind == "confined":
			res = "ESCAPED"
		case o.Kind == "impossible" && o.OK:
			res = "impossible"
		case o.Kind == "impossible":
			res = "GOT THROUGH"
		case !o.Denied:
			res = "NOT DENIED"
		case !o.Audited:
			res = "NOT AUDITED"
		}
		fmt.Fprintf(&b, "  %-15s %s\n", res, o.Name)
	}
	if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
		t.Errorf("writing the red-team report: %v", err)
	}
}

// auditSeq is the last seq on d's audit log: what an attempt's entries
// come after.
func auditSeq(t *testing.T, c *client.Client) uint64 {
	t.Helper()
	h, err := c.AuditHead(context.Background())
	if err != nil {
		t.Fatalf("audit head: %v", err)
	}
	return h.Seq
}

// auditedSince waits a little for an audit entry after seq since with op,
// result code and a target holding each of want. Refusals are audited
// without the caller waiting, so they may land just after the reply.
func auditedSince(t *testing.T, c *client.Client, since uint64, op, code string, want ...string) bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var seen []string
	for {
		seen = seen[:0]
		found := false
		err := c.AuditLog(context.Background(), proto.AuditLogArgs{SinceSeq: since + 1, Op: op}, func(line json.RawMessage) error {
			var e auditRec
			if json.Unmarshal(line, &e) != nil {
				return nil
			}
			seen = append(seen, e.Result+" "+e.Target)
			if e.Result != code {
				return nil
			}
			for _, w := range want {
				if !strings.Contains(e.Target, w) {
					return nil
				}
			}
			found = true
			return nil
		})
		if err != nil {
			t.Logf("audit log: %v", err)
			return false
		}
		if found {
			return true
		}
		if time.Now().After(deadline) {
			t.Logf("no %s %s entry with %q after seq %d; seen: %q", op, code, want, since, seen)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rtErr is the errno name of a client error.
func rtErr(err error) string {
	if err == nil {
		return "ok"
	}
	return errCode(err)
}

// shOut runs script as a process run of agent and returns its output
// lines, stdout and stderr both.
func shOut(t *testing.T, d *daemon, agent, script string) string {
	t.Helper()
	return runOutput(t, d, agent, script)
}

// fileSum is the SHA-256 of a host file, to show an attack left it alone.
func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// outsideFiles lists the files under root that are not under any of the
// allowed folders and whose name holds one of marks.
func outsideFiles(t *testing.T, root string, allowed []string, marks ...string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		for _, a := range allowed {
			if p == a || strings.HasPrefix(p, a+"/") {
				return nil
			}
		}
		for _, m := range marks {
			if strings.Contains(filepath.Base(p), m) {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}

func TestRedTeam(t *testing.T) {
	t.Parallel()
	t.Cleanup(func() { rt.report(t) })
	t.Run("Keys", redTeamKeys)
	t.Run("Agents", redTeamAgents)
	t.Run("Exec", redTeamExec)
	t.Run("Budget", redTeamBudget)
	t.Run("Policy", redTeamPolicy)
	t.Run("Mount", redTeamMount)
	t.Run("Wasm", redTeamWasm)
	t.Run("Net", redTeamNet)
	t.Run("Limits", redTeamLimits)
	t.Run("Sandbox", redTeamSandbox)
	t.Run("Detach", redTeamDetach)
	t.Run("Talk", redTeamTalk)
	t.Run("TalkMount", redTeamTalkMount)
	t.Run("Kernel", redTeamKernel)
	t.Run("Rootless", redTeamRootless)
}

// redTeamLimits: a fork bomb against [limits] processes, memory
// exhaustion against [limits] memory.
func redTeamLimits(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	if !cgroupsOffered(t, d) {
		t.Skip("this machine gives oxiosd no cgroups: only rlimits, which do not bind root")
	}
	attempt(t, "fork bomb against limits.processes = 32", func() (bool, bool) { return forkBomb(t, d) })
	attempt(t, "memory bomb (300 MB) against limits.memory = 64MiB", func() (bool, bool) { return memoryBomb(t, d) })
}

// redTeamKeys: path traversal in state keys, over the socket (the admin's
// client, and a run of the agent) and on the wire with raw bytes.
func redTeamKeys(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	ctx := context.Background()
	passwd := fileSum(t, "/etc/passwd")
	d.ox("", "ox-state", "save", "-a", "ops", "seed", "x")
	d.ox("", "ox-state", "save", "-a", "web", "secret", "s3cret")

	for _, k := range []string{"../x", "a/../../x", "../web/state/secret", "/etc/passwd", "a/./b", "a//b", "a\x00b", "..", "."} {
		k := k
		attempt(t, fmt.Sprintf("state.save key %q (socket)", k), func() (bool, bool) {
			since := auditSeq(t, c)
			_, err := c.StateSave(ctx, "ops", k, []byte("pwned"))
			return rtErr(err) == proto.EINVAL, auditedSince(t, c, since, proto.OpStateSave, proto.EINVAL, "ops:"+strings.ToValidUTF8(k, ""))
		})
	}
	for _, k := range []string{"../web/state/secret", "../../../../etc/passwd", "/etc/passwd", "a\x00b"} {
		k := k
		attempt(t, fmt.Sprintf("state.load key %q (socket)", k), func() (bool, bool) {
			since := auditSeq(t, c)
			v, _, err := c.StateLoad(ctx, "ops", k)
			if bytes.Contains(v, []byte("root:")) || bytes.Contains(v, []byte("s3cret")) {
				t.Errorf("load %q read %q", k, v)
				return false, false
			}
			return rtErr(err) == proto.EINVAL, auditedSince(t, c, since, proto.OpStateLoad, proto.EINVAL, "ops:")
		})
	}
	attempt(t, `state.delete key "../web/state/secret" (socket)`, func() (bool, bool) {
		since := auditSeq(t, c)
		_, err := c.StateDelete(ctx, "ops", "../web/state/secret")
		return rtErr(err) == proto.EINVAL, auditedSince(t, c, since, proto.OpStateDelete, proto.EINVAL, "ops:../web/state/secret")
	})
	attempt(t, `state.list prefix "../" (socket)`, func() (bool, bool) {
		since := auditSeq(t, c)
		err := c.StateList(ctx, "ops", "../", func(r proto.StateRecord) error {
			t.Errorf("listed %v", r)
			return nil
		})
		return rtErr(err) == proto.EINVAL, auditedSince(t, c, since, proto.OpStateList, proto.EINVAL, "ops:../")
	})
	// From a run of the agent with ox-state: the command checks the key
	// itself and exits 2 (usage) before it dials, so the daemon has
	// nothing to refuse or audit; counted as confined. The socket
	// attempts above are the ones the daemon must refuse.
	for _, k := range []string{"../x", "a/../../x", "/etc/passwd"} {
		k := k
		confined(t, fmt.Sprintf("state.save key %q (ox-state in a run of ops: refused before the socket)", k), func() bool {
			out := shOut(t, d, "ops", fmt.Sprintf("ox-state save '%s' pwned; echo \"rc=$?\"", k))
			return strings.Contains(out, "rc=2")
		})
	}
	// Invalid UTF-8 on the wire: an overlong "/" (C0 AF), an overlong
	// ".." (C0 AE C0 AE), a stray byte. Not refused by design: the JSON
	// decoder turns each invalid byte into U+FFFD before the kernel sees
	// the key, so these are valid keys of U+FFFD characters, never a "/"
	// or a "..": they must stay inside the agent's state.
	for _, k := range []string{"\xc0\xae\xc0\xae/\xc0\xae\xc0\xae/x", "a\xc0\xafb", "\xff"} {
		k := k
		confined(t, fmt.Sprintf("state.save key %q (raw wire, invalid UTF-8: a U+FFFD key)", k), func() bool {
			rc := d.raw(t)
			rc.send(`{"id":1,"op":"state.save","args":{"agent":"ops","key":"` + k + `","value":"pwned"}}`)
			r := rc.reply()
			if !r.OK {
				return true // refused is confined too
			}
			var rec proto.StateRecord
			json.Unmarshal(r.Result, &rec)
			return rec.Agent == "ops" && proto.CheckKey(rec.Key) == nil && strings.Count(rec.Key, "/") == strings.Count(k, "/") && !strings.Contains(rec.Key, "..")
		})
	}
	// Unicode look-alikes of "/" and ".." are valid keys by design: each
	// is one distinct key, a file name inside the agent's state, never a
	// path out of it.
	for _, k := range []string{"..\uff0f..\uff0fweb\uff0fstate\uff0fsecret", "..\u2215..\u2215etc\u2215passwd", "\u2024\u2024/x", "\uff0e\uff0e/\uff0e\uff0e/x"} {
		k := k
		confined(t, fmt.Sprintf("state.save key %q (look-alike, a valid key)", k), func() bool {
			if _, err := c.StateSave(ctx, "ops", k, []byte("lookalike")); err != nil {
				t.Logf("save %q: %v", k, err)
				return true // refused is confined too
			}
			v, _, err := c.StateLoad(ctx, "ops", k)
			if err != nil || string(v) != "lookalike" {
				t.Logf("load %q: %q %v", k, v, err)
				return false
			}
			if sec, _, _ := c.StateLoad(ctx, "web", "secret"); string(sec) != "s3cret" {
				t.Logf("web's secret is now %q", sec)
				return false
			}
			return true
		})
	}
	c.StateSave(ctx, "ops", "\u2024\u2024/x", []byte("x"))
	confined(t, "look-alike keys stay under the agent's state on disk", func() bool {
		// Wait for the saves to be durable, then look at the data dir.
		c.StateSave(ctx, "ops", "sync", []byte("x"))
		out := outsideFiles(t, d.data, []string{filepath.Join(d.data, "repo", "agents", "ops"), filepath.Join(d.data, "audit"), filepath.Join(d.data, "index")}, "\uff0f", "\u2215", "\u2024", "\uff0e", "pwned")
		if len(out) > 0 {
			t.Logf("files outside ops's tree: %v", out)
		}
		sec, _, _ := c.StateLoad(ctx, "web", "secret")
		return len(out) == 0 && string(sec) == "s3cret" && fileSum(t, "/etc/passwd") == passwd
	})
}

// redTeamAgents: a run of agent ops acting on agent web over the socket.
func redTeamAgents(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	d.ox("", "ox-state", "save", "-a", "web", "secret", "s3cret")
	d.ox("", "ox-state", "save", "-a", "ops", "mine", "x")
	for _, tc := range []struct{ name, script, op, target string }{
		{"state.save -a web from a run of ops", "ox-state save -a web x pwned", proto.OpStateSave, "web:x"},
		{"state.load -a web from a run of ops", "ox-state load -a web secret", proto.OpStateLoad, "web:secret"},
		{"state.delete -a web from a run of ops", "ox-state rm -a web secret", proto.OpStateDelete, "web:secret"},
		{"mem.remember -a web from a run of ops", "ox-remember -a web pwned", proto.OpMemRemember, "web"},
		{"exec -a web from a run of ops", "ox-exec -a web -- echo hi", proto.OpExec, "web:exec"},
	} {
		tc := tc
		attempt(t, tc.name, func() (bool, bool) {
			since := auditSeq(t, c)
			out := shOut(t, d, "ops", tc.script+` >/dev/null 2>&1; echo "rc=$?"`)
			return strings.Contains(out, "rc=77"), auditedSince(t, c, since, tc.op, proto.EPERM, tc.target)
		})
	}
	if v, _, _ := c.StateLoad(context.Background(), "web", "secret"); string(v) != "s3cret" {
		t.Errorf("web's secret: %q", v)
	}
}

// redTeamExec: the exec syscall with what the policy does not allow.
func redTeamExec(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	createAgent(t, d, "ops") // an exec does not create one
	c := d.client(t)
	ctx := context.Background()
	canary := filepath.Join(d.dir, "canary")
	os.WriteFile(canary, []byte("x"), 0o644)
	exec := func(a proto.ExecArgs) (proto.ExecRecord, string) {
		a.Agent = "ops"
		rec, err := c.Exec(ctx, a)
		return rec, rtErr(err)
	}
	for _, tc := range []struct {
		name string
		a    proto.ExecArgs
		rule string
	}{
		{"exec of a binary not allowed (rm)", proto.ExecArgs{Argv: []string{"rm", "-f", canary}}, "exec.allow"},
		{"exec of a path not allowed (/bin/sh)", proto.ExecArgs{Argv: []string{"/bin/sh", "-c", "id"}}, "exec.allow"},
		{"exec of an allowed name by another path (/tmp/ls)", proto.ExecArgs{Argv: []string{"/tmp/ls"}}, "exec.allow"},
		{"exec with ;", proto.ExecArgs{Command: "echo hi; rm -f " + canary}, "exec.shell"},
		{"exec with |", proto.ExecArgs{Command: "cat /etc/passwd | tee " + canary}, "exec.shell"},
		{"exec with $()", proto.ExecArgs{Command: "echo $(rm -f " + canary + ")"}, "exec.shell"},
		{"exec with backticks", proto.ExecArgs{Command: "echo `rm -f " + canary + "`"}, "exec.shell"},
		{"exec with >", proto.ExecArgs{Command: "echo pwned > " + canary}, "exec.shell"},
		{"exec with <", proto.ExecArgs{Command: "cat < /etc/shadow"}, "exec.shell"},
		{"exec with && ", proto.ExecArgs{Command: "true && rm -f " + canary}, "exec.shell"},
		{"exec argv with ; in an argument", proto.ExecArgs{Argv: []string{"echo", "hi;rm -f " + canary}}, "exec.shell"},
		{"exec argv with $() in an argument", proto.ExecArgs{Argv: []string{"echo", "$(id)"}}, "exec.shell"},
		{"exec argv with a newline in an argument", proto.ExecArgs{Argv: []string{"echo", "a\nrm -f " + canary}}, "exec.shell"},
		{"exec with an env assignment first (command)", proto.ExecArgs{Command: "LD_PRELOAD=/tmp/x.so cat /etc/passwd"}, "exec.allow"},
		{"exec with an env assignment first (argv)", proto.ExecArgs{Argv: []string{"LD_PRELOAD=/tmp/x.so", "cat"}}, "exec.allow"},
		{"exec env LD_PRELOAD=... cat (env injection through env)", proto.ExecArgs{Argv: []string{"env", "LD_PRELOAD=/tmp/x.so", "cat", "/etc/hostname"}}, "exec.allow"},
		{"exec env rm (a binary not allowed through env)", proto.ExecArgs{Argv: []string{"env", "rm", "-f", canary}}, "exec.allow"},
		{"exec env -S 'rm ...' (env splitting a command)", proto.ExecArgs{Argv: []string{"env", "-S", "rm -f " + canary}}, "exec.allow"},
		{"exec sort --compress-program=sh (a program run by sort)", proto.ExecArgs{Argv: []string{"sort", "-S", "1K", "--compress-program=sh"}, Stdin: strings.Repeat("rm -f "+canary+"\n", 4000)}, "exec.allow"},
	} {
		tc := tc
		attempt(t, tc.name, func() (bool, bool) {
			since := auditSeq(t, c)
			rec, code := exec(tc.a)
			if code == "ok" {
				t.Logf("%s ran: %+v", tc.name, rec)
			}
			return code == proto.EPERM, auditedSince(t, c, since, proto.OpExec, proto.EPERM, "ops:exec", "["+tc.rule+"]")
		})
	}
	if _, err := os.Stat(canary); err != nil {
		t.Errorf("the canary file is gone: an attack ran (%v)", err)
	}
	// The wire has no env for an exec: a request that brings one is
	// refused whole, not run without it.
	attempt(t, "exec request with an env field (wire)", func() (bool, bool) {
		since := auditSeq(t, c)
		rc := d.raw(t)
		rc.send(`{"id":1,"op":"exec","args":{"agent":"ops","argv":["env"],"env":["LD_PRELOAD=/tmp/x.so"]}}`)
		r := rc.reply()
		if r.OK {
			t.Logf("ran: %s", r.Result)
		}
		return !r.OK && r.Error.Code == proto.EINVAL, auditedSince(t, c, since, proto.OpExec, proto.EINVAL, "ops:exec [args]")
	})
	// The same from a run, through ox-exec.
	attempt(t, "ox-exec -- rm from a run of ops", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", "ox-exec -- rm -f "+canary+`; echo "rc=$?"`)
		return strings.Contains(out, "rc=77"), auditedSince(t, c, since, proto.OpExec, proto.EPERM, "ops:exec rm", "[exec.allow]")
	})
	attempt(t, "ox-exec -c 'echo; id' from a run of ops", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `ox-exec -c 'echo hi; id'; echo "rc=$?"`)
		return strings.Contains(out, "rc=77") && !strings.Contains(out, "uid="), auditedSince(t, c, since, proto.OpExec, proto.EPERM, "[exec.shell]")
	})
}

// redTeamBudget: an exec past run_execs, and past the agent's execs.
func redTeamBudget(t *testing.T) {
	dir := shortTempDir(t)
	presetPolicy(t, dir, "ops", "[exec]\nallow = [\"echo\", \"true\"]\n[budget]\nrun_execs = 2\n")
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	attempt(t, "ox-budget set from a run of ops (raise its own budget)", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `ox-budget set -a ops --execs 1000000 >/dev/null 2>&1; echo "rc=$?"`)
		return strings.Contains(out, "rc=77"), auditedSince(t, c, since, proto.OpBudgetSet, proto.EACCES, "ops")
	})
	attempt(t, "exec past run_execs (3rd of 2)", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `for i in 1 2 3; do ox-exec -- true; echo "rc$i=$?"; done`)
		t.Logf("%s", out)
		return strings.Contains(out, "rc1=0") && strings.Contains(out, "rc2=0") && strings.Contains(out, "rc3=1"),
			auditedSince(t, c, since, proto.OpExec, proto.EDQUOT, "ops:exec true [budget]")
	})
	attempt(t, "exec past the agent's execs (ox-budget set --execs)", func() (bool, bool) {
		if r := d.ox("", "ox-budget", "set", "-a", "ops", "--execs", "1"); r.code != 0 {
			t.Fatalf("ox-budget set: %d %s", r.code, r.stderr)
		}
		since := auditSeq(t, c)
		_, err := c.Exec(context.Background(), proto.ExecArgs{Agent: "ops", Argv: []string{"echo", "over"}})
		return rtErr(err) == proto.EDQUOT, auditedSince(t, c, since, proto.OpExec, proto.EDQUOT, "ops:exec echo over [budget]")
	})
}

// redTeamPolicy: policies written by who may not, and policies that do
// not parse, by ox-policy set and in the watched folder.
func redTeamPolicy(t *testing.T) {
	d, pdir := startWithPolicies(t)
	c := d.client(t)
	if r := d.ox("", "ox-policy", "set", "-a", "ops", writePolicy(t, strictPolicy)); r.code != 0 {
		t.Fatalf("set: %d %s", r.code, r.stderr)
	}
	allowAll := writePolicy(t, "[state]\nread = [\"**\"]\nwrite = [\"**\"]\n[exec]\nallow = [\"sh\"]\nshell = true\n")
	os.Chmod(allowAll, 0o644)
	for _, who := range []string{"ops", "web"} {
		who := who
		attempt(t, "ox-policy set -a "+who+" from a run of ops", func() (bool, bool) {
			since := auditSeq(t, c)
			// The policy file is written in the run's workspace: the
			// host's files are not in the run's world.
			out := shOut(t, d, "ops", `printf '[state]\nread = ["**"]\nwrite = ["**"]\n[exec]\nallow = ["sh"]\nshell = true\n' > "$HOME/p.toml"; ox-policy set -a `+who+` "$HOME/p.toml" >/dev/null 2>&1; echo "rc=$?"`)
			return strings.Contains(out, "rc=77"), auditedSince(t, c, since, proto.OpPolicySet, proto.EACCES, who+":policy.toml")
		})
	}
	inForce := func(agent, want string) bool {
		s := d.ox("", "ox-policy", "show", "-a", agent)
		if s.stdout != want {
			t.Logf("%s's policy now: %q", agent, s.stdout)
		}
		return s.stdout == want
	}
	for _, tc := range []struct{ name, text, line string }{
		{"ox-policy set with broken TOML", "[state]\nread = [\"**\"\nwrite = [\"**\"]\n", "line "},
		{"ox-policy set with an unknown key", "[state]\nread = [\"**\"]\n\n[exec]\nalow = [\"sh\"]\n", "line 5"},
		{"ox-policy set with an unknown table", "[state]\nread = [\"**\"]\n[sudo]\nall = true\n", "line 3"},
		{"ox-policy set with a bad key pattern", "[state]\nread = [\"../**\"]\n", "line 2"},
		{"ox-policy set with a negative budget", "[budget]\nrun_execs = -1\n", "line 2"},
	} {
		tc := tc
		attempt(t, tc.name, func() (bool, bool) {
			since := auditSeq(t, c)
			r := d.ox("", "ox-policy", "set", "-a", "ops", writePolicy(t, tc.text))
			if !strings.Contains(r.stderr, tc.line) {
				t.Logf("refusal does not name %q: %s", tc.line, r.stderr)
			}
			return r.code == 1 && strings.Contains(r.stderr, tc.line) && inForce("ops", strictPolicy),
				auditedSince(t, c, since, proto.OpPolicySet, proto.EINVAL, "ops:policy.toml")
		})
	}
	attempt(t, "a broken policy file dropped in the watched folder", func() (bool, bool) {
		since := auditSeq(t, c)
		os.WriteFile(filepath.Join(pdir, "web.toml"), []byte("[state]\nread = [\"**\"]\nwrite = \"**\"\n[exec]\nallow = [\"sh\"]\n"), 0o644)
		waitFor(t, "the broken policy file to be refused", func() bool { return strings.Contains(d.stderr.String(), "policy file refused") })
		return inForce("web", strictPolicy), auditedSince(t, c, since, proto.OpPolicySet, proto.EINVAL, "web:")
	})
	attempt(t, "a policy file with an unknown key dropped in the watched folder", func() (bool, bool) {
		since := auditSeq(t, c)
		n := strings.Count(d.stderr.String(), "policy file refused")
		tmp := filepath.Join(pdir, ".web.swp")
		os.WriteFile(tmp, []byte("[state]\nread = [\"**\"]\nwrite = [\"**\"]\nallow_all = true\n"), 0o644)
		os.Rename(tmp, filepath.Join(pdir, "web.toml"))
		waitFor(t, "the second broken policy file to be refused", func() bool { return strings.Count(d.stderr.String(), "policy file refused") > n })
		return inForce("web", strictPolicy), auditedSince(t, c, since, proto.OpPolicySet, proto.EINVAL, "web:")
	})
}

// redTeamMount: the FUSE view, driven by runs of agent ops.
func redTeamMount(t *testing.T) {
	m := startMounted(t, daemonOpts{})
	d := m.daemon
	c := d.client(t)
	ctx := context.Background()
	d.ox("", "ox-state", "save", "-a", "web", "secret", "s3cret")
	d.ox("", "ox-state", "save", "-a", "ops", "mine", "x")
	// The admin walks the whole tree first: the names are in the kernel's
	// caches, so the refusals below must come from the checks, not from a
	// lookup that happens to miss.
	m.sh(t, "ls -l agent/*/state agent/web/policy >/dev/null; cat agent/web/state/secret >/dev/null")
	shm := func(script string) string {
		return shOut(t, d, "ops", `cd "$OXIOS_MNT/agent/ops/state" || exit 9
`+script)
	}
	mntAttempt := func(name, script, op, code string, want ...string) {
		attempt(t, name, func() (bool, bool) {
			since := auditSeq(t, c)
			out := shm(`(` + script + `) 2>&1; echo "rc=$?"`)
			denied := !strings.Contains(out, "rc=0") && !strings.Contains(out, "s3cret") && !strings.Contains(out, "root:x:0")
			if !denied {
				t.Logf("%s: %s", name, out)
			}
			return denied, auditedSince(t, c, since, op, code, want...)
		})
	}
	// Another agent's folder does not exist in a run's sandbox (its mount
	// namespace shows only /agent/ops): nothing reaches the mount to be
	// refused.
	mntImpossible := func(name, script string) {
		impossible(t, name, func() bool {
			out := shm(`(` + script + `) 2>&1; echo "rc=$?"`)
			if strings.Contains(out, "rc=0") || strings.Contains(out, "s3cret") || !strings.Contains(out, "No such file") && !strings.Contains(out, "nonexistent") {
				t.Logf("%s: %s", name, out)
				return false
			}
			return true
		})
	}
	// The mount's own refusals are audited as fs.access.
	mntAttempt("symlink(2) to /etc/passwd in /agent/ops/state", "ln -s /etc/passwd passwd", proto.OpFSAccess, proto.EPERM, "ops:passwd [symlink]")
	mntAttempt("symlink(2) to ../../web/state/secret in /agent/ops/state", "ln -s ../../web/state/secret s", proto.OpFSAccess, proto.EPERM, "ops:s [symlink]")
	mntAttempt("link(2) of a key in /agent/ops/state", "ln mine mine2", proto.OpFSAccess, proto.EPERM, "ops:mine2 [link]")
	mntImpossible("link(2) from another agent's key into /agent/ops/state", "ln ../../web/state/secret stolen")
	mntImpossible("write /agent/web/state/x from a run of ops", `echo pwned > "$OXIOS_MNT/agent/web/state/x"`)
	mntImpossible("read /agent/web/state/secret from a run of ops", `cat "$OXIOS_MNT/agent/web/state/secret"`)
	mntImpossible("'..' segments: /agent/ops/state/../../web/state/x", `echo pwned > ../../web/state/x`)
	mntAttempt("write /agent/ops/policy through the mount", `echo 'allow = ["sh"]' >> ../policy`, proto.OpPolicySet, proto.EROFS, "ops:policy.toml [mount]")
	mntAttempt("'..' segments: /agent/ops/state/../policy", `echo x > ../policy`, proto.OpPolicySet, proto.EROFS, "ops:policy.toml [mount]")
	mntImpossible("write /agent/web/policy through the mount from a run of ops", `echo x > "$OXIOS_MNT/agent/web/policy"`)
	attempt(t, "write /agent/ops/policy through the mount as the admin", func() (bool, bool) {
		since := auditSeq(t, c)
		_, err := os.OpenFile(filepath.Join(m.mnt, "agent/ops/policy"), os.O_WRONLY|os.O_TRUNC, 0)
		return err != nil && strings.Contains(err.Error(), "read-only"), auditedSince(t, c, since, proto.OpPolicySet, proto.EROFS, "ops:policy.toml [mount]")
	})
	attempt(t, "symlink(2) through the mount as the admin", func() (bool, bool) {
		since := auditSeq(t, c)
		err := os.Symlink("/etc/passwd", filepath.Join(m.mnt, "agent/ops/state/adminlink"))
		return err != nil, auditedSince(t, c, since, proto.OpFSAccess, proto.EPERM, "ops:adminlink [symlink]")
	})
	if v, _, _ := c.StateLoad(ctx, "web", "secret"); string(v) != "s3cret" {
		t.Errorf("web's secret: %q", v)
	}
	if _, _, err := c.StateLoad(ctx, "web", "x"); rtErr(err) != proto.ENOENT {
		t.Errorf("web:x exists: %v", err)
	}
}

// redTeamWasm: hostile WASM tools. The module is installed under an
// allowed name (jsonq), so the sandbox, not the policy, must hold.
func redTeamWasm(t *testing.T) {
	dir := wasmTools(t, "jsonq=hostile")
	d := startDaemon(t, daemonOpts{config: toolsConfig(dir)})
	createAgent(t, d, "ops") // a tool call does not create one
	// The policy's tools.timeout caps what a call asks for: 3m lets the
	// allocation below ask for 2m (under make test's load it took more
	// than the default 10s before the memory limit bit).
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"tools": "allow = [\"jsonq\", \"textstat\"]\nmemory = \"64MiB\"\ntimeout = \"3m\""}))
	c := d.client(t)
	tool := func(timeout string, args ...string) (proto.ToolRecord, string) {
		rec, err := toolRun(c, proto.ToolRunArgs{Agent: "ops", Tool: "jsonq", Args: args, Timeout: timeout})
		return rec, rtErr(err)
	}
	// Compile the module first (tens of seconds under -race on a loaded
	// machine), so that no attack below runs into the time limit by the
	// compile's fault.
	if rec, code := tool("", "echo"); code != "ok" || rec.Status != 0 {
		t.Fatalf("echo: %s %+v", code, rec)
	}
	// /etc/passwd by its own path is not refused by the host, by design:
	// the guest has no "/" but its workspace (/work), so the path does not
	// exist in its world and the open fails in the guest, never asking the
	// host. It must stay confined, the failed call on the log.
	confined(t, "wasm tool reads /etc/passwd (no such path in the guest)", func() bool {
		since := auditSeq(t, c)
		rec, code := tool("", "read", "/etc/passwd")
		return code == "ok" && rec.Status != 0 && !strings.Contains(rec.Stdout, "root:") &&
			auditedSince(t, c, since, proto.OpToolRun, "ok", "ops:tool jsonq => status ")
	})
	// A run's exec leaves a symlink in its workspace; a tool of the same
	// run follows it: os.Root refuses.
	attempt(t, "wasm tool reads a symlink to /etc/passwd a run's exec left in the workspace", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `ln -s /etc/passwd passwd && ox-exec --json --wasm jsonq -- read /work/passwd; echo "rc=$?"`)
		return strings.Contains(out, "rc=1") && !strings.Contains(out, "root:x"),
			auditedSince(t, c, since, proto.OpToolRun, proto.EPERM, "ops:tool jsonq [sandbox] /work/passwd")
	})
	// The guest cleans the path to /etc/passwd itself: as above.
	confined(t, "wasm tool reads /work/../../etc/passwd (cleaned in the guest)", func() bool {
		since := auditSeq(t, c)
		rec, code := tool("", "read", "/work/../../etc/passwd")
		return code == "ok" && rec.Status != 0 && !strings.Contains(rec.Stdout, "root:") &&
			auditedSince(t, c, since, proto.OpToolRun, "ok", "ops:tool jsonq => status ")
	})
	// A socket and memory past the cap are not refused by the host, by
	// design: WASI preview 1 has no call that opens a socket, so the dial
	// fails inside the guest; and memory.grow past tools.memory fails
	// inside the guest too (wazero never asks the host for the pages).
	// Both must stay confined: the call fails, nothing is reached, and the
	// call's entry on the log records its failed status.
	confined(t, "wasm tool opens a socket (no socket call in WASI: fails in the guest)", func() bool {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		var reached atomic.Bool
		go func() {
			if cn, err := l.Accept(); err == nil {
				reached.Store(true)
				cn.Close()
			}
		}()
		since := auditSeq(t, c)
		rec, code := tool("", "dial", l.Addr().String())
		return code == "ok" && rec.Status != 0 && !reached.Load() && auditedSince(t, c, since, proto.OpToolRun, "ok", "ops:tool jsonq => status ")
	})
	attempt(t, "wasm tool loops forever", func() (bool, bool) {
		since := auditSeq(t, c)
		rec, code := tool("500ms", "loop")
		return code == "ok" && rec.TimedOut, auditedSince(t, c, since, proto.OpToolRun, proto.ETIMEDOUT, "ops:tool jsonq => timed out", "[tools.timeout]")
	})
	confined(t, "wasm tool allocates past tools.memory (fails in the guest)", func() bool {
		since := auditSeq(t, c)
		// A generous time limit: on a loaded machine the allocations
		// before the limit bites take seconds, and a timeout would hide
		// whether the memory limit held.
		rec, code := tool("2m", "alloc", "256")
		if rec.TimedOut {
			t.Logf("the allocation ran into the 2m time limit: %+v", rec)
		}
		return code == "ok" && rec.Status != 0 && !rec.TimedOut && !strings.Contains(rec.Stdout, "allocated") &&
			auditedSince(t, c, since, proto.OpToolRun, "ok", "ops:tool jsonq => status ")
	})
	// And the daemon still runs tools.
	if rec, code := tool("", "echo"); code != "ok" || rec.Status != 0 {
		t.Errorf("echo after the attacks: %s %+v", code, rec)
	}
}

func toolRun(c *client.Client, a proto.ToolRunArgs) (proto.ToolRecord, error) {
	var rec proto.ToolRecord
	err := c.Call(context.Background(), proto.OpToolRun, a, &rec)
	return rec, err
}

// redTeamNet: SSRF through the fetch syscall.
func redTeamNet(t *testing.T) {
	// hidden is what SSRF is after: a loopback service no policy lists.
	var hiddenHits, pubHits int64
	var mu sync.Mutex
	hidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hiddenHits++
		mu.Unlock()
		w.Write([]byte("internal secret"))
	}))
	t.Cleanup(hidden.Close)
	// pub stands for a public host: the policy lists it by address (it is
	// on 127.0.0.1 too, but on another port: address rules do not name
	// ports, so the policy lists it as "127.0.0.1" and the attacks below
	// go where no rule reaches), and it redirects on demand.
	pub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pubHits++
		mu.Unlock()
		if u := r.URL.Query().Get("u"); u != "" {
			http.Redirect(w, r, u, http.StatusFound)
			return
		}
		w.Write([]byte("public"))
	}))
	t.Cleanup(pub.Close)
	dir := shortTempDir(t)
	// web may reach 127.0.0.1 only; ops has the default policy (no host);
	// api may reach the name "localhost" but not what it resolves to.
	presetPolicy(t, dir, "web", "[net]\nallow = [\"127.0.0.1\"]\ntimeout = \"5s\"\n")
	presetPolicy(t, dir, "api", "[net]\nallow = [\"localhost\"]\ntimeout = \"5s\"\n")
	d := startDaemon(t, daemonOpts{dir: dir})
	createAgent(t, d, "ops") // a fetch does not create one
	c := d.client(t)
	ctx := context.Background()
	_, port, _ := strings.Cut(strings.TrimPrefix(hidden.URL, "http://"), ":")
	if _, err := c.NetFetch(ctx, proto.FetchArgs{Agent: "web", URL: pub.URL + "/"}); err != nil {
		t.Fatalf("the allowed fetch: %v", err)
	}
	for _, tc := range []struct{ name, agent, url, rule string }{
		{"fetch http://127.0.0.1 (default policy)", "ops", hidden.URL + "/", "net."},
		{"fetch http://169.254.169.254 metadata", "ops", "http://169.254.169.254/latest/meta-data/", "net.private"},
		{"fetch http://169.254.169.254 metadata, 127.0.0.1 listed", "web", "http://169.254.169.254/latest/meta-data/", "net.private"},
		{"fetch http://[::1]", "web", "http://[::1]:" + port + "/", "net."},
		{"fetch http://0x7f000001 (hex loopback)", "ops", "http://0x7f000001:" + port + "/", "net."},
		{"fetch http://localhost (a name for loopback)", "ops", "http://localhost:" + port + "/", "net."},
		{"fetch http://localhost, the name allowed, its address not", "api", "http://localhost:" + port + "/", "net.private"},
		{"fetch a redirect from an allowed host to 169.254.169.254", "web", pub.URL + "/?u=http://169.254.169.254/latest/meta-data/", "net.private"},
		{"fetch a redirect from an allowed host to localhost", "web", pub.URL + "/?u=http://localhost:" + port + "/", "net."},
		{"fetch a redirect from an allowed host to [::1]", "web", pub.URL + "/?u=http://[::1]:" + port + "/", "net."},
		{"fetch a redirect from an allowed host to file:///etc/passwd", "web", pub.URL + "/?u=file:///etc/passwd", "net.scheme"},
	} {
		tc := tc
		attempt(t, tc.name, func() (bool, bool) {
			since := auditSeq(t, c)
			rec, err := c.NetFetch(ctx, proto.FetchArgs{Agent: tc.agent, URL: tc.url})
			if err == nil {
				t.Logf("fetched: %+v", rec)
			}
			return rtErr(err) == proto.EPERM, auditedSince(t, c, since, proto.OpNetFetch, proto.EPERM, tc.agent+":fetch", "["+tc.rule)
		})
	}
	if hiddenHits != 0 {
		t.Errorf("the hidden service got %d requests", hiddenHits)
	}
}

// spawnSh runs script under /bin/sh as a process run of agent and returns
// the run's id, its output lines (stdout and stderr) and its exit status.
func spawnSh(t *testing.T, d *daemon, agent, script string, env ...string) (id, out string, status int) {
	t.Helper()
	r := spawnEnv(t, d, agent, env, "/bin/sh", "-c", script)
	return r.id, r.out, r.status
}

// auditedBy is auditedSince for an entry whose actor is agent's run.
func auditedBy(t *testing.T, c *client.Client, since uint64, op, code, agent, run string, want ...string) bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		found := false
		var seen []string
		err := c.AuditLog(context.Background(), proto.AuditLogArgs{SinceSeq: since + 1, Op: op}, func(line json.RawMessage) error {
			var e auditRec
			if json.Unmarshal(line, &e) != nil {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s %s by %s/%s uid %d", e.Result, e.Target, e.Actor.Agent, e.Actor.Run, e.Actor.UID))
			if e.Result != code || e.Actor.Agent != agent || e.Actor.Run != run {
				return nil
			}
			for _, w := range want {
				if !strings.Contains(e.Target, w) {
					return nil
				}
			}
			found = true
			return nil
		})
		if err != nil {
			t.Logf("audit log: %v", err)
			return false
		}
		if found {
			return true
		}
		if time.Now().After(deadline) {
			t.Logf("no %s %s entry by %s/%s with %q; seen: %q", op, code, agent, run, want, seen)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// probeLine finds the line of a probe's result ("NAME rc=N output...")
// in a run's output.
func probeLine(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name+" rc=") {
			return l
		}
	}
	return ""
}

// probes is a shell function for sandbox probes: each prints one line,
// its name, its status and its output.
const probes = `probe() { n=$1; shift; o=$("$@" 2>&1); r=$?; echo "$n rc=$r $(echo "$o" | tr '\n' ' ')"; }
`

// redTeamSandbox (issue 17): from inside a run of ops, reach what the run
// must not: oxiosd's data, the daemon and other runs, the host's files,
// the network, privileges. The sandbox makes most of it impossible by
// construction: each probe asserts the error that shows it.
func redTeamSandbox(t *testing.T) {
	m := startMounted(t, daemonOpts{})
	d := m.daemon
	c := d.client(t)
	ctx := context.Background()
	d.ox("", "ox-state", "save", "-a", "web", "secret", "s3cret")
	d.ox("", "ox-state", "save", "-a", "ops", "mine", "x")
	// A long run of web, the neighbour to signal.
	wr := d.ox("", "ox-spawn", "-a", "web", "-d", "--", "/bin/sleep", "60")
	webRun := records(t, wr.stdout)[0]
	webID, _ := webRun["id"].(string)
	webPID := int(webRun["pid"].(float64))
	t.Cleanup(func() { d.ox("", "ox-kill", "-s", "KILL", webID) })
	// A listener on the host's loopback, which a run without the network
	// must not reach.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	go func() {
		for {
			cn, err := ln.Accept()
			if err != nil {
				return
			}
			hits.Add(1)
			cn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	canary := fmt.Sprintf("/tmp/oxios-rt-canary-%d", os.Getpid())
	secret := filepath.Join(d.data, "repo", "agents", "web", "state", "secret")
	script := probes + fmt.Sprintf(`
probe data ls %[1]s
probe secret cat %[2]s
probe audit sh -c 'echo x >> %[1]s/audit/x'
probe toolcache sh -c 'echo x > %[1]s/cache/tools/planted'
probe daemonproc ls /proc/%[3]d/
probe killdaemon kill -9 %[3]d
probe initroot ls /proc/1/root/
probe initfd ls /proc/1/fd/
probe stop kill -STOP %[4]d
probe cgroup sh -c 'echo $$ > /sys/fs/cgroup/pids/cgroup.procs'
probe etc touch /etc/oxios-rt
probe usr touch /usr/oxios-rt
probe root touch /oxios-rt
probe tmp touch %[5]s
probe shadow head -c1 /etc/shadow
probe net perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => %[6]d, Proto => "tcp", Timeout => 3) or die "connect: $!\n"; print "connected\n"'
probe setuid mount -t tmpfs none /tmp
probe userns unshare -U -r id -u
probe agents ls %[7]s/agent
probe ptrace perl -e '$r = syscall(101, 16, 1, 0, 0); die "ptrace: $!\n" if $r < 0; print "attached\n"'
probe uid id -u
probe mem ls -la %[8]s
`, d.data, secret, d.cmd.Process.Pid, webPID, canary, port, m.mnt, filepath.Dir(d.data))
	id, out, _ := spawnSh(t, d, "ops", script)
	t.Logf("probes of run %s:\n%s", id, out)
	expect := func(name, probe string, want ...string) {
		impossible(t, name, func() bool {
			l := probeLine(out, probe)
			if l == "" || strings.HasPrefix(l, probe+" rc=0 ") {
				t.Logf("%s: %q", name, l)
				return false
			}
			for _, w := range want {
				if strings.Contains(l, w) {
					return true
				}
			}
			t.Logf("%s: %q lacks %q", name, l, want)
			return false
		})
	}
	expect("read oxiosd's data dir from a run", "data", "No such file")
	expect("read another agent's state in DATA from a run (cat DATA/repo/agents/web/state/secret)", "secret", "No such file")
	expect("append to the audit segments from a run", "audit", "nonexistent", "No such file")
	expect("plant compiled code in the tools' cache (DATA/cache/tools, which oxiosd loads and runs)", "toolcache", "nonexistent", "No such file")
	expect("look at the daemon in /proc/PID from a run", "daemonproc", "No such file")
	expect("kill -9 the daemon from a run", "killdaemon", "No such process")
	expect("/proc/1/root of the run's init (a way out of the mount namespace)", "initroot", "Permission denied")
	expect("/proc/1/fd of the run's init", "initfd", "Permission denied")
	expect("kill -STOP another agent's run by pid", "stop", "No such process")
	expect("escape the run's cgroup (write its pid into another)", "cgroup", "nonexistent", "No such file")
	expect("write /etc from a run", "etc", "Read-only file system")
	expect("write /usr from a run", "usr", "Read-only file system")
	expect("write / from a run", "root", "Read-only file system")
	expect("read /etc/shadow from a run", "shadow", "Permission denied")
	expect("connect to the host's loopback from a run without the network", "net", "unreachable", "refused")
	expect("a setuid binary (mount) to become root", "setuid", "superuser", "permitted", "denied")
	expect("a new user namespace to gain capabilities (unshare -U -r)", "userns", "Operation not permitted")
	expect("ptrace(PTRACE_ATTACH) the run's init", "ptrace", "Operation not permitted")
	confined(t, "the run's own uid is a sandbox's, not root", func() bool {
		l := probeLine(out, "uid")
		return strings.HasPrefix(l, "uid rc=0 19") // sandbox uids start at 1_900_000_000
	})
	confined(t, "the mount shows only the run's own /agent/ops", func() bool {
		return probeLine(out, "agents") == "agents rc=0 ops "
	})
	confined(t, "/tmp of a run is its own, not the host's", func() bool {
		_, err := os.Stat(canary)
		return strings.HasPrefix(probeLine(out, "tmp"), "tmp rc=0") && errors.Is(err, os.ErrNotExist)
	})
	confined(t, "the daemon's folder shows only the run's own socket", func() bool {
		l := probeLine(out, "mem")
		return strings.Contains(l, "oxiosd.sock") && !strings.Contains(l, " data")
	})
	if _, err := os.Stat(filepath.Join(d.data, "cache", "tools", "planted")); err == nil {
		t.Error("a run planted a file in the host's DATA/cache/tools")
	}
	if hits.Load() != 0 {
		t.Errorf("the host's listener got %d connections from a run", hits.Load())
	}
	// web's run goes on, unstopped.
	var ps []proto.RunRecord
	c.Ps(ctx, proto.PsArgs{Agent: "web"}, func(r proto.RunRecord) error { ps = append(ps, r); return nil })
	if len(ps) != 1 || ps[0].State != proto.RunRunning {
		t.Errorf("web's run after the attacks: %+v", ps)
	}

	// Through ox-exec, the exec syscall's own sandbox (the issue's
	// attacks with allowed programs).
	id, out, _ = spawnSh(t, d, "ops", fmt.Sprintf(`ox-exec -- cat %s; echo "rc=$?"; ox-exec -- head -c1 /etc/shadow; echo "rc=$?"`, secret))
	impossible(t, "ox-exec -- cat DATA/.../secret (an allowed program reading another agent's data)", func() bool {
		return strings.Contains(out, "No such file") && !strings.Contains(out, "s3cret")
	})
	impossible(t, "ox-exec -- head /etc/shadow (an allowed program reading a root file)", func() bool {
		return strings.Contains(out, "Permission denied") && !strings.Contains(out, "root:")
	})
	attempt(t, "ox-exec -- sort --compress=sh from a run (GNU sort's abbreviation runs sh)", func() (bool, bool) {
		since := auditSeq(t, c)
		id, out, _ := spawnSh(t, d, "ops", `yes "touch /tmp/PWNED" | head -2000 | ox-exec -- sort --compress=sh -S 4k -T /tmp; echo "rc=$?"`)
		return strings.Contains(out, "rc=77"), auditedBy(t, c, since, proto.OpExec, proto.EPERM, "ops", id, "ops:exec sort", "[exec.allow]")
	})
	attempt(t, "ox-kill -s STOP another agent's run from a run", func() (bool, bool) {
		since := auditSeq(t, c)
		id, out, _ := spawnSh(t, d, "ops", "ox-kill -s STOP "+webID+` >/dev/null 2>&1; echo "rc=$?"`)
		return strings.Contains(out, "rc=77"), auditedBy(t, c, since, proto.OpRunKill, proto.EPERM, "ops", id, "web:"+webID)
	})
	if v, _, _ := c.StateLoad(ctx, "web", "secret"); string(v) != "s3cret" {
		t.Errorf("web's secret: %q", v)
	}
}

// redTeamDetach (issue 17): a process of a run that leaves its process
// tree (setsid, a double fork, job control, daemon(3)) is still its run's
// agent: what it asks of another agent is refused and audited with the
// agent and the run, never taken for the admin's.
func redTeamDetach(t *testing.T) {
	dir := shortTempDir(t)
	// loose runs unsandboxed: its detached processes are attributed by
	// their cgroup.
	presetPolicy(t, dir, "loose", "[state]\nread = [\"**\"]\nwrite = [\"**\"]\n[sandbox]\nisolation = \"none\"\n")
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	d.ox("", "ox-state", "save", "-a", "web", "secret", "s3cret")
	const wait = `
i=0; while [ ! -s "$HOME/out" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
cat "$HOME/out"`
	// CMD is what the detached process does; it reports its status in
	// the workspace, which the run waits for.
	detach := map[string]string{
		"setsid -f":                      `setsid -f sh -c "$CMD" </dev/null >/dev/null 2>&1`,
		"a double fork":                  `( ( sh -c "$CMD" </dev/null >/dev/null 2>&1 & ) & )`,
		"set -m (job control)":           `sh -c 'set -m; sh -c "$CMD" </dev/null >/dev/null 2>&1 & wait'`,
		"daemon(3) (fork, setsid, fork)": `perl -MPOSIX -e 'fork and exit; POSIX::setsid(); fork and exit; chdir "/"; exec "sh", "-c", $ENV{CMD}' </dev/null >/dev/null 2>&1`,
	}
	names := make([]string, 0, len(detach))
	for n := range detach {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, agent := range []string{"ops", "loose"} {
		if agent == "loose" && !cgroupsOffered(t, d) {
			continue
		}
		how := "in its sandbox"
		if agent == "loose" {
			how = "unsandboxed (isolation = none)"
		}
		for _, n := range names {
			attempt(t, fmt.Sprintf("ox-state load -a web after %s, from a run of %s %s", n, agent, how), func() (bool, bool) {
				since := auditSeq(t, c)
				id, out, _ := spawnSh(t, d, agent, `rm -f "$HOME/out"; `+detach[n]+wait,
					`CMD=ox-state load -a web secret >/dev/null 2>&1; echo "rc=$?" > "$HOME/out"`)
				return strings.Contains(out, "rc=77"), auditedBy(t, c, since, proto.OpStateLoad, proto.EPERM, agent, id, "web:secret")
			})
		}
		attempt(t, fmt.Sprintf("ox-policy set -a %s after setsid -f, from a run of %s %s", agent, agent, how), func() (bool, bool) {
			since := auditSeq(t, c)
			id, out, _ := spawnSh(t, d, agent, `rm -f "$HOME/out"; printf '[exec]\nallow = ["sh"]\n' > "$HOME/evil.toml"; `+detach["setsid -f"]+wait,
				`CMD=ox-policy set -a `+agent+` "$HOME/evil.toml" >/dev/null 2>&1; echo "rc=$?" > "$HOME/out"`)
			return strings.Contains(out, "rc=77"), auditedBy(t, c, since, proto.OpPolicySet, proto.EACCES, agent, id, agent+":")
		})
	}
	impossible(t, "a run's detached child connecting after the run ended (its pid namespace ends with it)", func() bool {
		since := auditSeq(t, c)
		_, _, st := spawnSh(t, d, "ops", `setsid -f sh -c 'sleep 1; ox-state save late x' </dev/null >/dev/null 2>&1; exit 0`)
		time.Sleep(2500 * time.Millisecond)
		_, _, err := c.StateLoad(ctx, "ops", "late")
		var saved bool
		c.AuditLog(ctx, proto.AuditLogArgs{SinceSeq: since + 1, Op: proto.OpStateSave}, func(line json.RawMessage) error {
			saved = saved || strings.Contains(string(line), "ops:late")
			return nil
		})
		return st == 0 && rtErr(err) == proto.ENOENT && !saved
	})
	if v, _, _ := c.StateLoad(ctx, "web", "secret"); string(v) != "s3cret" {
		t.Errorf("web's secret: %q", v)
	}
	if p := d.ox("", "ox-policy", "show", "-a", "ops", "--json"); strings.Contains(p.stdout, `"sh"`) {
		t.Errorf("ops's policy was rewritten: %s", p.stdout)
	}
}
