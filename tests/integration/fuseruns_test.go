package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Runs as files (package vfs through the mount), driven with a shell and
// coreutils only: spawn by writing a command line, tail -f of out, ctl.

// TestFUSERuns: a run started through /agent/NAME/spawn (its id read back
// on the same open file), followed live with tail -f; then stop, cont and
// kill of another through its ctl, and what is refused.
func TestFUSERuns(t *testing.T) {
	t.Parallel()
	m := startMounted(t, daemonOpts{})
	m.sh(t, "mkdir agent/ops")
	// The run waits for a file in its workspace, which the test makes.
	id := strings.TrimSpace(m.sh(t, `exec 3<>agent/ops/spawn && echo 'sh -c "echo one; until [ -e go ]; do sleep 0.05; done; echo two"' >&3 && read id <&3 && echo "$id"`))
	if id == "" || strings.ContainsAny(id, " /") {
		t.Fatalf("spawn answered %q", id)
	}
	run := "agent/ops/runs/" + id
	if got := m.sh(t, "ls agent/ops/runs"); got != id+"\n" {
		t.Fatalf("ls runs: %q, want %s", got, id)
	}
	if got := m.sh(t, "ls -l "+run+" | awk 'NR>1 {print $1, $NF}'"); got != "--w------- ctl\n-r--r--r-- out\n-r--r--r-- status\n--w------- stdin\n" {
		t.Fatalf("ls -l %s:\n%s", run, got)
	}
	var rec struct{ Workspace string }
	if err := json.Unmarshal([]byte(m.sh(t, "cat "+run+"/status")), &rec); err != nil || rec.Workspace == "" {
		t.Fatalf("status: %+v %v", rec, err)
	}
	// tail -f follows out: "one" is there while the run waits, and "two"
	// and the exit come once it goes on.
	tmp := filepath.Join(m.dir, "tail.out")
	script := fmt.Sprintf(`timeout 30 tail -f %[1]s/out > %[2]s 2>&1 & t=$!
	until grep -q '"text":"one"' %[2]s; do sleep 0.05; done
	if grep -q '"text":"two"' %[2]s; then echo "two before go"; exit 1; fi
	touch %[3]s/go
	until grep -q '"type":"exit"' %[2]s; do sleep 0.05; done
	kill $t`, run, tmp, rec.Workspace)
	m.sh(t, script)
	out, _ := os.ReadFile(tmp)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) < 3 || !strings.Contains(lines[len(lines)-3], `"text":"one"`) || !strings.Contains(lines[len(lines)-2], `"text":"two"`) ||
		!strings.Contains(lines[len(lines)-1], `"type":"exit"`) || !strings.Contains(lines[len(lines)-1], `"status":0`) {
		t.Fatalf("tail -f of out:\n%s", out)
	}
	// cat of out ends with the run; status is its record, as ox-ps has it.
	if got := m.sh(t, "cat "+run+"/out"); got != string(out) {
		t.Fatalf("cat out:\n%s\ntail -f:\n%s", got, out)
	}
	if got := m.sh(t, "cat "+run+"/status"); !strings.HasPrefix(got, `{"type":"run","id":"`+id+`"`) || !strings.Contains(got, `"state":"exited"`) {
		t.Fatalf("status: %s", got)
	}

	// ctl: stop, cont, kill; cat of out ends when the run does.
	id2 := strings.TrimSpace(m.sh(t, `exec 3<>agent/ops/spawn && echo sleep 60 >&3 && read id <&3 && echo "$id"`))
	run2 := "agent/ops/runs/" + id2
	wait := func(state string) {
		t.Helper()
		m.sh(t, fmt.Sprintf(`i=0; until grep -q '"state":"%s"' %s/status; do sleep 0.05; i=$((i+1)); [ $i -lt 400 ] || exit 1; done`, state, run2))
	}
	m.sh(t, "echo stop > "+run2+"/ctl")
	wait("stopped")
	m.sh(t, "echo cont > "+run2+"/ctl")
	wait("running")
	if r := sh(t, m.mnt, "/bin/echo bogus > "+run2+"/ctl", nil); r.code == 0 || !strings.Contains(r.stderr, "Invalid argument") {
		t.Fatalf("/bin/echo bogus > ctl (coreutils names the errno; dash says I/O error for any): %+v", r)
	}
	if got := m.sh(t, "echo kill > "+run2+"/ctl; cat "+run2+"/out | tail -n 1"); !strings.Contains(got, `"type":"exit"`) || !strings.Contains(got, `"status":137`) {
		t.Fatalf("last record after kill: %s", got)
	}
	if r := sh(t, m.mnt, "echo kill > "+run2+"/ctl", nil); r.code == 0 {
		t.Fatalf("kill of an ended run: %+v", r)
	}
	// stdin: echo after echo is the input of a cat started through spawn,
	// and eof written to ctl ends it.
	id3 := strings.TrimSpace(m.sh(t, `exec 3<>agent/ops/spawn && echo cat >&3 && read id <&3 && echo "$id"`))
	run3 := "agent/ops/runs/" + id3
	got := m.sh(t, "echo hi > "+run3+"/stdin && /bin/echo 'there you are' > "+run3+"/stdin && echo eof > "+run3+"/ctl && cat "+run3+"/out")
	if !strings.Contains(got, `"text":"hi"`) || !strings.Contains(got, `"text":"there you are"`) || !strings.Contains(got, `"type":"exit"`) || !strings.Contains(got, `"status":0`) {
		t.Fatalf("cat fed through stdin:\n%s", got)
	}
	if r := sh(t, m.mnt, "/bin/echo late > "+run3+"/stdin", nil); r.code == 0 {
		t.Errorf("a write to the stdin of an ended run: %+v", r)
	}
	// The files are what the table says they are.
	for _, script := range []string{"echo x > " + run + "/status", "echo x > " + run + "/out", "cat " + run + "/ctl", "rm " + run + "/status", "mv " + run + "/out " + run + "/o", "mkdir " + run + "/d", "echo x > " + run + "/new"} {
		if r := sh(t, m.mnt, script, nil); r.code == 0 {
			t.Errorf("%s: not refused: %+v", script, r)
		}
	}
	if r := sh(t, m.mnt, "ls agent/ops/runs/r-none", nil); r.code == 0 || !strings.Contains(r.stderr, "No such file") {
		t.Errorf("ls of no run: %+v", r)
	}
	m.checkAudit()
}

