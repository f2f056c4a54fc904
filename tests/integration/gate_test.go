package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The mount and the socket are two front ends of one gate: whatever one
// refuses the other refuses, whatever one accepts the other accepts, and
// each leaves the state as the other would. One table, both paths, for
// every state and memory operation.

// errnoName names the errno of a failed file operation ("" for none).
func errnoName(err error) string {
	if err == nil {
		return ""
	}
	var en syscall.Errno
	if !errors.As(err, &en) {
		return "not an errno: " + err.Error()
	}
	for name, e := range map[string]syscall.Errno{
		"EINVAL": syscall.EINVAL, "EPERM": syscall.EPERM, "EACCES": syscall.EACCES, "ENOENT": syscall.ENOENT,
		"ENAMETOOLONG": syscall.ENAMETOOLONG, "EFBIG": syscall.EFBIG, "EROFS": syscall.EROFS, "EISDIR": syscall.EISDIR,
	} {
		if en == e {
			return name
		}
	}
	return en.Error()
}

// call sends one request on rc and returns its error code ("" for ok)
// and its result or items.
func (rc *rawConn) call(op string, args any) (string, []json.RawMessage) {
	rc.t.Helper()
	b, err := json.Marshal(map[string]any{"id": 1, "op": op, "args": args})
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.send(string(b))
	var out []json.RawMessage
	for {
		r := rc.reply()
		if r.Item != nil {
			out = append(out, r.Item)
			continue
		}
		if !r.OK {
			return r.Error.Code, out
		}
		if r.Result != nil {
			out = append(out, r.Result)
		}
		return "", out
	}
}

