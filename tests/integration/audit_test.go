package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/client"
)

type auditRec struct {
	Type  string `json:"type"`
	Seq   uint64 `json:"seq"`
	Time  string `json:"time"`
	Actor struct {
		UID   uint32 `json:"uid"`
		PID   int32  `json:"pid"`
		Agent string `json:"agent"`
		Run   string `json:"run"`
	} `json:"actor"`
	Op     string `json:"op"`
	Target string `json:"target"`
	Args   string `json:"args"`
	Result string `json:"result"`
	Prev   string `json:"prev"`
	Hash   string `json:"hash"`
}

func parseAudit(t *testing.T, out string) []auditRec {
	t.Helper()
	var recs []auditRec
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r auditRec
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("not a JSON record: %q: %v", line, err)
		}
		if r.Type != "audit" {
			t.Fatalf("record of type %q, want audit: %s", r.Type, line)
		}
		recs = append(recs, r)
	}
	return recs
}

func seqs(recs []auditRec) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func (d *daemon) mustOx(t *testing.T, stdin, name string, args ...string) string {
	t.Helper()
	r := d.ox(stdin, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %v: exit %d\nstdout: %s\nstderr: %s", name, args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func TestAuditCLI(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/a", "one")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/b", "two")
	d.mustOx(t, "", "ox-state", "save", "-a", "dev", "x", "three")
	d.mustOx(t, "", "ox-state", "rm", "-a", "ops", "notes/a")
	if r := d.ox("", "ox-state", "rm", "-a", "ops", "nope"); r.code != 1 {
		t.Fatalf("rm of a missing key: exit %d", r.code)
	}

	all := parseAudit(t, d.mustOx(t, "", "ox-audit", "log"))
	if len(all) != 5 {
		t.Fatalf("log: %d entries, want 5: %+v", len(all), all)
	}
	prev := strings.Repeat("0", 64)
	for i, e := range all {
		if e.Seq != uint64(i+1) || e.Prev != prev || len(e.Hash) != 64 || len(e.Args) != 64 {
			t.Fatalf("entry %d does not chain: %+v", i, e)
		}
		prev = e.Hash
		if e.Actor.UID != uint32(os.Getuid()) || e.Actor.PID == 0 {
			t.Fatalf("entry %d actor %+v", e.Seq, e.Actor)
		}
	}
	if all[3].Op != "state.delete" || all[3].Target != "ops:notes/a" || all[3].Result != "ok" {
		t.Fatalf("delete entry: %+v", all[3])
	}
	if all[4].Result != "ENOENT" {
		t.Fatalf("a failed delete is audited with its error, got %+v", all[4])
	}

	for _, c := range []struct {
		args []string
		want []uint64
	}{
		{[]string{"-a", "dev"}, []uint64{3}},
		{[]string{"-a", "ops", "--op", "state.delete"}, []uint64{4, 5}},
		{[]string{"--op", "state.*", "-n", "2"}, []uint64{4, 5}},
		{[]string{"--since", "3"}, []uint64{3, 4, 5}},
		{[]string{"--since", all[1].Time}, []uint64{2, 3, 4, 5}},
		{[]string{"--since", "1h"}, []uint64{1, 2, 3, 4, 5}},
		{[]string{"--since", "2999-01-01"}, []uint64{}},
		{[]string{"-n", "1"}, []uint64{5}},
	} {
		got := seqs(parseAudit(t, d.mustOx(t, "", "ox-audit", append([]string{"log"}, c.args...)...)))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("log %v: seqs %v, want %v", c.args, got, c.want)
		}
	}
	if got := seqs(parseAudit(t, d.mustOx(t, "", "ox-audit", "tail", "-n", "2"))); fmt.Sprint(got) != "[4 5]" {
		t.Errorf("tail -n 2: %v", got)
	}

	// show prints the entry exactly as log does.
	show := d.mustOx(t, "", "ox-audit", "show", "2")
	logged := strings.Split(d.mustOx(t, "", "ox-audit", "log"), "\n")[1]
	if strings.TrimSpace(show) != logged {
		t.Fatalf("show 2 = %q\nlog line 2 = %q", show, logged)
	}
	if r := d.ox("", "ox-audit", "show", "99"); r.code != 1 || !strings.Contains(r.stderr, "ENOENT") {
		t.Fatalf("show of a missing entry: %+v", r)
	}
	for _, args := range [][]string{{"show"}, {"show", "x"}, {"show", "0"}, {"log", "--since", "yesterday-ish"}, {"log", "-a", "Bad Name"}, {"log", "extra"}, {"verify", "--data", "a", "--file", "b"}} {
		if r := d.ox("", "ox-audit", args...); r.code != 2 {
			t.Errorf("ox-audit %v: exit %d, want 2 (usage); stderr %q", args, r.code, r.stderr)
		}
	}
	if r := d.ox("", "ox-audit", "log", "--op", "[bad"); r.code != 2 || !strings.Contains(r.stderr, "not a glob") {
		t.Errorf("bad op glob: %+v", r)
	}

	// The head names the last entry.
	var head struct {
		Type string `json:"type"`
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	json.Unmarshal([]byte(d.mustOx(t, "", "ox-audit", "head")), &head)
	if head.Type != "audit_head" || head.Seq != 5 || head.Hash != all[4].Hash {
		t.Fatalf("head %+v, want seq 5 hash %s", head, all[4].Hash)
	}

	// verify: online, offline on the live data dir, and on an export.
	type verifyRec struct {
		Type     string `json:"type"`
		OK       bool   `json:"ok"`
		Entries  uint64 `json:"entries"`
		HeadSeq  uint64 `json:"head_seq"`
		FirstBad uint64 `json:"first_bad"`
	}
	check := func(out string, n uint64) {
		t.Helper()
		var v verifyRec
		if err := json.Unmarshal([]byte(out), &v); err != nil || v.Type != "audit_verify" || !v.OK || v.Entries != n || v.HeadSeq != n {
			t.Fatalf("verify: %q (%v), want ok with %d entries", out, err, n)
		}
	}
	check(d.mustOx(t, "", "ox-audit", "verify"), 5)
	check(d.mustOx(t, "", "ox-audit", "verify", "--data", d.data), 5)
	export := d.mustOx(t, "", "ox-audit", "export")
	lines := strings.Split(strings.TrimSpace(export), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], `{"type":"audit_head","seq":5,`) {
		t.Fatalf("export does not end with its head: %q", lines[len(lines)-1])
	}
	ef := filepath.Join(d.dir, "export.jsonl")
	os.WriteFile(ef, []byte(export), 0o600)
	check(d.mustOx(t, "", "ox-audit", "verify", "--file", ef), 5)
	check(d.mustOx(t, export, "ox-audit", "verify", "--file", "-"), 5)

	// A byte changed in an export: exit 1 naming the entry.
	bad := strings.Replace(export, `"target":"dev:x"`, `"target":"dev:y"`, 1)
	r := d.ox(bad, "ox-audit", "verify", "--file", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "at entry 3") {
		t.Fatalf("tampered export: exit %d stderr %q, want 1 naming entry 3", r.code, r.stderr)
	}
}

