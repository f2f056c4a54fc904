package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/oxios/oxios/pkg/client"
	"github.com/oxios/oxios/pkg/proto"
)

// defaultPolicy is the shipped default policy.
func defaultPolicy(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../share/policies/default.toml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func fileUID(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

// gitIn runs git in dir (as root, on a repository another user may own).
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.org"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// workRepo makes a git repository of a small project with a build step
// (build.sh) and a failing test (test.sh), owned by uid (0: root).
func workRepo(t *testing.T, dir string, uid uint32) string {
	t.Helper()
	repo := filepath.Join(dir, "repo")
	files := map[string]string{
		"build.sh":    "#!/bin/sh\nset -e\nmkdir -p out\ncat src/*.txt > out/app\necho built $(wc -l < out/app) lines\n",
		"test.sh":     "#!/bin/sh\ngrep -q '^answer=42$' out/app || { echo FAIL: want answer=42; exit 1; }\necho PASS\n",
		"src/a.txt":   "answer=41\n",
		"src/b.txt":   "name=demo\n",
		"old.txt":     "to be removed\n",
		"keep.txt":    "the run leaves this alone\n",
		".gitignore":  "out/\n",
		"docs/x.md":   "# x\n",
		"docs/y/z.md": "# z\n",
	}
	for name, text := range files {
		p := filepath.Join(repo, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
	}
	gitIn(t, repo, "init", "-q")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "start")
	if uid != 0 {
		if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", uid, uid), repo).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
	}
	return repo
}

// spawnWork runs sh -c script as a process run of agent on folder dir.
func spawnWork(t *testing.T, d *daemon, agent, dir, script string) rtRun {
	t.Helper()
	return runEnd(t, d.ox("", "ox-spawn", "-a", agent, "-n", "--work", dir, "--", "sh", "-c", script), "ox-spawn --work")
}

// The run's fix: the failing test made to pass, a file added and one
// deleted, a folder removed, a binary file, the build and the test run.
const workFix = `set -e
findmnt -n -o FSTYPE /work
mkdir -p "$HOME/.cache" && echo kept > "$HOME/.cache/tool"
sed -i 's/answer=41/answer=42/' src/a.txt
echo 'extra=1' > src/c.txt
rm old.txt
rm -r docs/y
printf '\000\001\377' > data.bin
./build.sh
./test.sh
ox-exec -a dev -- cat src/a.txt src/c.txt
`

func TestWork(t *testing.T) {
	t.Parallel()
	workTest(t, 0)
}

// TestWorkRootless is TestWork against an oxiosd started by an ordinary
// user, whose runs are made in user namespaces.
func TestWorkRootless(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start oxiosd as another (ordinary) user")
	}
	t.Parallel()
	workTest(t, nobodyUID)
}

func workTest(t *testing.T, uid uint32) {
	d := startDaemon(t, daemonOpts{uid: uid})
	c := d.client(t)
	repo := workRepo(t, d.dir, uid)

	// No folder without the policy's word.
	if r := d.ox("", "ox-spawn", "-a", "dev", "-n", "--work", repo, "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "work.allow") {
		if uid != 0 && strings.Contains(r.stderr, "user namespace") {
			t.Skipf("this kernel refuses unprivileged user namespaces: %s", r.stderr)
		}
		t.Fatalf("--work with no [work] allow: exit %d %s", r.code, r.stderr)
	}
	if !auditedSince(t, c, 0, proto.OpRunSpawn, proto.EPERM, "work.allow") {
		t.Error("the refused --work is not audited naming work.allow")
	}
	def := defaultPolicy(t)
	pol := strings.Replace(def, "None by default.\nallow = []", "None by default.\nallow = [\""+d.dir+"/**\"]", 1)
	if pol == def {
		t.Fatal("the default policy has no [work] allow = [] to change")
	}
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, pol))
	// What the gate says, the dry run says.
	if out := d.mustOx(t, "", "ox-policy", "check", "-a", "dev", "run.spawn", repo); !strings.Contains(out, "allowed") {
		t.Errorf("ox-policy check run.spawn %s: %s", repo, out)
	}
	if r := d.ox("", "ox-policy", "check", "-a", "dev", "run.spawn", "/etc"); r.code == 0 && !strings.Contains(r.stdout, "work.allow") {
		t.Errorf("ox-policy check run.spawn /etc: %d %s", r.code, r.stdout)
	}

	fix := spawnWork(t, d, "dev", repo, workFix)
	// The run's exec (an LLM run's tool) sees the run's view of the folder.
	if fix.status != 0 || !strings.HasPrefix(fix.out, "overlay\n") || !strings.Contains(fix.out, "PASS") || !strings.Contains(fix.out, "answer=42\nextra=1") {
		t.Fatalf("the run on the folder: %+v", fix)
	}
	// The host's folder is as it was.
	if st := gitIn(t, repo, "status", "--porcelain", "--ignored"); st != "" {
		t.Fatalf("the folder changed while the run worked:\n%s", st)
	}
	ls := d.mustOx(t, "", "ox-work", "ls")
	if !strings.Contains(ls, fix.id) || !strings.Contains(ls, "pending") {
		t.Fatalf("ox-work ls:\n%s", ls)
	}
	stat := d.mustOx(t, "", "ox-work", "diff", "--stat", fix.id)
	for _, want := range []string{"src/a.txt", "src/c.txt", "old.txt", "docs/y/z.md", "data.bin", "out/app"} {
		if !strings.Contains(stat, want) {
			t.Errorf("ox-work diff --stat lacks %s:\n%s", want, stat)
		}
	}
	patch := d.mustOx(t, "", "ox-work", "diff", fix.id)
	if !strings.Contains(patch, "GIT binary patch") || !strings.Contains(patch, "+answer=42") {
		t.Errorf("the patch:\n%s", patch)
	}
	// The patch applies with git to a clean copy.
	clean := filepath.Join(t.TempDir(), "clean")
	if out, err := exec.Command("cp", "-r", repo, clean).CombinedOutput(); err != nil {
		t.Fatalf("copying the folder: %v %s", err, out)
	}
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir, cmd.Stdin = clean, strings.NewReader(patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply --check of ox-work diff: %v %s", err, out)
	}

	// A second run changes keep.txt; the folder's keep.txt changes too:
	// the apply is refused, naming it, and writes nothing.
	other := spawnWork(t, d, "dev", repo, "echo changed by the run >> keep.txt; echo new > other.txt")
	if other.status != 0 {
		t.Fatalf("second run: %+v", other)
	}
	if err := os.WriteFile(filepath.Join(repo, "keep.txt"), []byte("changed by a person\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := d.ox("", "ox-work", "apply", other.id)
	if r.code == 0 || !strings.Contains(r.stderr, "keep.txt") || !strings.Contains(r.stderr, "EEXIST") {
		t.Fatalf("apply over a conflict: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(repo, "other.txt")); err == nil {
		t.Fatal("a refused apply wrote other.txt")
	}

	// The first run's work applied: the folder has the fix.
	since := auditSeq(t, c)
	d.mustOx(t, "", "ox-work", "apply", fix.id)
	// The person's keep.txt, and the run's changes.
	want := "D docs/y/z.md M keep.txt D old.txt M src/a.txt ?? data.bin ?? src/c.txt"
	if got := strings.Join(strings.Fields(gitIn(t, repo, "status", "--porcelain")), " "); got != want {
		t.Errorf("git status after apply: %q, want %q", got, want)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "src/a.txt")); string(b) != "answer=42\n" {
		t.Errorf("src/a.txt after apply: %q", b)
	}
	var fi os.FileInfo
	if fi, _ = os.Stat(filepath.Join(repo, "src/c.txt")); fi == nil || fileUID(fi) != uid {
		t.Errorf("the added file is not the folder owner's (%d): %v", uid, fi)
	}
	digest := ""
	for _, rec := range records(t, d.mustOx(t, "", "ox-work", "ls", "--json")) {
		if rec["run"] == fix.id {
			digest, _ = rec["digest"].(string)
			if rec["state"] != "applied" {
				t.Errorf("state after apply: %v", rec["state"])
			}
		}
	}
	if digest == "" || !auditedSince(t, c, since, proto.OpWorkApply, "ok", fix.id, "patch "+digest) {
		t.Errorf("the apply is not audited with the patch's digest %q", digest)
	}
	if r := d.ox("", "ox-work", "apply", fix.id); r.code == 0 {
		t.Error("applied twice")
	}

	// The pending work outlives a restart, and is discarded.
	d.stop()
	d = startDaemon(t, daemonOpts{uid: uid, dir: d.dir})
	if ls := d.mustOx(t, "", "ox-work", "ls"); !strings.Contains(ls, other.id) || !strings.Contains(ls, "pending") {
		t.Fatalf("after a restart, ox-work ls:\n%s", ls)
	}
	d.mustOx(t, "", "ox-work", "discard", other.id)
	if b, _ := os.ReadFile(filepath.Join(repo, "keep.txt")); string(b) != "changed by a person\n" {
		t.Errorf("keep.txt after discard: %q", b)
	}
	// A run may not apply work, its own or not.
	if r := spawnArgv(t, d, "dev", "ox-work", "apply", fix.id); r.status == 0 {
		t.Errorf("a run applied work: %+v", r)
	}
	// --work obeys the run's disk limit, rootless too: what the run
	// writes fills its own filesystem, not DATA's.
	small := strings.Replace(pol, "disk = \"1GiB\"", "disk = \"4MiB\"", 1)
	if small == pol {
		t.Fatal("the default policy has no disk = \"1GiB\" to change")
	}
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, small))
	full := spawnWork(t, d, "dev", repo, "head -c 12000000 /dev/zero > big.bin; echo rc=$?; ls -l big.bin")
	if !strings.Contains(full.out, "No space left on device") || strings.Contains(full.out, "rc=0") || strings.Contains(full.out, " 12000000 ") {
		t.Errorf("a run writing 12 MB to its --work folder under disk = 4MiB: %+v", full)
	}
	d.mustOx(t, "", "ox-work", "discard", full.id)
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, pol))
	execWork(t, d, c, repo, pol)
}