func TestGateSocketMountParity(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{config: "[limits]\nmax_value = \"4096\"\n"})
	rc := m.raw(t)
	state := func(agent string) string { return filepath.Join(m.mnt, "agent", agent, "state") }
	exists := func(agent, key string) bool {
		code, _ := rc.call("state.load", map[string]string{"agent": agent, "key": key})
		return code == ""
	}
	// A key is there before the mount's writes: agent/ops is a folder.
	if code, _ := rc.call("state.save", map[string]string{"agent": "ops", "key": "seed", "value": "x"}); code != "" {
		t.Fatalf("seed: %s", code)
	}
	long := strings.Repeat("d/", 520) + "k"
	for _, c := range []struct {
		agent, key, value string
		sock, mnt         string // the refusal of each path; "" accepts
		why               string // why the two codes differ, when they do
	}{
		{agent: "ops", key: "notes/a.md", value: "one"},
		{agent: "ops", key: "dots.in.name", value: "one"},
		// Control characters are refused on both paths (issue 18: a
		// newline in a key broke every line-based list of keys).
		{agent: "ops", key: "new\nline", value: "one", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: "ctl\x01char", value: "one", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: "ü/ñ.md", value: "one"},
		{agent: "ops", key: ".gitmodules", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: "proj/.git/config", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: ".GIT", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: "x/.GitModules.", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: "git~1", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: "gitmod~2", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: ".git\u200c", value: "x", sock: "EINVAL", mnt: "EINVAL"},
		{agent: "ops", key: strings.Repeat("e", 256), value: "x", sock: "ENAMETOOLONG", mnt: "ENAMETOOLONG"},
		{agent: "ops", key: long, value: "x", sock: "ENAMETOOLONG", mnt: "ENAMETOOLONG"},
		{agent: "ops", key: "big", value: strings.Repeat("v", 5000), sock: "E2BIG", mnt: "EFBIG", why: "write(2) says EFBIG where the wire says E2BIG"},
		{agent: "Bad", key: "k", value: "x", sock: "EINVAL", mnt: "ENOENT", why: "no such folder: the mount has no name for a bad agent"},
		{agent: "-x", key: "k", value: "x", sock: "EINVAL", mnt: "ENOENT", why: "as above"},
	} {
		name := fmt.Sprintf("%.40q:%.40q", c.agent, c.key)
		if (c.sock == "") != (c.mnt == "") {
			t.Fatalf("%s: the table says one path accepts and the other refuses", name)
		}
		if c.sock != c.mnt && c.why == "" {
			t.Fatalf("%s: different codes without a reason", name)
		}
		// The socket.
		code, _ := rc.call("state.save", map[string]string{"agent": c.agent, "key": c.key, "value": c.value})
		if code != c.sock {
			t.Errorf("%s: state.save: %q, want %q", name, code, c.sock)
		}
		if got := exists(c.agent, c.key); got != (c.sock == "") {
			t.Errorf("%s: after state.save the key exists: %v", name, got)
		}
		if c.sock == "" {
			if code, _ := rc.call("state.delete", map[string]string{"agent": c.agent, "key": c.key}); code != "" {
				t.Errorf("%s: state.delete: %s", name, code)
			}
		}
		// The mount: folders first, as a user would (they exist only in
		// the mount until a file in them is saved).
		p := filepath.Join(state(c.agent), c.key)
		var err error
		if dir := filepath.Dir(c.key); dir != "." {
			err = os.MkdirAll(filepath.Dir(p), 0o755)
		}
		if err == nil {
			err = os.WriteFile(p, []byte(c.value), 0o644)
		}
		if got := errnoName(err); got != c.mnt {
			t.Errorf("%s: written through the mount: %s (%v), want %s", name, got, err, c.mnt)
		}
		if got := exists(c.agent, c.key); got != (c.mnt == "") {
			t.Errorf("%s: after the mount's write the key exists: %v", name, got)
		}
		if c.mnt == "" {
			if err := os.Remove(p); err != nil {
				t.Errorf("%s: rm through the mount: %v", name, err)
			}
			if exists(c.agent, c.key) {
				t.Errorf("%s: still there after rm through the mount", name)
			}
		}
		// What the gate refused, it audited, on both paths. (A name too
		// long for the VFS, or a write past the size limit, is refused by
		// the mount before any syscall.)
		if c.sock == "EINVAL" && c.mnt == "EINVAL" {
			// Refusals are queued without waiting; a save behind them in
			// the committer's queue is durable after them. The same
			// refusal twice within a second is one entry and a summary
			// that counts the second (audit.Coalescer), logged once the
			// burst has been quiet for a second: wait for it.
			n := 0
			for deadline := time.Now().Add(10 * time.Second); n < 2 && time.Now().Before(deadline); {
				rc.call("state.save", map[string]string{"agent": "ops", "key": "seed", "value": "x"})
				_, items := rc.call("audit.log", map[string]any{"op": "state.save", "agent": "ops"})
				n = 0
				for _, it := range items {
					var e struct {
						Target, Result string
						Count          int
					}
					json.Unmarshal(it, &e)
					if e.Target == strings.ToValidUTF8("ops:"+c.key, "?") && e.Result != "ok" {
						n += max(e.Count, 1)
					}
				}
				if n < 2 {
					time.Sleep(200 * time.Millisecond)
				}
			}
			want := 2
			if strings.IndexFunc(c.key, func(r rune) bool { return r < 0x20 }) >= 0 {
				want = 1 // the mount refuses such a name at lookup, before any syscall
			}
			if n < want {
				t.Errorf("%s: %d refusals audited, want %d", name, n, want)
			}
		}
	}
	// After all that, the agent still commits: nothing git refuses got in.
	if code, _ := rc.call("version.commit", map[string]string{"agent": "ops", "message": "parity"}); code != "" {
		t.Fatalf("version.commit after the refusals: %s", code)
	}

	// Memories: remember and forget, both ways.
	memCount := func() int {
		_, items := rc.call("mem.list", map[string]string{"agent": "ops"})
		return len(items)
	}
	memDir := func(kind string) string { return filepath.Join(m.mnt, "agent", "ops", "mem", kind) }
	for i, c := range []struct {
		kind, text string
		tags       []string
		sock, mnt  string
		why        string
	}{
		{kind: "semantic", text: "the backup runs at 2am"},
		{kind: "episodic", text: "tagged", tags: []string{"ops", "a.b:c/d-e"}},
		{kind: "working", text: "short"},
		{kind: "semantic", text: "  ", sock: "EINVAL", mnt: "EINVAL"},
		{kind: "semantic", text: "bad tag", tags: []string{"Bad Tag"}, sock: "EINVAL", mnt: "EINVAL"},
		{kind: "semantic", text: strings.Repeat("m", 5000), sock: "E2BIG", mnt: "EFBIG", why: "write(2) says EFBIG"},
		{kind: "bogus", text: "x", sock: "EINVAL", mnt: "ENOENT", why: "no folder for a kind that is not one"},
	} {
		name := fmt.Sprintf("%s %.30q %v", c.kind, c.text, c.tags)
		if (c.sock == "") != (c.mnt == "") || (c.sock != c.mnt && c.why == "") {
			t.Fatalf("%s: the table disagrees with itself", name)
		}
		before := memCount()
		code, _ := rc.call("mem.remember", map[string]any{"agent": "ops", "memories": []map[string]any{{"kind": c.kind, "text": c.text, "tags": c.tags}}})
		if code != c.sock {
			t.Errorf("%s: mem.remember: %q, want %q", name, code, c.sock)
		}
		file := c.text
		if len(c.tags) > 0 {
			file = fmt.Sprintf("---\ntags: [%s]\n---\n%s", strings.Join(c.tags, ", "), c.text)
		}
		err := os.WriteFile(filepath.Join(memDir(c.kind), fmt.Sprintf("new%d.md", i)), []byte(file), 0o644)
		if got := errnoName(err); got != c.mnt {
			t.Errorf("%s: written through the mount: %s (%v), want %s", name, got, err, c.mnt)
		}
		want := before
		if c.sock == "" {
			want += 2
		}
		if got := memCount(); got != want {
			t.Errorf("%s: %d memories after both, want %d", name, got, want)
		}
	}
	// Forget: an id that is there, one that is not, one that is no id.
	_, items := rc.call("mem.list", map[string]string{"agent": "ops", "kind": "semantic"})
	if len(items) < 2 {
		t.Fatalf("semantic memories to forget: %d", len(items))
	}
	var a, b struct{ ID string }
	json.Unmarshal(items[0], &a)
	json.Unmarshal(items[1], &b)
	for _, c := range []struct {
		id, sock, mnt, why string
	}{
		{id: "01ARZ3NDEKTSV4RRFFQ69G5FAV", sock: "ENOENT", mnt: "ENOENT"},
		{id: "not-an-id", sock: "EINVAL", mnt: "ENOENT", why: "no such file: the mount has no name for a bad id"},
	} {
		code, _ := rc.call("mem.forget", map[string]any{"agent": "ops", "ids": []string{c.id}})
		if code != c.sock {
			t.Errorf("forget %s: %q, want %q", c.id, code, c.sock)
		}
		if got := errnoName(os.Remove(filepath.Join(memDir("semantic"), c.id+".md"))); got != c.mnt {
			t.Errorf("rm %s through the mount: %s, want %s", c.id, got, c.mnt)
		}
	}
	before := memCount()
	if code, _ := rc.call("mem.forget", map[string]any{"agent": "ops", "ids": []string{a.ID}}); code != "" {
		t.Errorf("forget %s: %s", a.ID, code)
	}
	if err := os.Remove(filepath.Join(memDir("semantic"), b.ID+".md")); err != nil {
		t.Errorf("rm %s through the mount: %v", b.ID, err)
	}
	if got := memCount(); got != before-2 {
		t.Errorf("%d memories after forgetting one each way, want %d", got, before-2)
	}
}

