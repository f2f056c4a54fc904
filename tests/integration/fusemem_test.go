package integration

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The memory view of the mount: /agent/NAME/mem/KIND/ID.md.

// memLs lists a kind's folder through the mount.
func (m *mounted) memLs(t *testing.T, agent, kind string) []string {
	t.Helper()
	out := strings.Fields(m.sh(t, "ls agent/"+agent+"/mem/"+kind))
	sort.Strings(out)
	return out
}

// TestFUSEMemory: ls and cat of memories remembered over the socket,
// remembering by writing a file (with and without front matter),
// forgetting by rm, and what is refused.
func TestFUSEMemory(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{config: "[limits]\nmax_value = \"64KiB\"\n"})
	one := parseMems(t, m.mustOx(t, "", "ox-remember", "-a", "ops", "--kind", "semantic", "--tag", "nginx", "disk full on /var, nginx stopped logging"))
	id := one[0].ID
	// An agent with memories and no state is there.
	if got := m.sh(t, "ls agent"); got != "ops\n" {
		t.Fatalf("ls agent: %q", got)
	}
	if got := m.sh(t, "ls agent/ops/mem"); got != "episodic\nsemantic\nworking\n" {
		t.Fatalf("ls mem: %q", got)
	}
	if got := m.memLs(t, "ops", "semantic"); strings.Join(got, " ") != id+".md" {
		t.Fatalf("ls mem/semantic: %q, want %s.md", got, id)
	}
	if got := m.memLs(t, "ops", "episodic"); len(got) != 0 {
		t.Fatalf("ls mem/episodic: %q", got)
	}
	file := "agent/ops/mem/semantic/" + id + ".md"
	body := m.sh(t, "cat "+file)
	if !strings.HasPrefix(body, "---\nid: "+id+"\nkind: semantic\ntags: [nginx]\n") || !strings.HasSuffix(body, "\n---\ndisk full on /var, nginx stopped logging") {
		t.Fatalf("cat %s:\n%s", file, body)
	}
	if ls := m.sh(t, "ls -l "+file); !strings.HasPrefix(ls, "-r--r--r--") || !strings.Contains(ls, fmt.Sprintf(" %d ", len(body))) {
		t.Fatalf("ls -l (file is %d bytes): %s", len(body), ls)
	}
	if st := m.sh(t, "stat -c %s "+file); st != fmt.Sprintf("%d\n", len(body)) {
		t.Fatalf("stat size %q, want %d", st, len(body))
	}

	// Writing a file remembers it at close: then the memory has its id,
	// and the name written is gone.
	m.sh(t, "echo 'the nightly backup runs at 2am' > agent/ops/mem/semantic/note.md")
	got := parseMems(t, m.mustOx(t, "", "ox-recall", "-a", "ops", "nightly", "backup"))
	if len(got) == 0 || got[0].Text != "the nightly backup runs at 2am" || got[0].Kind != "semantic" {
		t.Fatalf("recall of a memory written through the mount: %+v", got)
	}
	noteID := got[0].ID
	want := []string{id + ".md", noteID + ".md"}
	sort.Strings(want)
	if ls := m.memLs(t, "ops", "semantic"); strings.Join(ls, " ") != strings.Join(want, " ") {
		t.Fatalf("ls after writing note.md: %q, want %q", ls, want)
	}
	if r := sh(t, m.mnt, "cat agent/ops/mem/semantic/note.md", nil); r.code == 0 || !strings.Contains(r.stderr, "No such file") {
		t.Fatalf("cat of the name written, after close: %+v", r)
	}
	if body := m.sh(t, "cat agent/ops/mem/semantic/"+noteID+".md"); !strings.HasSuffix(body, "\n---\nthe nightly backup runs at 2am") {
		t.Fatalf("cat of the memory written: %q", body)
	}

	// A front matter like the memory files' sets tags, importance, ttl.
	m.sh(t, `printf -- '---\ntags: [tls, certs]\nimportance: 0.7\n---\nthe certificate for example.com expires in march\n' > agent/ops/mem/episodic/cert.md`)
	got = parseMems(t, m.mustOx(t, "", "ox-recall", "-a", "ops", "--tag", "tls", "certificate"))
	if len(got) != 1 || got[0].Kind != "episodic" || strings.Join(got[0].Tags, ",") != "certs,tls" || got[0].Text != "the certificate for example.com expires in march" {
		t.Fatalf("recall of a memory with front matter: %+v", got)
	}
	// A memory's file copied into another kind is remembered again there.
	m.sh(t, "cp agent/ops/mem/episodic/"+got[0].ID+".md agent/ops/mem/working/copy.md")
	if w := parseMems(t, m.mustOx(t, "", "ox-recall", "-a", "ops", "--kind", "working", "certificate")); len(w) != 1 || strings.Join(w[0].Tags, ",") != "certs,tls" || w[0].Text != got[0].Text {
		t.Fatalf("recall of a copied memory: %+v", w)
	}
	m.sh(t, `printf -- '---\nttl: 1s\n---\nshort lived\n' > agent/ops/mem/working/short.md`)
	waitFor(t, "a memory with ttl 1s to expire", func() bool {
		return !strings.Contains(m.mustOx(t, "", "ox-recall", "-a", "ops", "short", "lived"), "short lived")
	})

	// rm forgets.
	m.sh(t, "rm agent/ops/mem/semantic/"+noteID+".md")
	if out := m.mustOx(t, "", "ox-recall", "-a", "ops", "nightly", "backup"); strings.Contains(out, "nightly") {
		t.Fatalf("recall after rm: %s", out)
	}
	if ls := m.memLs(t, "ops", "semantic"); strings.Join(ls, " ") != id+".md" {
		t.Fatalf("ls after rm: %q", ls)
	}
	// A memory forgotten over the socket is gone from the mount at once,
	// though its name and attributes were cached.
	m.sh(t, "cat "+file+" >/dev/null && stat "+file+" >/dev/null")
	m.mustOx(t, "", "ox-forget", "-a", "ops", id)
	if r := sh(t, m.mnt, "cat "+file, nil); r.code == 0 || !strings.Contains(r.stderr, "No such file") {
		t.Fatalf("cat after a socket forget: %+v", r)
	}

	// Refused: editors' files, other names, folders, renames, changes to
	// a memory, an empty text, a bad front matter, too large a text.
	m.mustOx(t, "", "ox-remember", "-a", "ops", "--kind", "semantic", "kept")
	kept := m.memLs(t, "ops", "semantic")[0]
	for _, c := range []struct{ script, want string }{
		{"echo x > agent/ops/mem/semantic/.note.md.swp", "Invalid argument"},
		{"echo x > agent/ops/mem/semantic/note.md~", "Invalid argument"},
		{"echo x > agent/ops/mem/semantic/4913", "Invalid argument"},
		{"echo x > agent/ops/mem/semantic/note.txt", "Invalid argument"},
		{"echo x > agent/ops/mem/semantic/" + kept, "Operation not permitted"},
		{"echo x >> agent/ops/mem/semantic/" + kept, "Operation not permitted"},
		{"mkdir agent/ops/mem/semantic/sub", "Operation not permitted"},
		{"mkdir agent/ops/mem/other", "Read-only file system"},
		{"mv agent/ops/mem/semantic/" + kept + " agent/ops/mem/semantic/x.md", "Operation not permitted"},
		{"cat agent/ops/mem/semantic/nothing.md", "No such file"},
		{"rm agent/ops/mem/semantic/nothing.md", "No such file"},
		// close(2) says why; a shell builtin's redirection loses what
		// close says, so these go through cat.
		{"echo | cat > agent/ops/mem/semantic/empty.md", "Invalid argument"},
		{`printf -- '---\ncolour: red\n---\ntext\n' | cat > agent/ops/mem/semantic/bad.md`, "Invalid argument"},
		{"head -c 70000 /dev/zero | tr '\\0' a > agent/ops/mem/semantic/big.md", "File too large"},
	} {
		if r := sh(t, m.mnt, c.script, nil); r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: %+v, want %q", c.script, r, c.want)
		}
	}
	// touch makes nothing: an empty file is no memory.
	// The draft a touch made is gone once its release comes, which the
	// kernel sends after close(2) has returned: an ls right after touch
	// may still find it, for a moment.
	m.sh(t, "touch agent/ops/mem/semantic/touched.md")
	ls := m.memLs(t, "ops", "semantic")
	for i := 0; i < 30 && strings.Join(ls, " ") != kept; i++ {
		time.Sleep(100 * time.Millisecond)
		ls = m.memLs(t, "ops", "semantic")
	}
	if strings.Join(ls, " ") != kept {
		t.Fatalf("ls after the refusals: %q, want %s", ls, kept)
	}
	if n := len(parseMems(t, m.mustOx(t, "", "ox-recall", "-a", "ops", "--kind", "semantic", "-k", "100", "a x text kept"))); n != 1 {
		t.Fatalf("%d memories recalled after the refusals, want 1", n)
	}
	// Audited like any remember and forget: the mount's included.
	audit := m.mustOx(t, "", "ox-audit", "log", "--op", "mem.remember")
	if n := strings.Count(audit, `"op":"mem.remember"`); n != 6 {
		t.Fatalf("%d mem.remember entries, want 6:\n%s", n, audit)
	}
}