// execWork: ox-exec --work is one command on the folder through the
// same overlay, its changes waiting as its work under an id of its own.
func execWork(t *testing.T, d *daemon, c *client.Client, repo, pol string) {
	t.Helper()
	withSh := strings.Replace(pol, `allow = ["cat",`, `allow = ["sh", "findmnt", "cat",`, 1)
	withSh = strings.Replace(withSh, "\nshell = false", "\nshell = true", 1)
	if !strings.Contains(withSh, `"sh", "findmnt"`) || !strings.Contains(withSh, "\nshell = true") {
		t.Fatal("the default policy's [exec] has no allow list starting with cat, or no shell = false")
	}
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, withSh))
	since := auditSeq(t, c)
	if r := d.ox("", "ox-exec", "-a", "dev", "--work", "/etc", "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "work.allow") {
		t.Errorf("ox-exec --work /etc: exit %d %s", r.code, r.stderr)
	}
	if !auditedSince(t, c, since, proto.OpExec, proto.EPERM, "work.allow") {
		t.Error("the refused ox-exec --work is not audited naming work.allow")
	}
	before := gitIn(t, repo, "status", "--porcelain")
	r := d.ox("", "ox-exec", "-a", "dev", "--json", "--work", repo, "--", "sh", "-c", "findmnt -n -o FSTYPE /work; echo exec >> src/b.txt; rm keep.txt; echo HOME=$HOME")
	var rec proto.ExecRecord
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil || r.code != 0 {
		t.Fatalf("ox-exec --work: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if rec.Stdout != "overlay\nHOME=/tmp\n" || rec.Work != repo || !strings.HasPrefix(rec.ID, "x") || rec.Changes != 2 {
		t.Fatalf("the exec on the folder: %+v", rec)
	}
	if after := gitIn(t, repo, "status", "--porcelain"); after != before {
		t.Fatalf("the folder changed under ox-exec --work:\n%s\nwas\n%s", after, before)
	}
	if !auditedSince(t, c, since, proto.OpExec, "ok", "work "+rec.ID) {
		t.Error("the exec's audit entry does not name its work")
	}
	if ls := d.mustOx(t, "", "ox-work", "ls"); !strings.Contains(ls, rec.ID) || !strings.Contains(ls, "pending") {
		t.Fatalf("ox-work ls after ox-exec --work:\n%s", ls)
	}
	if patch := d.mustOx(t, "", "ox-work", "diff", rec.ID); !strings.Contains(patch, "+exec") || !strings.Contains(patch, "keep.txt") {
		t.Errorf("the exec's patch:\n%s", patch)
	}
	d.mustOx(t, "", "ox-work", "apply", rec.ID)
	if b, _ := os.ReadFile(filepath.Join(repo, "src/b.txt")); string(b) != "name=demo\nexec\n" {
		t.Errorf("src/b.txt after applying the exec's work: %q", b)
	}
	if _, err := os.Stat(filepath.Join(repo, "keep.txt")); err == nil {
		t.Error("keep.txt is there after applying the exec's work, which removed it")
	}
	// A run's execs work in the run's folder: not on another.
	if r := spawnArgv(t, d, "dev", "ox-exec", "-a", "dev", "--work", repo, "--", "true"); r.status == 0 {
		t.Errorf("a run's exec took a folder: %+v", r)
	}
	// ox-exec --work obeys the disk limit as a run does, rootless too:
	// its upper layer is a filesystem of limits.disk, not DATA's disk.
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, strings.Replace(withSh, "disk = \"1GiB\"", "disk = \"4MiB\"", 1)))
	r = d.ox("", "ox-exec", "-a", "dev", "--json", "--work", repo, "--", "sh", "-c", "head -c 12000000 /dev/zero > big.bin; echo rc=$?; ls -l big.bin")
	rec = proto.ExecRecord{}
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("ox-exec --work writing 12 MB: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if !strings.Contains(rec.Stderr, "No space left on device") || strings.Contains(rec.Stdout, "rc=0") || strings.Contains(rec.Stdout, " 12000000 ") || rec.ID == "" {
		t.Errorf("ox-exec --work writing 12 MB under disk = 4MiB: %+v", rec)
	} else {
		d.mustOx(t, "", "ox-work", "discard", rec.ID)
	}
	if _, err := os.Stat(filepath.Join(repo, "big.bin")); err == nil {
		t.Error("big.bin is in the folder")
	}
}