// TestFUSERunsOtherUID: a uid granted other agents cannot reach ops's
// runs through the mount: its write to their ctl is refused and audited,
// and the run goes on.
func TestFUSERunsOtherUID(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	const nobody = 65534
	as := &syscall.Credential{Uid: nobody, Gid: nobody}
	m := startMounted(t, daemonOpts{config: fmt.Sprintf("[access.users]\n\"%d\" = [\"web-*\"]\n", nobody)})
	os.Chmod(m.dir, 0o755)
	m.sh(t, "mkdir agent/ops")
	id := strings.TrimSpace(m.sh(t, `exec 3<>agent/ops/spawn && echo sleep 60 >&3 && read id <&3 && echo "$id"`))
	ctl := m.mnt + "/agent/ops/runs/" + id + "/ctl"
	if r := sh(t, "/", "echo kill > "+ctl, as); r.code == 0 {
		t.Fatalf("another uid's kill through ctl: %+v", r)
	}
	if got := m.sh(t, "cat agent/ops/runs/"+id+"/status"); !strings.Contains(got, `"state":"running"`) {
		t.Fatalf("the run after a refused kill: %s", got)
	}
	if log := m.ox("", "ox-audit", "log", "--json").stdout; !strings.Contains(log, `"op":"fs.access"`) || !strings.Contains(log, `"uid":65534`) {
		t.Fatalf("the refusal is not on the audit log:\n%s", log)
	}
	m.sh(t, "echo kill > agent/ops/runs/"+id+"/ctl")
}

