package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type stateRec struct {
	Type     string  `json:"type"`
	Agent    string  `json:"agent"`
	Key      string  `json:"key"`
	Size     int64   `json:"size"`
	Modified string  `json:"modified"`
	Value    *string `json:"value"`
	Encoding string  `json:"encoding"`
	Deleted  bool    `json:"deleted"`
}

func parseRecs(t *testing.T, out string) []stateRec {
	t.Helper()
	var recs []stateRec
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var r stateRec
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("output line %q is not a JSON record: %v", l, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func TestStateCLI(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})

	r := d.ox("", "ox-state", "save", "-a", "ops", "notes/today.md", "hello world")
	if r.code != 0 {
		t.Fatalf("save: exit %d: %s", r.code, r.stderr)
	}
	recs := parseRecs(t, r.stdout)
	if len(recs) != 1 || recs[0].Type != "state" || recs[0].Key != "notes/today.md" || recs[0].Size != 11 || recs[0].Agent != "ops" {
		t.Fatalf("save printed %+v", recs)
	}

	// A value from stdin, binary and with a NUL, comes back byte for byte.
	bin := []byte("bin\x00\xff\xfe\x01data\n")
	r = d.ox(string(bin), "ox-state", "save", "-a", "ops", "blob")
	if r.code != 0 {
		t.Fatalf("save from stdin: exit %d: %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-state", "load", "-a", "ops", "blob")
	if r.code != 0 || r.stdout != string(bin) {
		t.Fatalf("load blob: exit %d, %q, want %q", r.code, r.stdout, bin)
	}
	r = d.ox("", "ox-state", "load", "--json", "-a", "ops", "blob")
	recs = parseRecs(t, r.stdout)
	if len(recs) != 1 || recs[0].Encoding != "base64" || recs[0].Value == nil {
		t.Fatalf("load --json of binary: %+v", recs)
	}
	r = d.ox("", "ox-state", "load", "--json", "-a", "ops", "notes/today.md")
	if recs = parseRecs(t, r.stdout); recs[0].Value == nil || *recs[0].Value != "hello world" || recs[0].Encoding != "" {
		t.Fatalf("load --json of text: %+v", recs)
	}

	// The agent's environment variable stands in for -a.
	r = run(t, []string{"OXIOS_SOCKET=" + d.sock, "OXIOS_AGENT=ops"}, "", "ox-state", "ls")
	recs = parseRecs(t, r.stdout)
	if r.code != 0 || len(recs) != 2 || recs[0].Key != "blob" || recs[1].Key != "notes/today.md" {
		t.Fatalf("ls: exit %d %+v %s", r.code, recs, r.stderr)
	}
	r = d.ox("", "ox-state", "ls", "-a", "ops", "notes")
	if recs = parseRecs(t, r.stdout); len(recs) != 1 || recs[0].Key != "notes/today.md" {
		t.Fatalf("ls notes: %+v", recs)
	}

	// The work tree holds the value as a plain file, for git.
	d.stop()
	b, err := os.ReadFile(filepath.Join(d.data, "repo", "agents", "ops", "state", "notes", "today.md"))
	if err != nil || string(b) != "hello world" {
		t.Fatalf("work tree file: %q %v", b, err)
	}
	d = startDaemon(t, daemonOpts{dir: d.dir})

	r = d.ox("", "ox-state", "rm", "-a", "ops", "blob", "missing")
	if r.code != 1 || !strings.Contains(r.stderr, `no key "missing"`) {
		t.Fatalf("rm with a missing key: exit %d, stderr %q", r.code, r.stderr)
	}
	if recs = parseRecs(t, r.stdout); len(recs) != 1 || !recs[0].Deleted || recs[0].Key != "blob" {
		t.Fatalf("rm printed %+v", recs)
	}
	r = d.ox("", "ox-state", "load", "-a", "ops", "blob")
	if r.code != 1 || !strings.Contains(r.stderr, "ENOENT") {
		t.Fatalf("load after rm: exit %d %q", r.code, r.stderr)
	}
}

func TestStateCLIErrors(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_value = \"1KiB\"\n"})
	cases := []struct {
		name string
		args []string
		in   string
		code int
		msg  string
	}{
		{"no agent", []string{"ls"}, "", 2, "no agent"},
		{"bad agent", []string{"ls", "-a", "Ops!"}, "", 2, "agent name"},
		{"dotdot key", []string{"save", "-a", "ops", "../etc/passwd", "x"}, "", 2, `".." element`},
		{"absolute key", []string{"load", "-a", "ops", "/etc/passwd"}, "", 2, "absolute"},
		{"empty element", []string{"load", "-a", "ops", "a//b"}, "", 2, "empty path element"},
		{"long key", []string{"load", "-a", "ops", strings.Repeat("k", 2000)}, "", 2, "more than 1024"},
		{"too many args", []string{"load", "-a", "ops", "a", "b"}, "", 2, "exactly one KEY"},
		{"unknown flag", []string{"ls", "--nope"}, "", 2, "nope"},
		{"too big from stdin", []string{"save", "-a", "ops", "big"}, strings.Repeat("x", 2000), 1, "limit of 1024"},
		{"too big as arg", []string{"save", "-a", "ops", "big", strings.Repeat("x", 2000)}, "", 1, "E2BIG"},
		{"missing key", []string{"load", "-a", "ops", "nope"}, "", 1, "no agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := d.ox(c.in, "ox-state", c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
				t.Fatalf("exit %d stderr %q; want exit %d mentioning %q", r.code, r.stderr, c.code, c.msg)
			}
		})
	}
	// Conflicts between keys and folders.
	if r := d.ox("", "ox-state", "save", "-a", "ops", "a/b", "1"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := d.ox("", "ox-state", "save", "-a", "ops", "a", "1"); r.code != 1 || !strings.Contains(r.stderr, "EISDIR") {
		t.Fatalf("save over a folder: %d %q", r.code, r.stderr)
	}
	if r := d.ox("", "ox-state", "save", "-a", "ops", "a/b/c", "1"); r.code != 1 || !strings.Contains(r.stderr, "ENOTDIR") {
		t.Fatalf("save under a key: %d %q", r.code, r.stderr)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	r := run(t, []string{"OXIOS_SOCKET=" + filepath.Join(dir, "none.sock")}, "", "ox-state", "ls", "-a", "ops")
	if r.code != 69 || !strings.Contains(r.stderr, "oxiosd") || !strings.Contains(r.stderr, "start it") {
		t.Fatalf("exit %d stderr %q; want 69 with a hint", r.code, r.stderr)
	}
}

// TestPipe shows ox-state composing in a shell pipeline, as scripts use it.
func TestPipe(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	for _, k := range []string{"a", "b", "c"} {
		d.ox(k+"-value", "ox-state", "save", "-a", "ops", "k/"+k)
	}
	r := d.ox("", "ox-state", "ls", "-a", "ops", "k")
	var keys []string
	for _, rec := range parseRecs(t, r.stdout) {
		keys = append(keys, rec.Key)
	}
	if strings.Join(keys, ",") != "k/a,k/b,k/c" {
		t.Fatalf("keys %v", keys)
	}
	var all bytes.Buffer
	for _, k := range keys {
		all.WriteString(d.ox("", "ox-state", "load", "-a", "ops", k).stdout)
	}
	if all.String() != "a-valueb-valuec-value" {
		t.Fatalf("concatenated %q", all.String())
	}
}

// TestMaxValue saves a value of exactly the default limit (16 MiB, binary,
// so it travels as base64 in a line near max_line) and one byte more.
func TestMaxValue(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(i*7 + i>>13)
	}
	r := d.ox(string(big), "ox-state", "save", "-a", "ops", "big")
	if r.code != 0 {
		t.Fatalf("save of 16 MiB: exit %d %s", r.code, r.stderr)
	}
	r = d.ox("", "ox-state", "load", "-a", "ops", "big")
	if r.code != 0 || r.stdout != string(big) {
		t.Fatalf("load of 16 MiB: exit %d, %d bytes back, equal %v", r.code, len(r.stdout), r.stdout == string(big))
	}
	r = d.ox(string(big)+"x", "ox-state", "save", "-a", "ops", "big")
	if r.code != 1 || !strings.Contains(r.stderr, "limit") {
		t.Fatalf("save of 16 MiB + 1: exit %d %q", r.code, r.stderr)
	}
	// The daemon refuses it too, when a client does not check first.
	c := d.client(t)
	if _, err := c.StateSave(context.Background(), "ops", "big", append(big, 'x')); err == nil || !strings.Contains(err.Error(), "E2BIG") {
		t.Fatalf("daemon accepted 16 MiB + 1: %v", err)
	}
	if v, _, err := c.StateLoad(context.Background(), "ops", "big"); err != nil || len(v) != len(big) {
		t.Fatalf("the refused save changed the value: %d bytes, %v", len(v), err)
	}
}