// tamper makes a copy of a stopped daemon's audit dir and damages it.
func copyAuditDir(t *testing.T, data string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	if out, err := exec.Command("cp", "-a", data, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

func segLines(t *testing.T, data string) (string, []string) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(data, "audit", "seg-*.jsonl"))
	if len(segs) != 1 {
		t.Fatalf("want one segment, have %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	return segs[0], strings.SplitAfter(string(b), "\n")
}

func writeSeg(t *testing.T, path string, lines []string) {
	t.Helper()
	os.Chmod(path, 0o600)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAuditTamperingDetected damages copies of a real daemon's log in
// every way the chain must catch, and checks ox-audit verify --data exits
// 1 naming the first entry that does not match, while the original
// verifies.
func TestAuditTamperingDetected(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for i := 0; i < 10; i++ {
		d.mustOx(t, "", "ox-state", "save", "-a", "ops", fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	d.stop()
	if r := d.ox("", "ox-audit", "verify", "--data", d.data); r.code != 0 {
		t.Fatalf("untouched log: exit %d %s", r.code, r.stderr)
	}
	cases := []struct {
		name  string
		bad   string // "entry N" the report must name
		apply func(lines []string) []string
	}{
		{"changed byte", "at entry 4", func(l []string) []string {
			l[3] = strings.Replace(l[3], `"ops:k3"`, `"ops:k8"`, 1)
			return l
		}},
		{"changed result", "at entry 6", func(l []string) []string {
			l[5] = strings.Replace(l[5], `"result":"ok"`, `"result":"EPERM"`, 1)
			return l
		}},
		{"deleted entry", "at entry 5", func(l []string) []string {
			return append(l[:4:4], l[5:]...)
		}},
		{"reordered", "at entry 3", func(l []string) []string {
			l[2], l[3] = l[3], l[2]
			return l
		}},
		{"truncated tail", "", func(l []string) []string {
			return l[:7]
		}},
		{"inserted forged entry", "at entry 8", func(l []string) []string {
			forged := strings.Replace(l[6], `"seq":7,`, `"seq":8,`, 1)
			return append(l[:7:7], append([]string{forged}, l[7:]...)...)
		}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "-"), func(t *testing.T) {
			data := copyAuditDir(t, d.data)
			seg, lines := segLines(t, data)
			writeSeg(t, seg, c.apply(lines))
			r := d.ox("", "ox-audit", "verify", "--data", data)
			if r.code != 1 || !strings.Contains(r.stderr, "does NOT verify") || !strings.Contains(r.stderr, c.bad) {
				t.Fatalf("exit %d, stderr %q; want 1 naming %q", r.code, r.stderr, c.bad)
			}
			var rec struct {
				OK bool `json:"ok"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || rec.OK {
				t.Fatalf("stdout %q: want an audit_verify record with ok false", r.stdout)
			}
		})
	}
	// A damaged log also stops the daemon from starting on it, rather than
	// carrying on from a chain it cannot trust.
	data := copyAuditDir(t, d.data)
	seg, lines := segLines(t, data)
	writeSeg(t, seg, lines[:7])
	cmd := exec.Command(bin("oxiosd"), "--config", "", "--data", data, "--socket", filepath.Join(filepath.Dir(data), "s"), "--no-mount")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not verify") {
		t.Fatalf("oxiosd on a truncated log: %v %s", err, out)
	}
}

// TestAuditTailFollow streams new entries as they are committed, in order,
// and ends cleanly on SIGINT.
func TestAuditTailFollow(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "before", "x")
	cmd := exec.Command(bin("ox-audit"), "tail", "-f", "-n", "1", "--op", "state.save")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	stdout, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() auditRec {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("tail -f ended early: %s", errb.String())
			}
			return parseAudit(t, l)[0]
		case <-time.After(10 * time.Second):
			t.Fatal("tail -f printed nothing within 10s")
		}
		panic("unreachable")
	}
	if e := next(); e.Target != "ops:before" {
		t.Fatalf("first line: %+v", e)
	}
	c := d.client(t)
	var want []string
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("k%d", i)
		c.StateDelete(context.Background(), "ops", "before-missing") // filtered out: not a save
		if _, err := c.StateSave(context.Background(), "ops", key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		want = append(want, "ops:"+key)
	}
	last := uint64(0)
	for _, w := range want {
		e := next()
		if e.Target != w || e.Seq <= last {
			t.Fatalf("followed entry %+v, want target %s after seq %d", e, w, last)
		}
		last = e.Seq
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("tail -f after SIGINT: %v %s", err, errb.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tail -f did not exit on SIGINT")
	}
	// The daemon dropped the follower: a clean stop does not wait for it.
	d.stop()
}

// TestAuditKill9 kills the daemon during a storm of saves and checks that
// the log verifies after the restart and holds an entry for every
// acknowledged save.
func TestAuditKill9(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	acked := map[string]int{} // target -> acknowledged saves
	var mu sync.Mutex
	for round := 0; round < 3; round++ {
		d := startDaemon(t, daemonOpts{dir: dir})
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				c, err := client.Dial(context.Background(), d.sock)
				if err != nil {
					return
				}
				defer c.Close()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("r%d/w%d/%d", round, w, i)
					if _, err := c.StateSave(context.Background(), "storm", key, []byte("v")); err != nil {
						return
					}
					mu.Lock()
					acked["storm:"+key]++
					mu.Unlock()
				}
			}(w)
		}
		time.Sleep(300 * time.Millisecond)
		d.kill9()
		close(stop)
		wg.Wait()
	}
	d := startDaemon(t, daemonOpts{dir: dir})
	d.mustOx(t, "", "ox-audit", "verify")
	out := d.mustOx(t, "", "ox-audit", "log", "-a", "storm", "--op", "state.save")
	found := map[string]int{}
	for _, e := range parseAudit(t, out) {
		if e.Result == "ok" {
			found[e.Target]++
		}
	}
	if len(acked) == 0 {
		t.Fatal("no save acknowledged")
	}
	for target := range acked {
		if found[target] == 0 {
			t.Fatalf("acknowledged save of %s has no audit entry", target)
		}
	}
	d.stop()
	if r := d.ox("", "ox-audit", "verify", "--data", d.data); r.code != 0 {
		t.Fatalf("offline verify after the crashes: %+v", r)
	}
}
