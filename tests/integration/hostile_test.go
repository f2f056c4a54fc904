package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// Hostile clients (issue 18): what one client holds of the daemon is
// bounded, and others keep being served.

// rssKiB reads a process's resident set.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// dialRaw connects without reading the hello.
func dialRaw(t *testing.T, d *daemon) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// lines reads what the daemon sends on c until it closes (or 10 s pass).
func lines(c net.Conn) []string {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out []string
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// TestUnterminatedLines: connections sending request lines that never end
// hold no more than limits.max_buffered together, are cut off after
// limits.line_timeout, and a normal client is served meanwhile.
func TestUnterminatedLines(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_value = \"8MiB\"\nmax_buffered = \"8MiB\"\nline_timeout = \"3s\"\n"})
	cl := d.client(t)
	ctx := context.Background()
	base := rssKiB(t, d.cmd.Process.Pid)
	chunk := []byte(strings.Repeat("x", 64<<10))
	var attackers []net.Conn
	for i := range 12 {
		c := dialRaw(t, d)
		attackers = append(attackers, c)
		go func() {
			c.Write([]byte(fmt.Sprintf(`{"id":%d,"op":"state.save","args":{"agent":"ops","key":"k","value":"`, i+1)))
			for range 8 << 20 / len(chunk) { // under max_line, never ended
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(time.Second)
	// A normal client is served while the budget is taken.
	for i := range 50 {
		if _, err := cl.StateSave(ctx, "ops", "n"+strconv.Itoa(i), []byte("small")); err != nil {
			t.Fatalf("save under attack: %v", err)
		}
	}
	if _, _, err := cl.StateLoad(ctx, "ops", "n1"); err != nil {
		t.Fatalf("load under attack: %v", err)
	}
	// 12 lines of 8 MiB would be 96 MiB and more; the budget holds 8
	// (the bound leaves room for the race detector's own overhead).
	if rss := rssKiB(t, d.cmd.Process.Pid); rss-base > 48<<10 {
		t.Errorf("RSS grew by %d KiB under 12 unterminated 8 MiB lines (max_buffered 8MiB)", rss-base)
	} else {
		t.Logf("RSS %d KiB before, %d KiB under attack", base, rss)
	}
	// Each attacker is told why it is cut off: out of budget (ENOBUFS)
	// or out of time (ETIMEDOUT), and closed.
	for _, c := range attackers {
		got := strings.Join(lines(c), "\n")
		if !strings.Contains(got, "ETIMEDOUT") && !strings.Contains(got, "ENOBUFS") {
			t.Errorf("attacker got %.300q, want ETIMEDOUT or ENOBUFS", got)
		}
	}
	// With them gone, a large value fits again.
	big := []byte(strings.Repeat("b", 3<<20))
	if _, err := cl.StateSave(ctx, "ops", "big", big); err != nil {
		t.Fatalf("large save after the attack: %v", err)
	}
}

// TestConnectionLimits: a uid at limits.max_conns_per_uid gets room by
// closing its longest idle connection; with none idle, a new one is
// refused (exit 69) and the others keep working. A connection that sends
// nothing is closed after hello_timeout, one idle after idle_timeout,
// unless a stream of its own is running.
func TestConnectionLimits(t *testing.T) {
	t.Parallel()
	// Timeouts long enough that only the bound closes connections here
	// (with hello_timeout = 2s a loaded machine reaped the busy ones before
	// the check that they are not taken); d2 below checks the timeouts.
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_conns_per_uid = 20\nhello_timeout = \"60s\"\nidle_timeout = \"60s\"\n"})
	var idle []*rawConn
	for range 20 {
		idle = append(idle, d.raw(t))
	}
	// A 21st makes room: the longest idle is closed. (Which one that is
	// goes by when the daemon took each up: on a loaded machine not
	// always the order they were dialled in, so the test finds it.)
	if r := d.ox("", "ox-state", "load", "-a", "ops", "nothing"); r.code != 1 || !strings.Contains(r.stderr, "ENOENT") {
		t.Fatalf("ox-state load at the limit: %+v", r)
	}
	closed := -1
	for deadline := time.Now().Add(10 * time.Second); closed < 0 && time.Now().Before(deadline); {
		for i, rc := range idle {
			rc.c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
			if _, err := io.ReadAll(rc.r); err == nil { // its end: closed
				closed = i
				break
			}
		}
	}
	if closed < 0 {
		t.Fatal("no idle connection was closed to make room")
	}
	idle = append(idle[:closed], idle[closed+1:]...)
	// Busy connections (a line half sent) are not taken.
	for _, rc := range idle {
		rc.c.SetReadDeadline(time.Time{})
		rc.c.Write([]byte(`{"id":1,"op":"state.load",`))
	}
	extra := d.raw(t) // room: the closed one is gone
	extra.c.Write([]byte(`{"id":1,`))
	r := d.ox("", "ox-state", "load", "-a", "ops", "nothing")
	if r.code != 69 || !strings.Contains(r.stderr, "EUSERS") || !strings.Contains(r.stderr, "max_conns_per_uid") {
		t.Fatalf("ox-state load with 20 busy connections: %+v", r)
	}
	// The busy ones finish their requests.
	for _, rc := range idle[:3] {
		rc.send(`"args":{"agent":"ops","key":"k"}}`)
		if rep := rc.reply(); rep.OK || rep.Error == nil || rep.Error.Code != "ENOENT" {
			t.Fatalf("busy connection after the refusal: %+v", rep)
		}
	}

	// Sending nothing after connecting: closed with ETIMEDOUT.
	d2 := startDaemon(t, daemonOpts{config: "[limits]\nhello_timeout = \"1s\"\nidle_timeout = \"2s\"\n"})
	silent := dialRaw(t, d2)
	got := lines(silent)
	if len(got) != 2 || !strings.Contains(got[0], `"hello"`) || !strings.Contains(got[1], "ETIMEDOUT") || !strings.Contains(got[1], "hello_timeout") {
		t.Fatalf("silent connection got %q", got)
	}
	// Idle after a request: closed after idle_timeout.
	rc := d2.raw(t)
	rc.send(`{"id":1,"op":"hello","args":{"proto":1}}`)
	rc.reply()
	start := time.Now()
	got = lines(rc.c)
	if len(got) != 1 || !strings.Contains(got[0], "idle_timeout") || time.Since(start) < 1500*time.Millisecond {
		t.Fatalf("idle connection got %q after %v", got, time.Since(start))
	}
	// Two requests 200 ms apart, then silence. The server moves its
	// deadline only when it is early by an eighth of the limit (250 ms
	// here): after the second request it still has the first's, which it
	// must not close the connection at, 1.8 s after the second. (The
	// 100 ms of slack below is for this client's own wake-up.)
	rc = d2.raw(t)
	for i := range 2 {
		rc.send(fmt.Sprintf(`{"id":%d,"op":"hello","args":{"proto":1}}`, i+1))
		if rep := rc.reply(); !rep.OK {
			t.Fatalf("request %d: %+v", i+1, rep)
		}
		if i == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	start = time.Now()
	got = lines(rc.c)
	if took := time.Since(start); len(got) != 1 || !strings.Contains(got[0], "idle_timeout") || took < 1900*time.Millisecond || took > 4*time.Second {
		t.Fatalf("connection idle after two requests got %q after %v (idle_timeout 2s)", got, took)
	}
	// A stream in flight keeps its connection.
	sub := d2.raw(t)
	sub.send(`{"id":7,"op":"events.subscribe","args":{}}`)
	time.Sleep(3 * time.Second)
	cl := d2.client(t)
	if _, err := cl.StateSave(context.Background(), "ops", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	sub.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := sub.r.ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":7`) {
		t.Fatalf("subscriber after idle_timeout: %q %v", line, err)
	}
}

// smallFS mounts a tmpfs of size on dir/data for a daemon's data, or
// skips the test when it cannot (mounting takes root).
func smallFS(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs for a full disk takes root")
	}
	dir := shortTempDir(t)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", data).Run() })
	return dir
}