// TestGateSocketMountParityPolicy: a uid bound by an agent's policy meets
// the same refusals over the socket and through the mount.
func TestGateSocketMountParityPolicy(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	const nobody = 65534
	as := &syscall.Credential{Uid: nobody, Gid: nobody}
	m := startMounted(t, daemonOpts{config: fmt.Sprintf("socket_group = \"%d\"\n[access.users]\n\"%d\" = [\"web-*\"]\n", nobody, nobody)})
	os.Chmod(m.dir, 0o755)
	m.mustOx(t, "", "ox-state", "save", "-a", "web-1", "seed", "x")
	m.mustOx(t, "", "ox-state", "save", "-a", "web-1", "notes/seed", "x")
	m.mustOx(t, "", "ox-policy", "set", "-a", "web-1", writePolicy(t, strictPolicy))
	env := "OXIOS_SOCKET=" + m.sock + " "
	// Through cat: a shell's own redirection loses what close(2) says,
	// and the mount saves (and refuses) at close.
	mnt := m.mnt + "/agent/"
	for _, c := range []struct {
		what, sock, mount string
		ok                bool
	}{
		{"a key the policy lets it write", "ox-state save -a web-1 notes/a.md one", "echo one | cat > " + mnt + "web-1/state/notes/a.md", true},
		{"a key outside its write rules", "ox-state save -a web-1 etc/x one", "mkdir -p " + mnt + "web-1/state/etc && echo one | cat > " + mnt + "web-1/state/etc/x", false},
		{"a key git reserves", "ox-state save -a web-1 notes/.gitmodules one", "echo one | cat > " + mnt + "web-1/state/notes/.gitmodules", false},
		{"a key it may not read", "ox-state load -a web-1 seed", "cat " + mnt + "web-1/state/seed", false},
		{"a key it may read", "ox-state load -a web-1 notes/a.md", "cat " + mnt + "web-1/state/notes/a.md", true},
		{"another agent", "ox-state save -a ops k one", "echo one | cat > " + mnt + "ops/state/k", false},
		{"a kind of memory it may use", "ox-remember -a web-1 --kind episodic deploys on tuesdays", "echo deploys on fridays | cat > " + mnt + "web-1/mem/episodic/d.md", true},
		{"a kind of memory it may not", "ox-remember -a web-1 --kind semantic a fact", "echo a fact | cat > " + mnt + "web-1/mem/semantic/f.md", false},
	} {
		rs := sh(t, "/", env+c.sock, as)
		rm := sh(t, "/", c.mount, as)
		if (rs.code == 0) != c.ok || (rm.code == 0) != c.ok {
			t.Errorf("%s: socket exit %d (%s), mount exit %d (%s); want both ok=%v", c.what, rs.code, strings.TrimSpace(rs.stderr), rm.code, strings.TrimSpace(rm.stderr), c.ok)
		}
	}
}

// TestCheckAuditFails: the audit check every test ends with finds a
// damaged log (a check that cannot fail would prove nothing).
func TestCheckAuditFails(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "k", "v")
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "k", "w")
	d.stop()
	if p := auditProblem(d.data); p != "" {
		t.Fatalf("the intact log: %s", p)
	}
	bad := copyAuditDir(t, d.data)
	seg, lines := segLines(t, bad)
	lines[0] = strings.Replace(lines[0], `"ops:k"`, `"ops:K"`, 1)
	writeSeg(t, seg, lines)
	if p := auditProblem(bad); !strings.Contains(p, "entry 1") {
		t.Fatalf("a changed first entry: %q", p)
	}
}
