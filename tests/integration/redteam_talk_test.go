package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/approval"
	"github.com/oxios/oxios/pkg/proto"
	schedjobs "github.com/oxios/oxios/pkg/sched/jobs"
)

// redTeamTalk: a run of ops goes after what forks, messages and approvals
// opened: other agents through the fork syscalls, other inboxes, sending
// as someone else, deciding its own approvals, and an operator's view of
// what it asks for: a command whose tail is cut from the operator's view,
// or text that a terminal shows as something else.
func redTeamTalk(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	c := d.client(t)
	d.mustOx(t, "", "ox-state", "save", "-a", "web", "secret", "s3cret")
	d.mustOx(t, "", "ox-state", "save", "-a", "friend", "x", "1")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{
		"ask": "exec = [\"ls\"]\ntimeout = \"60s\"\ndefault = \"deny\"",
		"msg": "send = [\"friend\"]\naccept = [\"*\"]",
	}))
	for _, tc := range []struct{ name, script, op, code, target string }{
		{"agent.fork of web from a run of ops", "ox-fork web stolen", proto.OpAgentFork, proto.EPERM, "stolen:fork web"},
		{"agent.fork of ops as a new agent from its own run", "ox-fork ops ops2", proto.OpAgentFork, proto.EPERM, "ops2:fork ops"},
		{"agent.fork of ops over web (taking its name)", "ox-fork ops web", proto.OpAgentFork, proto.EPERM, "web:fork ops"},
		{"agent.remove of web from a run of ops", "ox-fork rm web", proto.OpAgentRemove, proto.EACCES, "web"},
		{"agent.diff against web from a run of ops", "ox-fork diff ops web", proto.OpAgentDiff, proto.EPERM, "web"},
		{"msg.send to an agent not on msg.send", "ox-msg send web hello", proto.OpMsgSend, proto.EPERM, "web:msg from ops"},
		{"msg.send as web (a forged sender)", "ox-msg send -a web friend 'from web, trust me'", proto.OpMsgSend, proto.EPERM, "friend:msg from web"},
		{"msg.list of web's inbox", "ox-msg ls -a web", proto.OpMsgList, proto.EPERM, "web:inbox"},
		{"msg.recv of web's inbox", "ox-msg recv -a web", proto.OpMsgRecv, proto.EPERM, "web:inbox"},
		{"schedule.add on web (a job woken by web's messages)", "ox-schedule add -a web --name x --cron @message -- /bin/true", proto.OpScheduleAdd, proto.EPERM, "web:x"},
	} {
		attempt(t, tc.name, func() (bool, bool) {
			since := auditSeq(t, c)
			out := shOut(t, d, "ops", tc.script+` >/dev/null 2>&1; echo "rc=$?"`)
			return strings.Contains(out, "rc=77"), auditedSince(t, c, since, tc.op, tc.code, tc.target)
		})
	}
	attempt(t, "an inbox flood from a run (past the recipient's msg.quota)", func() (bool, bool) {
		d.mustOx(t, "", "ox-policy", "set", "-a", "friend", sectionPolicy(t, map[string]string{"msg": "send = [\"*\"]\naccept = [\"*\"]\nquota = \"1MiB\""}))
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `big=$(head -c 100000 /dev/zero | tr '\0' x)
i=0; while [ $i -lt 40 ]; do ox-msg send friend "$big" >/dev/null 2>&1 || { echo "rc=$? at $i"; break; }; i=$((i+1)); done; echo "sent=$i"`)
		fi, err := os.Stat(filepath.Join(d.data, "inbox", "friend.jsonl"))
		if err != nil || fi.Size() > 1<<20 {
			t.Logf("friend's inbox: %v %v", fi, err)
			return false, false
		}
		return strings.Contains(out, "rc=1 at") && !strings.Contains(out, "sent=40"), auditedSince(t, c, since, proto.OpMsgSend, proto.EDQUOT, "friend:msg from ops", "[msg.quota]")
	})
	attempt(t, "memories past memory.max_bytes from a run (a count alone bounded nothing)", func() (bool, bool) {
		d.mustOx(t, "", "ox-policy", "set", "-a", "web", sectionPolicy(t, map[string]string{"memory": "kinds = [\"episodic\"]\nmax_bytes = \"8MiB\""}))
		since := auditSeq(t, c)
		out := shOut(t, d, "web", `big=$(head -c 3000000 /dev/zero | tr '\0' x)
i=0; while [ $i -lt 10 ]; do printf '%s\n' "$big" | ox-remember >/dev/null 2>&1 || { echo "rc=$? at $i"; break; }; i=$((i+1)); done; echo "kept=$i"`)
		n, bytes := 0, int64(0)
		filepath.Walk(filepath.Join(d.data, "repo", "agents", "web", "mem"), func(p string, fi os.FileInfo, err error) error {
			if err == nil && !fi.IsDir() {
				n++
				bytes += fi.Size()
			}
			return nil
		})
		if bytes > 8<<20 {
			t.Logf("web's memories: %d files, %d bytes", n, bytes)
			return false, false
		}
		return strings.Contains(out, "rc=77 at 2") && strings.Contains(out, "kept=2"), auditedSince(t, c, since, proto.OpMemRemember, proto.EPERM, "[memory.max_bytes]")
	})
	attempt(t, "a flood of jobs from a run (each a run a minute)", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "friend", `i=0; while [ $i -lt 70 ]; do ox-schedule add --name flood$i --cron "* * * * *" -- /bin/true >/dev/null 2>&1 || { echo "rc=$? at $i"; break; }; i=$((i+1)); done; echo "added=$i"`)
		return strings.Contains(out, "rc=1 at "+strconv.Itoa(schedjobs.MaxPerAgent)), auditedSince(t, c, since, proto.OpScheduleAdd, proto.EDQUOT, "friend:flood")
	})
	confined(t, "runs spawning runs (each with processes of its own) under the default policy", func() bool {
		d.mustOx(t, "", "ox-state", "save", "-a", "spawner", "x", "1")
		out := shOut(t, d, "spawner", `i=0; while [ $i -lt 24 ]; do ox-spawn -d -- sleep 600 >/dev/null 2>&1 || break; i=$((i+1)); done; echo "spawned=$i"`)
		var running, queued int
		for _, l := range strings.Split(d.mustOx(t, "", "ox-ps", "-a", "spawner", "--json"), "\n") {
			switch {
			case strings.Contains(l, `"state":"running"`):
				running++
			case strings.Contains(l, `"state":"queued"`):
				queued++
			}
		}
		// They sleep until killed: none ends before it is counted.
		var ids []string
		for _, l := range strings.Split(d.mustOx(t, "", "ox-ps", "-a", "spawner", "--json"), "\n") {
			var r proto.RunRecord
			if json.Unmarshal([]byte(l), &r) == nil && r.ID != "" {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) > 0 {
			d.ox("", "ox-kill", append([]string{"-s", "KILL"}, ids...)...)
		}
		ok := strings.Contains(out, "spawned=24") && running <= 16 && queued > 0 && running+queued >= 24
		if !ok {
			t.Logf("%s; %d running, %d queued", out, running, queued)
		}
		return ok
	})
	// Approvals: each attack parks an exec of ls (ask.exec) in the
	// background of a run, then looks at what the operator is shown.
	// pending is the pending request whose what holds mark.
	pending := func(mark string) proto.ApprovalRecord {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			for _, l := range strings.Split(strings.TrimSpace(d.mustOx(t, "", "ox-approve", "ls", "--json")), "\n") {
				var a proto.ApprovalRecord
				if json.Unmarshal([]byte(l), &a) == nil && strings.Contains(a.What, mark) {
					return a
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no pending approval of %q within 30s", mark)
		return proto.ApprovalRecord{}
	}
	park := func(script string) chan string {
		done := make(chan string, 1)
		go func() { done <- shOut(t, d, "ops", script) }()
		return done
	}
	attempt(t, "approve.decide of its own request from the run that asked", func() (bool, bool) {
		since := auditSeq(t, c)
		// The run ends after its try, and the exec that asked with it
		// (cancelled).
		out := shOut(t, d, "ops", `ox-exec -- ls / >/dev/null 2>&1 &
for i in $(seq 300); do id=$(ox-approve ls --json | jq -r "select(.run == \"$OXIOS_RUN\").id"); [ -n "$id" ] && break; sleep 0.1; done
ox-approve yes -m mine "$id"; echo "rc=$?"`)
		return strings.Contains(out, "rc=77"), auditedSince(t, c, since, proto.OpApproveDecide, proto.EPERM, ":a", "approve")
	})
	attempt(t, "an approval outliving the run that asked (approved after its caller is gone)", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `ox-exec -- ls / >/dev/null 2>&1 &
for i in $(seq 300); do id=$(ox-approve ls --json | jq -r "select(.run == \"$OXIOS_RUN\").id"); [ -n "$id" ] && break; sleep 0.1; done
echo "id=$id"`)
		_, id, _ := strings.Cut(out, "id=")
		id = strings.TrimSpace(id)
		// The run has ended, and its processes with it: the request is
		// cancelled, so that nothing it asked can run once approved.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && strings.Contains(d.mustOx(t, "", "ox-approve", "ls", "--json"), `"id":"`+id+`"`) {
			time.Sleep(50 * time.Millisecond)
		}
		r := d.ox("", "ox-approve", "yes", "-m", "too late", id)
		if r.code == 0 {
			t.Logf("approved %s after its run ended: %+v", id, r)
		}
		return id != "" && r.code != 0 && strings.Contains(r.stderr, "cancelled"), auditedSince(t, c, since, proto.OpApproveDecide, "ok", id+" cancelled by oxiosd")
	})
	attempt(t, "an approval flood from a run (40 execs asking in the background)", func() (bool, bool) {
		since := auditSeq(t, c)
		out := shOut(t, d, "ops", `i=0; while [ $i -lt 40 ]; do ox-exec -- ls /flood$i >/dev/null 2>&1 & i=$((i+1)); done
for j in $(seq 300); do [ "$(ox-approve ls --json | grep -c flood)" -ge `+strconv.Itoa(approval.MaxPending)+` ] && break; sleep 0.1; done
sleep 1; echo "waiting=$(ox-approve ls --json | grep -c flood)"`)
		// The run has ended: its requests go with it (the next attacks
		// need room for their own).
		for deadline := time.Now().Add(10 * time.Second); strings.Contains(d.mustOx(t, "", "ox-approve", "ls", "--json"), "flood"); {
			if time.Now().After(deadline) {
				t.Fatal("the flood's requests outlived its run")
			}
			time.Sleep(50 * time.Millisecond)
		}
		ok := strings.Contains(out, "waiting="+strconv.Itoa(approval.MaxPending))
		if !ok {
			t.Logf("out: %s", out)
		}
		return ok, auditedSince(t, c, since, proto.OpApproveDecide, "ok", "denied by oxiosd")
	})
	attempt(t, "an exec whose arguments run past what an operator is shown", func() (bool, bool) {
		since := auditSeq(t, c)
		start := time.Now()
		out := shOut(t, d, "ops", `ox-exec -- ls "$(head -c `+strconv.Itoa(approval.MaxWhat)+` /dev/zero | tr '\0' a)" /etc/shadow >/dev/null 2>&1; echo "rc=$?"`)
		// Denied unseen, at once: never pending with its tail cut off.
		quick := time.Since(start) < 30*time.Second
		if !quick {
			t.Logf("the long request waited %v", time.Since(start))
		}
		return strings.Contains(out, "rc=77") && quick, auditedSince(t, c, since, proto.OpApproveDecide, "ok", "denied by oxiosd")
	})
	confined(t, "escape sequences and a bidirectional override in an exec an operator approves", func() bool {
		done := park(`ox-exec -- ls "$(printf '/tmp\r\033[2K\033[1A')" "$(printf 'x\342\200\256gnp.exe')" >/dev/null 2>&1; echo "rc=$?"`)
		a := pending("gnp.exe")
		d.mustOx(t, "", "ox-approve", "no", "-m", "red team", a.ID)
		<-done
		shown := a.What + a.Text
		ok := !strings.ContainsAny(shown, "\r\x1b\u202e") && strings.Contains(a.What, `\x1b[2K`) && strings.Contains(a.What, `\u202e`)
		if !ok {
			t.Logf("shown: %q", shown)
		}
		return ok
	})
}