// TestDiskFull: on a 5 MiB file system the daemon starts; when the disk
// fills, writes fail with ENOSPC and nothing of them is applied, reads go
// on, the daemon stays up, deleting frees space, writes resume by
// themselves once space is freed, and a restart on the nearly full disk
// recovers every acknowledged value.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	dir := smallFS(t, "5m")
	d := startDaemon(t, daemonOpts{dir: dir})
	ctx := context.Background()
	cl := d.client(t)
	val := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i%26)), 100<<10)) }
	saved := map[string][]byte{}
	var full error
	for i := range 100 {
		k := fmt.Sprintf("k%d", i)
		if _, err := cl.StateSave(ctx, "ops", k, val(i)); err != nil {
			full = err
			break
		}
		saved[k] = val(i)
	}
	if full == nil || !strings.Contains(full.Error(), "ENOSPC") || !strings.Contains(full.Error(), "disk_reserve") {
		t.Fatalf("10 MiB of saves on a 5 MiB disk: %v, want ENOSPC naming limits.disk_reserve", full)
	}
	if len(saved) < 5 {
		t.Fatalf("only %d saves of 100 KiB fit on a 5 MiB disk", len(saved))
	}
	t.Logf("%d saves of 100 KiB before ENOSPC: %v", len(saved), full)
	// The command says it too, and exits 1.
	r := d.ox(string(val(3)), "ox-state", "save", "-a", "ops", "more")
	if r.code != 1 || !strings.Contains(r.stderr, "ENOSPC") {
		t.Fatalf("ox-state save on a full disk: %+v", r)
	}
	// Reads go on; the refused key is not there.
	for k, v := range saved {
		got, _, err := cl.StateLoad(ctx, "ops", k)
		if err != nil || string(got) != string(v) {
			t.Fatalf("load %s on a full disk: %d bytes, %v", k, len(got), err)
		}
	}
	if _, _, err := cl.StateLoad(ctx, "ops", "more"); err == nil {
		t.Fatal("a refused save was applied")
	}
	// Deleting frees space, and saves resume by themselves.
	for _, k := range []string{"k0", "k1", "k2", "k3"} {
		if _, err := cl.StateDelete(ctx, "ops", k); err != nil {
			t.Fatalf("delete on a full disk: %v", err)
		}
		delete(saved, k)
	}
	var err error
	waitFor(t, "saves to resume once space is freed", func() bool {
		_, err = cl.StateSave(ctx, "ops", "after", val(7))
		return err == nil
	})
	saved["after"] = val(7)
	// Fill it again and crash: the restart on the full disk recovers all.
	for i := 100; ; i++ {
		k := fmt.Sprintf("k%d", i)
		if _, err := cl.StateSave(ctx, "ops", k, val(i)); err != nil {
			break
		}
		saved[k] = val(i)
	}
	select {
	case <-d.exited:
		t.Fatalf("oxiosd exited on a full disk: %v", d.err)
	default:
	}
	d.kill9()
	// Something else takes the rest of the disk: the start says what it
	// needs; with a little space freed it starts.
	filler := filepath.Join(dir, "data", "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for _, err = f.Write(make([]byte, 64<<10)); err == nil; _, err = f.Write(make([]byte, 4<<10)) {
	}
	f.Close()
	start := exec.Command(bin("oxiosd"), "--data", filepath.Join(dir, "data"), "--socket", filepath.Join(dir, "oxiosd.sock"), "--no-mount", "--config", "")
	out, err := start.CombinedOutput()
	t.Logf("start on a full disk: %v: %s", err, out)
	if err == nil || !strings.Contains(string(out), "ENOSPC") || !strings.Contains(string(out), "free some space") {
		t.Fatalf("start on a full disk: %v: %s", err, out)
	}
	fi, _ := os.Stat(filler)
	if err := os.Truncate(filler, max(fi.Size()-1<<20, 0)); err != nil {
		t.Fatal(err)
	}
	d2 := startDaemon(t, daemonOpts{dir: dir})
	cl2 := d2.client(t)
	for k, v := range saved {
		got, _, err := cl2.StateLoad(ctx, "ops", k)
		if err != nil || string(got) != string(v) {
			t.Fatalf("after the restart, %s: %d bytes, %v", k, len(got), err)
		}
	}
	if r := d2.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestDataDirVanishes: once the data directory is removed or replaced