// TestSlowProducer: a value on stdin that takes longer to come than the
// daemon gives a silent connection (limits.hello_timeout) is still saved.
func TestSlowProducer(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nhello_timeout = \"1s\"\n"})
	cmd := exec.Command("bash", "-c", "{ sleep 2; echo late; } | ox-state save -a ops slow")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock, "PATH="+binDir+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("a slow producer piped into ox-state save: %v\n%s", err, out)
	}
	if r := d.ox("", "ox-state", "load", "-a", "ops", "slow"); r.stdout != "late\n" {
		t.Fatalf("saved %q (%s)", r.stdout, r.stderr)
	}
}

// TestClientRedials: a client whose idle connection the daemon closed
// (its first request later than limits.hello_timeout, a daemon restarted
// in between) dials again for its next call; a closed client does not.
func TestClientRedials(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	d := startDaemon(t, daemonOpts{dir: dir, config: "[limits]\nhello_timeout = \"1s\"\n"})
	c := d.client(t)
	ctx := context.Background()
	time.Sleep(1500 * time.Millisecond) // the daemon closes the silent connection
	if _, err := c.StateSave(ctx, "ops", "k", []byte("v1")); err != nil {
		t.Fatalf("a call after the daemon closed the idle connection: %v", err)
	}
	d.stop()
	d = startDaemon(t, daemonOpts{dir: dir, config: "[limits]\nhello_timeout = \"1s\"\n"})
	time.Sleep(1100 * time.Millisecond)
	if v, _, err := c.StateLoad(ctx, "ops", "k"); err != nil || string(v) != "v1" {
		t.Fatalf("a call after a restart of the daemon: %q %v", v, err)
	}
	c.Close()
	if _, _, err := c.StateLoad(ctx, "ops", "k"); err == nil {
		t.Fatal("a closed client made a call")
	}
}