// TestFUSEMemoryOtherUID: a uid granted some agents reads and writes
// their memories, and not another agent's.
func TestFUSEMemoryOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	const nobody = 65534
	as := &syscall.Credential{Uid: nobody, Gid: nobody}
	m := startMounted(t, daemonOpts{config: fmt.Sprintf("[access.users]\n\"%d\" = [\"web-*\"]\n", nobody)})
	os.Chmod(m.dir, 0o755)
	m.mustOx(t, "", "ox-remember", "-a", "ops", "--kind", "semantic", "the root password is in the vault")
	m.mustOx(t, "", "ox-remember", "-a", "web-1", "--kind", "semantic", "the site is served by nginx")
	// The admin has been here: names are in the kernel's caches.
	m.sh(t, "ls -l agent/*/mem/semantic >/dev/null && cat agent/*/mem/semantic/*.md >/dev/null")
	mnt := m.mnt + "/agent/"
	if r := sh(t, "/", "cat "+mnt+"web-1/mem/semantic/*.md", as); r.code != 0 || !strings.Contains(r.stdout, "served by nginx") {
		t.Fatalf("granted uid, its agent's memory: %+v", r)
	}
	if r := sh(t, "/", "echo 'deploys happen on tuesdays' > "+mnt+"web-1/mem/episodic/d.md", as); r.code != 0 {
		t.Fatalf("granted uid, remembering for its agent: %+v", r)
	}
	if got := parseMems(t, m.mustOx(t, "", "ox-recall", "-a", "web-1", "deploys")); len(got) != 1 || got[0].Kind != "episodic" {
		t.Fatalf("recall of the granted uid's memory: %+v", got)
	}
	for _, script := range []string{
		"ls " + mnt + "ops/mem/semantic",
		"cat " + mnt + "ops/mem/semantic/*.md",
		"echo x > " + mnt + "ops/mem/semantic/n.md",
		"rm " + mnt + "ops/mem/semantic/*.md",
	} {
		r := sh(t, "/", script, as)
		if r.code == 0 || !(strings.Contains(r.stderr, "Permission denied") || strings.Contains(r.stderr, "Operation not permitted") || strings.Contains(r.stderr, "No such file")) {
			t.Errorf("granted uid, another agent's memory, %s: %+v", script, r)
		}
	}
	if got := parseMems(t, m.mustOx(t, "", "ox-recall", "-a", "ops", "-k", "100", "root password vault x")); len(got) != 1 {
		t.Fatalf("ops's memories after the refusals: %+v", got)
	}
}