// under the running daemon, saves are refused with a reason instead of
// acknowledged and lost; put back, it takes them again.
func TestDataDirVanishes(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	ctx := context.Background()
	cl := d.client(t)
	if _, err := cl.StateSave(ctx, "ops", "before", []byte("v")); err != nil {
		t.Fatal(err)
	}
	moved := d.data + ".moved"
	if err := os.Rename(d.data, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.data, "journal"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := cl.StateSave(ctx, "ops", "lost", []byte("v"))
	if err == nil || !strings.Contains(err.Error(), "removed or replaced") || !strings.Contains(err.Error(), d.data) {
		t.Fatalf("save with the data directory replaced: %v", err)
	}
	r := d.ox("v", "ox-state", "save", "-a", "ops", "lost")
	if r.code != 1 || !strings.Contains(r.stderr, "removed or replaced") {
		t.Fatalf("ox-state save with the data directory replaced: %+v", r)
	}
	// Put back: saves are taken again, and the refused ones never landed.
	os.RemoveAll(d.data)
	if err := os.Rename(moved, d.data); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.StateSave(ctx, "ops", "after", []byte("v")); err != nil {
		t.Fatalf("save with the data directory back: %v", err)
	}
	if _, _, err := cl.StateLoad(ctx, "ops", "lost"); err == nil {
		t.Fatal("a refused save was applied")
	}
	// Removed outright: refused too.
	os.RemoveAll(d.data)
	if _, err := cl.StateSave(ctx, "ops", "gone", []byte("v")); err == nil || !strings.Contains(err.Error(), "removed or replaced") {
		t.Fatalf("save with the data directory removed: %v", err)
	}
	select {
	case <-d.exited:
		t.Fatalf("oxiosd exited: %v", d.err)
	default:
	}
}

// TestRefusalFlood: a flood of refusals is all on the audit log, but as a
// few entries: the first of each kind, then summaries counting the rest
// (count, first, last). Varying the target does not get around it.
func TestRefusalFlood(t *testing.T) {
	d := startDaemon(t, daemonOpts{})
	rc := d.raw(t)
	const n = 3000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":%d,"op":"exec","args":{"agent":"ops","bogus":1}}`+"\n", i+1)
	}
	for i := range n {
		fmt.Fprintf(&b, `{"id":%d,"op":"exec","args":{"agent":"a%d","bogus":1}}`+"\n", n+i+1, i)
	}
	go rc.c.Write([]byte(b.String()))
	for range 2 * n {
		if r := rc.reply(); r.OK || r.Error == nil || r.Error.Code != "EINVAL" {
			t.Fatalf("bad exec: %+v", r)
		}
	}
	type entry struct {
		Target string `json:"target"`
		Result string `json:"result"`
		Count  int    `json:"count"`
		First  string `json:"first"`
		Last   string `json:"last"`
	}
	var entries []entry
	total := 0
	waitFor(t, "every refusal counted on the log", func() bool {
		r := d.ox("", "ox-audit", "log", "--op", "exec")
		entries, total = nil, 0
		for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var e entry
			if json.Unmarshal([]byte(l), &e) == nil && e.Result == "EINVAL" {
				entries = append(entries, e)
				total += max(e.Count, 1)
			}
		}
		return total == 2*n
	})
	// Coalesced per second of flood: a loaded machine floods more slowly.
	if len(entries) > 600 {
		t.Fatalf("%d refusals took %d entries", 2*n, len(entries))
	}
	summaries := 0
	for _, e := range entries {
		if e.Count > 0 {
			summaries++
			if e.First == "" || e.Last == "" || e.First > e.Last {
				t.Fatalf("summary without its times: %+v", e)
			}
		}
	}
	if summaries == 0 {
		t.Fatal("no summary entry")
	}
	t.Logf("%d refusals: %d entries, %d of them summaries", 2*n, len(entries), summaries)
	if r := d.ox("", "ox-audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// TestConnectionReset: a client whose connection is reset with its
// request in flight exits 69 and says the request may have landed.
func TestConnectionReset(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(`{"hello":{"proto":1,"server":"oxiosd/test","max_line":1048576,"max_value":65536,"uid":0,"admin":true}}` + "\n"))
			// Close with the request unread: the client's read gets
			// ECONNRESET, as from a daemon killed mid-request.
			time.Sleep(300 * time.Millisecond)
			c.Close()
		}
	}()
	r := run(t, []string{"OXIOS_SOCKET=" + sock}, "v", "ox-state", "save", "-a", "ops", "k")
	if r.code != 69 || !strings.Contains(r.stderr, "outcome unknown") || !strings.Contains(r.stderr, "may or may not have been applied") {
		t.Fatalf("ox-state save on a reset connection: %+v", r)
	}
}