// TestClientRedialsWhenEvicted: at limits.max_conns_per_uid the daemon
// closes the uid's longest idle connection to make room; a client whose
// connection it was sends its next request on a new connection, at once
// (make bench's normal client failed with EPIPE under 2,000 idle
// connections, being idle less than the second after which a client looks
// whether its connection is still open).
func TestClientRedialsWhenEvicted(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{config: "[limits]\nmax_conns_per_uid = 4\n"})
	c := d.client(t)
	ctx := context.Background()
	if _, err := c.StateSave(ctx, "ops", "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		cn, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		defer cn.Close()
	}
	time.Sleep(100 * time.Millisecond)
	if v, _, err := c.StateLoad(ctx, "ops", "k"); err != nil || string(v) != "v1" {
		t.Fatalf("a call on a connection the daemon closed to make room: %q %v", v, err)
	}
	if _, err := c.StateSave(ctx, "ops", "k", []byte("v2")); err != nil {
		t.Fatal(err)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "ops", "k"); v != "v2" {
		t.Fatalf("the save after the redial: %q", v)
	}
}

// TestStateStat: ox-state stat prints a key's record, not its value;
// every key is tried, and a missing one fails the command with ENOENT.
func TestStateStat(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "blob", "hello")
	r := d.ox("", "ox-state", "stat", "--json", "-a", "ops", "blob")
	recs := jsonLines(t, r.stdout)
	if r.code != 0 || len(recs) != 1 || recs[0]["key"] != "blob" || recs[0]["size"] != float64(5) || recs[0]["value"] != nil {
		t.Fatalf("stat blob: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	r = d.ox("", "ox-state", "stat", "--json", "-a", "ops", "nope", "blob")
	if r.code != 1 || !strings.Contains(r.stderr, "ENOENT") || !strings.Contains(r.stdout, `"key":"blob"`) {
		t.Fatalf("stat nope blob: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