// TestReceipt: a run's receipt verifies offline against a head kept
// since the run, and a changed byte in any part, a dropped entry, or
// another run's entries each fail, naming the part.
func TestReceipt(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	repo := workRepo(t, d.dir, 0)
	def := defaultPolicy(t)
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, strings.Replace(def, "None by default.\nallow = []", "None by default.\nallow = [\""+d.dir+"/**\"]", 1)))
	d.mustOx(t, "", "ox-state", "save", "-a", "dev", "notes/a", "one")
	d.mustOx(t, "", "ox-commit", "-a", "dev", "-m", "before")
	fix := spawnWork(t, d, "dev", repo, workFix)
	other := spawnWork(t, d, "dev", repo, "echo other > other.txt")
	if fix.status != 0 || other.status != 0 {
		t.Fatalf("runs: %+v %+v", fix, other)
	}
	d.mustOx(t, "", "ox-state", "save", "-a", "dev", "notes/a", "two")
	d.mustOx(t, "", "ox-commit", "-a", "dev", "-m", "after")
	dir := t.TempDir()
	head := filepath.Join(dir, "head.json")
	os.WriteFile(head, []byte(d.mustOx(t, "", "ox-audit", "head")), 0o644)
	d.mustOx(t, "", "ox-work", "apply", fix.id) // after the head: the receipt holds it too

	rcpt := d.mustOx(t, "", "ox-receipt", fix.id)
	file := filepath.Join(dir, "run.receipt")
	os.WriteFile(file, []byte(rcpt), 0o644)
	ok := d.mustOx(t, "", "ox-receipt", "verify", "--head", head, file)
	if !strings.Contains(ok, `"ok":true`) || !strings.Contains(ok, `"against":{`) {
		t.Fatalf("ox-receipt verify: %s", ok)
	}
	lines := strings.Split(strings.TrimSuffix(rcpt, "\n"), "\n")
	var hdr map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &hdr); err != nil {
		t.Fatal(err)
	}
	if hdr["before"] == nil || hdr["after"] == nil || hdr["work"] == "" || hdr["dir"] != repo {
		t.Errorf("the header lacks the commits, the work or its folder: %s", lines[0])
	}
	// The policy the run started under, by the digest ox-policy show names.
	var pol struct{ Digest string }
	json.Unmarshal([]byte(d.mustOx(t, "", "ox-policy", "show", "-a", "dev", "--json")), &pol)
	if pol.Digest == "" || hdr["policy"] != pol.Digest || !strings.Contains(ok, `"policy":"`+pol.Digest+`"`) {
		t.Errorf("the receipt's policy version %v, verify's %s, ox-policy show's %q", hdr["policy"], ok, pol.Digest)
	}
	// The line of the first audit entry, and of one after the run's.
	firstEntry := 0
	for i, l := range lines {
		if strings.HasPrefix(l, `{"type":"audit","seq":`) {
			firstEntry = i
			break
		}
	}
	spawnLine := 0
	for i, l := range lines {
		if strings.Contains(l, `"op":"run.spawn","target":"dev:`+fix.id+`"`) {
			spawnLine = i
		}
	}
	if spawnLine <= firstEntry {
		t.Fatalf("no spawn entry of %s after the commit's: %d, %d", fix.id, spawnLine, firstEntry)
	}
	runLine, patchLine := 0, 0
	for i, l := range lines[:firstEntry] {
		switch {
		case strings.Contains(l, `"type":"receipt_run"`) && strings.Contains(l, "PASS") && runLine == 0:
			runLine = i
		case strings.Contains(l, `"type":"receipt_patch"`):
			patchLine = i
		}
	}
	if firstEntry == 0 || runLine == 0 || patchLine == 0 {
		t.Fatalf("the receipt's parts: entries at %d, output at %d, patch at %d:\n%s", firstEntry, runLine, patchLine, rcpt)
	}
	otherRcpt := strings.Split(strings.TrimSuffix(d.mustOx(t, "", "ox-receipt", other.id), "\n"), "\n")
	edit := func(i int, from, to string) []string {
		out := append([]string(nil), lines...)
		if !strings.Contains(out[i], from) {
			t.Fatalf("line %d has no %q: %s", i, from, out[i])
		}
		out[i] = strings.Replace(out[i], from, to, 1)
		return out
	}
	mid := firstEntry + (len(lines)-firstEntry)/2
	for _, c := range []struct {
		name  string
		lines []string
		part  string
	}{
		{"a changed byte of the output", edit(runLine, "PASS", "FAIL"), "run log"},
		{"a changed byte of the patch", edit(patchLine, "answer=42", "answer=43"), "patch"},
		{"a changed byte of an entry", edit(mid, `"result":"`, `"result":"x`), "audit entry"},
		{"a changed byte of the header", edit(0, repo, repo+"x"), "header"},
		{"another policy version", edit(0, `"policy":"`, `"policy":"0`), "header"},
		{"a dropped entry", append(append([]string(nil), lines[:mid]...), lines[mid+1:]...), "audit entry"},
		// The header of this run on another run's log, patch and entries.
		{"another run's entries", append([]string{lines[0]}, otherRcpt[1:]...), "run log"},
		// Its entries cut to start after its spawn.
		{"entries without its spawn", append(append([]string(nil), lines[:firstEntry]...), lines[spawnLine+1:]...), "audit entry"},
	} {
		bad := filepath.Join(dir, "bad.receipt")
		os.WriteFile(bad, []byte(strings.Join(c.lines, "\n")+"\n"), 0o644)
		r := d.ox("", "ox-receipt", "verify", "--head", head, bad)
		if r.code != 1 || !strings.Contains(r.stderr, "does NOT verify: "+c.part) {
			t.Errorf("%s: exit %d, %s (want exit 1 naming %q)", c.name, r.code, r.stderr, c.part)
		}
	}
	// A head the receipt's entries do not lead to.
	var h proto.AuditHead
	json.Unmarshal([]byte(d.mustOx(t, "", "ox-audit", "head")), &h)
	h.Hash = strings.Repeat("0", 64)
	b, _ := json.Marshal(h)
	forged := filepath.Join(dir, "forged.json")
	os.WriteFile(forged, b, 0o644)
	if r := d.ox("", "ox-receipt", "verify", "--head", forged, file); r.code != 1 || !strings.Contains(r.stderr, "does NOT verify: head") {
		t.Errorf("against another head: exit %d %s", r.code, r.stderr)
	}
	// Not the receipt of a run by anyone but the admin: a run asks.
	if r := spawnArgv(t, d, "dev", "ox-receipt", fix.id); r.status == 0 {
		t.Errorf("a run wrote a receipt: %+v", r)
	}
}