// TestFUSERunWork: a run on a host folder shows its patch (work.diff,
// the bytes of ox-work diff) and its view of the folder (work/, the run's
// changes over the folder) read-only, so that cat, grep -r and less work
// on what it did before anyone applies it; another uid is refused, and
// audited.
func TestFUSERunWork(t *testing.T) {
	t.Parallel()
	const nobody = 65534
	m := startMounted(t, daemonOpts{config: fmt.Sprintf("[access.users]\n\"%d\" = [\"web-*\"]\n", nobody)})
	repo := workRepo(t, m.dir, 0)
	pol := strings.Replace(defaultPolicy(t), "None by default.\nallow = []", "None by default.\nallow = [\""+m.dir+"/**\"]", 1)
	m.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, pol))
	fix := spawnWork(t, m.daemon, "dev", repo, workFix)
	if fix.status != 0 {
		t.Fatalf("the run on the folder: %+v", fix)
	}
	run := "agent/dev/runs/" + fix.id
	if got := m.sh(t, "ls -l "+run+" | awk 'NR>1 {print $1, $NF}'"); got != "--w------- ctl\n-r--r--r-- out\n-r--r--r-- status\ndr-xr-xr-x work\n-r--r--r-- work.diff\n" {
		t.Fatalf("ls -l %s:\n%s", run, got)
	}
	if got, want := m.sh(t, "cat "+run+"/work.diff"), m.mustOx(t, "", "ox-work", "diff", fix.id); got != want {
		t.Fatalf("cat work.diff:\n%s\nox-work diff:\n%s", got, want)
	}
	// grep -r finds what the run wrote; what it deleted is not there, what
	// it left alone is the folder's.
	if got := m.sh(t, "cd "+run+"/work && grep -r -l -e answer= -e extra= . | sort"); got != "./out/app\n./src/a.txt\n./src/c.txt\n./test.sh\n" {
		t.Errorf("grep -r in work/: %q", got)
	}
	if got := m.sh(t, "cd "+run+"/work && cat src/a.txt keep.txt && ls docs && test ! -e old.txt && test ! -e docs/y && less -F src/c.txt"); got != "answer=42\nthe run leaves this alone\nx.md\nextra=1\n" {
		t.Errorf("reading work/: %q", got)
	}
	if got := m.sh(t, "od -An -tx1 "+run+"/work/data.bin"); strings.TrimSpace(got) != "00 01 ff" {
		t.Errorf("the binary file in work/: %q", got)
	}
	for _, script := range []string{"echo x > " + run + "/work/src/a.txt", "rm " + run + "/work/keep.txt", "echo x > " + run + "/work/new", "mkdir " + run + "/work/d", "echo x > " + run + "/work.diff"} {
		if r := sh(t, m.mnt, script, nil); r.code == 0 {
			t.Errorf("%s: not refused: %+v", script, r)
		}
	}
	if st := gitIn(t, repo, "status", "--porcelain", "--ignored"); st != "" {
		t.Fatalf("the folder changed:\n%s", st)
	}
	// Another uid, not granted dev, reads neither.
	if os.Geteuid() == 0 {
		os.Chmod(m.dir, 0o755)
		as := &syscall.Credential{Uid: nobody, Gid: nobody}
		for _, f := range []string{"work.diff", "work/src/a.txt"} {
			if r := sh(t, "/", "cat "+m.mnt+"/"+run+"/"+f, as); r.code == 0 {
				t.Errorf("another uid read %s: %+v", f, r)
			}
		}
		if log := m.ox("", "ox-audit", "log", "--json").stdout; !strings.Contains(log, `"op":"fs.access"`) || !strings.Contains(log, `"uid":65534`) {
			t.Errorf("the refusal is not on the audit log:\n%s", log)
		}
	}
	// Applied: the patch stays, work/ is empty.
	m.mustOx(t, "", "ox-work", "apply", fix.id)
	if got := m.sh(t, "ls -A "+run+"/work"); got != "" {
		t.Errorf("work/ of applied work: %q", got)
	}
	m.checkAudit()
}