// TestFUSESameNameAgain: a file written into a memory kind's folder or an
// inbox is taken at close and its name is gone, yet the kernel keeps the
// name's entry for a jiffy; a second write of the same name right after
// reached the old node's open and failed with ENOENT ("Directory
// nonexistent" from dash), about one time in two in a tight loop. Each
// write must reach the daemon: remembered, sent, or refused for its
// content.
func TestFUSESameNameAgain(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	m.mustOx(t, "", "ox-state", "save", "-a", "ops", "hello", "x")
	m.sh(t, `for i in $(seq 1 20); do printf 'note %s\n' $i > agent/ops/mem/working/n.md || exit 1; done`)
	if n := strings.TrimSpace(m.sh(t, "ls agent/ops/mem/working | wc -l")); n != "20" {
		t.Fatalf("20 writes of working/n.md made %s memories", n)
	}
	// A refused message: each write is refused for its front matter
	// (EINVAL at close, which cat reports), none for a stale name.
	for i := range 10 {
		r := sh(t, m.mnt, `printf -- '---
subject: x
---
hi
' | cat > agent/ops/inbox/bad.md`, nil)
		if r.code == 0 || !strings.Contains(r.stderr, "Invalid argument") {
			t.Fatalf("write %d of a refused message: %+v", i, r)
		}
	}
	// A sent one, again and again under one name: each is a message.
	m.sh(t, `for i in $(seq 1 10); do echo "note $i" > agent/ops/inbox/new.md || exit 1; done`)
	if n := strings.TrimSpace(m.sh(t, "ls agent/ops/inbox | wc -l")); n != "10" {
		t.Fatalf("10 writes of inbox/new.md sent %s messages", n)
	}
}