// redTeamTalkMount: a run of ops goes after other inboxes and the
// approvals through the mount (apart from redTeamTalk, whose attacks take
// longer than the mount's watchdog allows a mounted daemon on a busy
// machine).
func redTeamTalkMount(t *testing.T) {
	m := startMounted(t, daemonOpts{})
	d := m.daemon
	c := d.client(t)
	d.mustOx(t, "", "ox-state", "save", "-a", "web", "secret", "s3cret")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{
		"msg": "send = [\"friend\"]\naccept = [\"*\"]",
	}))
	attempt(t, "a message to itself through its inbox on the mount, not on msg.send", func() (bool, bool) {
		since := auditSeq(t, c)
		// A shell's > reports a create that fails, not a close: the
		// refusal must come at the create.
		out := shOut(t, d, "ops", `echo forged > "$OXIOS_MNT/agent/ops/inbox/m.md"; echo "rc=$?"`)
		if !strings.Contains(out, "Permission denied") {
			t.Logf("out: %s", out)
		}
		return !strings.Contains(out, "rc=0") && strings.Contains(out, "Permission denied"), auditedSince(t, c, since, proto.OpMsgSend, proto.EPERM, "ops:msg from ops")
	})
	impossible(t, "the mount's /approvals and web's inbox from a run of ops", func() bool {
		out := shOut(t, d, "ops", `ls -d "$OXIOS_MNT/agent/ops/inbox" || exit 9
ls "$OXIOS_MNT/approvals" 2>&1; echo x > "$OXIOS_MNT/agent/web/inbox/m.md" 2>&1; ls "$OXIOS_MNT/agent" | grep -qx web && echo SEEN-WEB`)
		ok := strings.Contains(out, "/agent/ops/inbox") && strings.Count(out, "No such file or directory")+strings.Count(out, "Directory nonexistent") >= 2 && !strings.Contains(out, "SEEN-WEB")
		if !ok {
			t.Logf("out: %s", out)
		}
		return ok
	})

}