// TestClientGoneMidCall: a client that shuts its writing side after its
// request still reads the answer of a call that takes a while; one that
// closes the connection (or dies) while its call waits for an operator
// cancels the request, which can then no longer be approved.
func TestClientGoneMidCall(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "x", "1")
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", sectionPolicy(t, map[string]string{"ask": "exec = [\"wc\"]\ntimeout = \"60s\""}))

	rc := d.raw(t)
	rc.send(`{"id":1,"op":"exec","args":{"agent":"ops","argv":["sleep","0.5"]}}`)
	if err := rc.c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if r := rc.reply(); !r.OK || r.ID != 1 {
		t.Fatalf("half-closed client's reply: %+v", r)
	}

	rc = d.raw(t)
	rc.send(`{"id":1,"op":"exec","args":{"agent":"ops","argv":["wc","-c","/dev/null"]}}`)
	var id string
	deadline := time.Now().Add(30 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		var a proto.ApprovalRecord
		if out := strings.TrimSpace(d.mustOx(t, "", "ox-approve", "ls", "--json")); out != "" && json.Unmarshal([]byte(out), &a) == nil {
			id = a.ID
		}
		time.Sleep(20 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("no pending approval")
	}
	rc.c.Close()
	var all string
	for time.Now().Before(deadline) {
		all = d.mustOx(t, "", "ox-approve", "ls", "--all", "--json")
		if strings.Contains(all, `"state":"cancelled"`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(all, `"id":"`+id+`"`) || !strings.Contains(all, `"state":"cancelled"`) {
		t.Fatalf("the request of a client that left is not cancelled:\n%s", all)
	}
	if r := d.ox("", "ox-approve", "yes", id); r.code == 0 || !strings.Contains(r.stderr, "cancelled") {
		t.Fatalf("approved after its client left: %+v", r)
	}
}

// TestUnterminatedLoadLines is issue 45's repro of the bound on long
// lines: 16 connections each send 20 MB of a state.load line of an agent
// that exists, without its newline, on a daemon of the default limits
// (max_buffered 64 MiB): what they make the daemon hold stays within the
// budget (plus what a daemon holds anyway), whatever path the line takes.
//
// It measures the daemon's memory, which the race detector's shadow
// memory makes meaningless, and under it takes over a minute: make test
// runs it once more without -race, and skips it here.
func TestUnterminatedLoadLines(t *testing.T) {
	if raceEnabled {
		t.Skip("measures memory: make test runs it without -race")
	}
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nline_timeout = \"5s\"\n"})
	cl := d.client(t)
	ctx := context.Background()
	if _, err := cl.StateSave(ctx, "ops", "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	base := rssKiB(t, d.cmd.Process.Pid)
	chunk := []byte(strings.Repeat("x", 64<<10))
	var attackers []net.Conn
	var wg sync.WaitGroup
	for i := range 16 {
		c := dialRaw(t, d)
		attackers = append(attackers, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := fmt.Appendf(nil, `{"id":%d,"op":"state.load","args":{"agent":"ops","key":"`, i+1)
			if i%4 < 2 {
				// In one write, as a client with the line in memory does.
				c.Write(append(line, bytes.Repeat([]byte("x"), 20<<20)...))
			} else {
				c.Write(line)
				for range 20 << 20 / len(chunk) { // under max_line, never ended
					if _, err := c.Write(chunk); err != nil {
						return
					}
				}
			}
			if i%2 == 1 {
				// Half of them end their side there: the line, without
				// its newline, is the last of its connection.
				c.(*net.UnixConn).CloseWrite()
			}
		}()
	}
	wg.Wait() // all sent, or refused
	peak := rssKiB(t, d.cmd.Process.Pid)
	if _, _, err := cl.StateLoad(ctx, "ops", "k"); err != nil {
		t.Fatalf("load under attack: %v", err)
	}
	for _, c := range attackers {
		got := strings.Join(lines(c), "\n")
		// Cut off (out of time or out of budget), or, for a line its
		// client ended, told it is not a request.
		if !strings.Contains(got, "ETIMEDOUT") && !strings.Contains(got, "ENOBUFS") && !strings.Contains(got, "EBADMSG") {
			t.Errorf("attacker got %.300q, want ETIMEDOUT, ENOBUFS or EBADMSG", got)
		}
		if len(got) > 64<<10 {
			t.Errorf("attacker got a reply of %d bytes: the daemon echoed its line", len(got))
		}
	}
	// 16 lines of 20 MB would be 320 MB; the budget holds 64 MiB, and
	// the collector, kept on while lines grow, the buffers they outgrew
	// (the bound leaves room for its slack, up to twice what is live;
	// with the collector off it grew by 330 MiB). Under the race detector
	// the resident set is mostly its shadow of the heap, 250 to 560 MiB
	// more here with the fix, depending on the load: there the bound is
	// not the heap's and is not checked.
	if peak-base > 224<<10 && !raceEnabled {
		t.Errorf("RSS %d KiB before, %d with 16 unterminated 20 MB load lines (max_buffered 64MiB)", base, peak)
	}
	// Once they are gone and the daemon is quiet, it gives the memory
	// back (the quiescer's collection), rather than keep it. (The race
	// detector's runtime keeps its own.)
	after := rssKiB(t, d.cmd.Process.Pid)
	for deadline := time.Now().Add(60 * time.Second); after-base > 64<<10 && time.Now().Before(deadline); after = rssKiB(t, d.cmd.Process.Pid) {
		time.Sleep(500 * time.Millisecond)
	}
	if after-base > 64<<10 && !raceEnabled {
		t.Errorf("RSS %d KiB before, %d with the lines, still %d once they are gone", base, peak, after)
	}
	t.Logf("RSS %d KiB before, %d under attack, %d after", base, peak, after)
}
