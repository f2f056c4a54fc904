package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// jsonLines decodes each line of out into a map.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", l, err)
		}
		recs = append(recs, m)
	}
	return recs
}

// TestFlagsAfterArgs runs every command with its flags after its
// arguments, the way git and kubectl users type them, and checks that the
// flags took effect (not that the command merely exited 0).
func TestFlagsAfterArgs(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	mustOK := func(r result, what string) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
		}
		return r
	}

	// ox-remember: the text is "note about", the kind semantic.
	r := mustOK(d.ox("", "ox-remember", "note about", "-a", "ops", "--kind", "semantic", "-t", "x"), "ox-remember")
	mem := jsonLines(t, r.stdout)[0]
	if mem["kind"] != "semantic" {
		t.Fatalf("ox-remember with flags last stored %v", mem)
	}
	d.ox("", "ox-remember", "-a", "ops", "cats sleep all day")
	d.ox("", "ox-remember", "-a", "ops", "dogs bark at night")

	// ox-recall: -k 1 limits, and is not part of the query.
	r = mustOK(d.ox("", "ox-recall", "note about", "-a", "ops", "-k", "1"), "ox-recall")
	if recs := jsonLines(t, r.stdout); len(recs) != 1 || recs[0]["text"] != "note about" {
		t.Fatalf("ox-recall QUERY -k 1 gave %d records:\n%s", len(recs), r.stdout)
	}

	// ox-state: every subcommand, the agent given last.
	mustOK(d.ox("", "ox-state", "save", "notes/today.md", "hello", "-a", "ops"), "ox-state save")
	r = mustOK(d.ox("", "ox-state", "load", "notes/today.md", "-a", "ops"), "ox-state load")
	if r.stdout != "hello" {
		t.Fatalf("ox-state load KEY -a ops = %q", r.stdout)
	}
	// Before the subcommand (issue 47): ox-state -a web load config/port.
	r = mustOK(d.ox("", "ox-state", "-a", "ops", "load", "notes/today.md"), "ox-state -a ops load")
	if r.stdout != "hello" {
		t.Fatalf("ox-state -a ops load KEY = %q", r.stdout)
	}
	r = mustOK(d.ox("", "ox-state", "--json", "-a", "ops", "ls"), "ox-state --json -a ops ls")
	if !strings.Contains(r.stdout, `"key":"notes/today.md"`) {
		t.Fatalf("ox-state --json -a ops ls:\n%s", r.stdout)
	}
	r = mustOK(d.ox("", "ox-state", "ls", "notes", "-a", "ops", "--json"), "ox-state ls")
	if !strings.Contains(r.stdout, `"notes/today.md"`) {
		t.Fatalf("ox-state ls PREFIX -a ops:\n%s", r.stdout)
	}
	// "--" ends the flags: a key that looks like a flag.
	mustOK(d.ox("", "ox-state", "save", "-a", "ops", "--", "-weird-key", "v"), "ox-state save -- -weird-key")
	r = mustOK(d.ox("", "ox-state", "rm", "-a", "ops", "--", "-weird-key"), "ox-state rm -- -weird-key")
	if !strings.Contains(r.stdout, `"-weird-key"`) {
		t.Fatalf("ox-state rm -- -weird-key:\n%s", r.stdout)
	}
	mustOK(d.ox("", "ox-state", "rm", "notes/today.md", "-a", "ops"), "ox-state rm")

	// ox-spawn: "--" keeps the command's own flags its own.
	r = mustOK(d.ox("", "ox-spawn", "-a", "ops", "-n", "--", "echo", "--flag", "-a", "x"), "ox-spawn --")
	if !strings.Contains(r.stdout, "--flag -a x") {
		t.Fatalf("ox-spawn -- echo --flag -a x:\n%s", r.stdout)
	}
	// A detached run, the flags after the command.
	r = mustOK(d.ox("", "ox-spawn", "-n", "-a", "ops", "-d", "--", "sleep", "60"), "ox-spawn -d")
	run := jsonLines(t, r.stdout)[0]["id"].(string)
	r = mustOK(d.ox("", "ox-ps", "-a", "ops", "--json"), "ox-ps")
	if !strings.Contains(r.stdout, run) {
		t.Fatalf("ox-ps does not list %s:\n%s", run, r.stdout)
	}
	r = mustOK(d.ox("", "ox-kill", run, "-s", "KILL"), "ox-kill RUN -s KILL")
	r = d.ox("", "ox-wait", run, "--json")
	if !strings.Contains(r.stdout, `"signal":"KILL"`) && !strings.Contains(r.stdout, `"signal":9`) && !strings.Contains(r.stdout, "KILL") {
		t.Fatalf("ox-wait RUN --json after ox-kill RUN -s KILL (exit %d):\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = d.ox("", "ox-attach", run, "--json")
	if r.code == 2 {
		t.Fatalf("ox-attach RUN --json: usage error: %s", r.stderr)
	}

	// ox-exec: the command's flags after "--" are its own.
	r = mustOK(d.ox("", "ox-exec", "-a", "ops", "--", "echo", "-n", "x"), "ox-exec --")
	if r.stdout != "x" {
		t.Fatalf("ox-exec -- echo -n x:\n%s", r.stdout)
	}
	r = mustOK(d.ox("", "ox-exec", "echo", "hi", "-a", "ops"), "ox-exec COMMAND -a")
	if r.stdout != "hi\n" {
		t.Fatalf("ox-exec echo hi -a ops:\n%s", r.stdout)
	}

	// ox-commit: commit, then log with -n after the revision.
	mustOK(d.ox("", "ox-state", "save", "a", "1", "-a", "ops"), "save a")
	mustOK(d.ox("", "ox-commit", "-a", "ops", "-m", "one"), "ox-commit")
	mustOK(d.ox("", "ox-state", "save", "a", "2", "-a", "ops"), "save a")
	mustOK(d.ox("", "ox-commit", "-a", "ops", "-m", "two"), "ox-commit")
	r = mustOK(d.ox("", "ox-commit", "log", "HEAD", "-n", "1", "-a", "ops"), "ox-commit log REV -n 1")
	if recs := jsonLines(t, r.stdout); len(recs) != 1 {
		t.Fatalf("ox-commit log HEAD -n 1 gave %d records", len(recs))
	}
	r = mustOK(d.ox("", "ox-commit", "diff", "HEAD~1", "-a", "ops", "--patch"), "ox-commit diff REV --patch")
	if !strings.Contains(r.stdout, "+2") {
		t.Fatalf("ox-commit diff HEAD~1 --patch:\n%s", r.stdout)
	}

	// ox-policy: check OP ARG with the agent last.
	r = mustOK(d.ox("", "ox-policy", "check", "state.save", "notes/x", "-a", "ops"), "ox-policy check")
	if !strings.Contains(r.stdout, `"allowed":true`) {
		t.Fatalf("ox-policy check OP ARG -a ops:\n%s", r.stdout)
	}

	// ox-schedule: add with the flags after the task, rm NAME -a.
	// After "--" the flags are the command's: no --name was given.
	if r = d.ox("", "ox-schedule", "add", "-a", "ops", "--", "true", "--name", "j1", "--cron", "@daily"); r.code == 0 {
		t.Fatalf("ox-schedule add -- true --name j1 took --name as its own:\n%s", r.stdout)
	}
	mustOK(d.ox("", "ox-schedule", "add", "--name", "j2", "-a", "ops", "--cron", "@daily", "--", "true"), "ox-schedule add --name ... -- true")
	r = mustOK(d.ox("", "ox-schedule", "rm", "j2", "-a", "ops"), "ox-schedule rm NAME -a")

	// ox-forget: an id, then the agent.
	id := mem["id"].(string)
	r = mustOK(d.ox("", "ox-forget", id, "-a", "ops"), "ox-forget ID -a")
	if !strings.Contains(r.stdout, id) {
		t.Fatalf("ox-forget ID -a ops:\n%s", r.stdout)
	}

	// ox-audit: get SEQ --json.
	r = mustOK(d.ox("", "ox-audit", "show", "1", "--json"), "ox-audit show SEQ --json")
	if !strings.Contains(r.stdout, `"seq":1`) {
		t.Fatalf("ox-audit show 1 --json:\n%s", r.stdout)
	}
}

// clientCommands are the ox-* commands that talk to the daemon, each with
// arguments that make a valid request of it.
var clientCommands = [][]string{
	{"ox-attach", "rnope"},
	{"ox-audit", "log"},
	{"ox-budget", "show", "-a", "ops"},
	{"ox-commit", "log"},
	{"ox-events", "-n", "1"},
	{"ox-exec", "-a", "ops", "--", "true"},
	{"ox-forget", "-a", "ops", "--tag", "x"},
	{"ox-kill", "rnope"},
	{"ox-policy", "show", "-a", "ops"},
	{"ox-ps"},
	{"ox-recall", "-a", "ops", "x"},
	{"ox-remember", "-a", "ops", "x"},
	{"ox-schedule", "ls"},
	{"ox-spawn", "-n", "-a", "ops", "--", "true"},
	{"ox-state", "ls", "-a", "ops"},
	{"ox-top", "-n", "1"},
	{"ox-wait", "rnope"},
}

// TestExitCodes asserts each exit code of the table (0 ok, 1 failed, 2
// usage, 69 unreachable, 77 denied; 78 oxiosd's bad config) for the
// commands that can give it.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	want := func(t *testing.T, r result, code int, stderr string, what string) {
		t.Helper()
		if r.code != code || !strings.Contains(r.stderr, stderr) {
			t.Errorf("%s: exit %d, want %d (stderr containing %q)\nstdout: %s\nstderr: %s", what, r.code, code, stderr, r.stdout, r.stderr)
		}
	}

	t.Run("69", func(t *testing.T) {
		env := []string{"OXIOS_SOCKET=" + filepath.Join(shortTempDir(t), "none.sock")}
		for _, c := range clientCommands {
			want(t, run(t, env, "", c[0], c[1:]...), 69, "is oxiosd running?", strings.Join(c, " "))
		}
	})

	d := startDaemon(t, daemonOpts{})
	t.Run("2", func(t *testing.T) {
		// An unknown flag, after the arguments too, for every command.
		// (Before a "--": after it, a flag is the command's own.)
		for _, c := range append(clientCommands, []string{"ox-status"}, []string{"oxiosd"}, []string{"ox-agent", "task"}) {
			args := append([]string{}, c[1:]...)
			if i := slices.Index(args, "--"); i >= 0 {
				args = slices.Insert(args, i, "--no-such-flag")
			} else {
				args = append(args, "--no-such-flag")
			}
			want(t, d.ox("", c[0], args...), 2, "no-such-flag", c[0]+" "+strings.Join(args, " "))
		}
		// A command with subcommands, run with none or a wrong one.
		for _, name := range []string{"ox-audit", "ox-budget", "ox-policy", "ox-schedule", "ox-state"} {
			want(t, d.ox("", name), 2, "give a command", name)
			want(t, d.ox("", name, "bogus"), 2, "unknown command bogus ("+name+" help lists them)", name+" bogus")
		}
		// A required flag left out: one line naming it, not the help.
		r := d.ox("", "ox-schedule", "add", "-a", "ops", "--cron", "@daily", "--", "true")
		want(t, r, 2, "--name is missing", "ox-schedule add without --name")
		if strings.Contains(r.stdout+r.stderr, "USAGE") {
			t.Errorf("ox-schedule add without --name printed the help:\n%s%s", r.stdout, r.stderr)
		}
		want(t, d.ox("", "ox-kill", "-s", "BOGUS", "rnope"), 2, "unknown signal", "ox-kill -s BOGUS")
		want(t, d.ox("", "ox-events", "--type", "["), 2, "not a glob", "ox-events --type [")
		want(t, d.ox("", "ox-audit", "log", "--op", "["), 2, "not a glob", "ox-audit log --op [")
		want(t, d.ox("", "ox-state", "load"), 2, "no agent", "ox-state load with no agent")
		want(t, d.ox("", "ox-state", "ls", "-a", "../x"), 2, "agent", "ox-state ls -a ../x")
		// "/" once panicked (exit 2 with a stack trace).
		r = d.ox("", "ox-state", "ls", "-a", "ops", "/")
		want(t, r, 2, "absolute", "ox-state ls -a ops /")
		if strings.Contains(r.stderr, "panic") {
			t.Errorf("ox-state ls /: %s", r.stderr)
		}
	})

	t.Run("0 and 1", func(t *testing.T) {
		want(t, d.ox("", "ox-state", "save", "-a", "ops", "k", "v"), 0, "", "ox-state save")
		want(t, d.ox("", "ox-state", "load", "-a", "ops", "nope"), 1, "ENOENT", "ox-state load of a missing key")
		want(t, d.ox("", "ox-kill", "rnope"), 1, "no run", "ox-kill of no run")
		want(t, d.ox("", "ox-wait", "rnope"), 1, "no run", "ox-wait of no run")
		want(t, d.ox("", "ox-spawn", "-n", "-a", "ops", "--", "false"), 1, "", "ox-spawn of a failing command")
		want(t, d.ox("", "ox-audit", "show", "999999"), 1, "ENOENT", "ox-audit show of no entry")
		want(t, d.ox("", "ox-schedule", "rm", "nojob"), 1, "ENOENT", "ox-schedule rm of no job")
		// An LLM job with no endpoint would fail at every firing.
		want(t, d.ox("", "ox-schedule", "add", "-a", "ops", "--name", "llm", "--cron", "@daily", "tidy up"), 1, "ENOEXEC", "ox-schedule add of an LLM job without [llm]")
	})

	t.Run("77", func(t *testing.T) {
		want(t, d.ox("", "ox-exec", "-a", "ops", "--", "rm", "-rf", "/tmp/x"), 77, "EPERM", "ox-exec of a binary the policy does not allow")
		r := d.ox("", "ox-policy", "check", "-a", "ops", "exec", "rm")
		want(t, r, 77, "", "ox-policy check of a denied exec")
	})

	// The followers: when the daemon goes away they exit 1 saying why, so
	// a log shipper tells it from the 0 of an interrupt.
	t.Run("followers", func(t *testing.T) {
		d := startDaemon(t, daemonOpts{})
		type follower struct {
			name string
			cmd  *exec.Cmd
			out  *syncBuffer
		}
		var fs []follower
		for _, c := range [][]string{{"ox-audit", "tail", "-f"}, {"ox-events"}} {
			cmd := exec.Command(bin(c[0]), c[1:]...)
			cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			fs = append(fs, follower{strings.Join(c, " "), cmd, out})
		}
		// Both are following once an event reaches them; a save made
		// before a follower subscribed does not, so save until both saw one.
		deadline := time.Now().Add(30 * time.Second)
		for _, f := range fs {
			for !strings.Contains(f.out.String(), "ops") && time.Now().Before(deadline) {
				d.ox("", "ox-state", "save", "-a", "ops", "k", "v")
				time.Sleep(100 * time.Millisecond)
			}
			if !strings.Contains(f.out.String(), "ops") {
				t.Fatalf("%s never showed a save:\n%s", f.name, f.out.String())
			}
		}
		d.stop()
		for _, f := range fs {
			err := f.cmd.Wait()
			code := f.cmd.ProcessState.ExitCode()
			if code != 1 || !strings.Contains(f.out.String(), "daemon") {
				t.Errorf("%s when the daemon stopped: exit %d (%v), want 1 saying why:\n%s", f.name, code, err, f.out.String())
			}
		}
	})

	t.Run("78", func(t *testing.T) {
		dir := shortTempDir(t)
		for name, conf := range map[string]string{
			"syntax":    "[runs\n",
			"log_level": "log_level = \"loud\"\n",
		} {
			cf := filepath.Join(dir, name+".toml")
			os.WriteFile(cf, []byte(conf), 0o600)
			r := run(t, nil, "", "oxiosd", "--config", cf, "--data", filepath.Join(dir, "data"), "--socket", filepath.Join(dir, "s.sock"), "--no-mount")
			want(t, r, 78, cf, "oxiosd with a config error ("+name+")")
		}
		r := run(t, nil, "", "oxiosd", "--config", filepath.Join(dir, "none.toml"), "--data", filepath.Join(dir, "data"), "--socket", filepath.Join(dir, "s.sock"), "--no-mount")
		want(t, r, 78, "none.toml", "oxiosd --config of a missing file")
		// The shipped units do not restart it into a loop.
		for _, unit := range []string{"../../contrib/systemd/oxiosd.service", "../../contrib/systemd/user/oxiosd.service"} {
			b, err := os.ReadFile(unit)
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`(?m)^RestartPreventExitStatus=.*\b78\b`).Match(b) {
				t.Errorf("%s: no RestartPreventExitStatus with 78", unit)
			}
		}
	})
}

// TestPipesOfRecords feeds one command's records to the next: the runs of
// ox-ps to ox-kill and ox-wait, the keys of ox-state ls to ox-state rm.
func TestPipesOfRecords(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	a := spawnDetached(t, d, "ops", "sleep", "60")
	b := spawnDetached(t, d, "ops", "sleep", "60")
	ps := d.ox("", "ox-ps", "-a", "ops")
	if r := d.ox(ps.stdout, "ox-kill", "-s", "KILL"); r.code != 0 || !strings.Contains(r.stdout, a.ID) || !strings.Contains(r.stdout, b.ID) {
		t.Fatalf("ox-ps | ox-kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := d.ox(ps.stdout, "ox-wait"); r.code != 137 || strings.Count(r.stdout, `"type":"exit"`) != 2 {
		t.Fatalf("ox-ps | ox-wait: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Bare ids work too. An empty pipe is nothing to do (exit 0, as
	// xargs -r); no operand and no pipe (/dev/null, cron's stdin) is a
	// usage error.
	if r := d.ox(a.ID+"\n", "ox-wait"); r.code != 137 {
		t.Fatalf("echo RUN | ox-wait: exit %d %s", r.code, r.stderr)
	}
	for _, c := range [][]string{{"ox-kill"}, {"ox-wait"}, {"ox-state", "rm", "-a", "ops"}, {"ox-forget", "-a", "ops"}} {
		if r := d.ox("", c[0], c[1:]...); r.code != 0 || r.stdout != "" {
			t.Errorf("%v with an empty pipe: exit %d, stdout %q", c, r.code, r.stdout)
		}
		if r := d.ox(noStdin, c[0], c[1:]...); r.code != 2 {
			t.Errorf("%v with /dev/null for stdin: exit %d, want 2 (usage)", c, r.code)
		}
	}

	for _, k := range []string{"tmp/a", "tmp/b", "keep"} {
		d.ox("", "ox-state", "save", "-a", "ops", k, "v")
	}
	ls := d.ox("", "ox-state", "ls", "-a", "ops", "tmp")
	if r := d.ox(ls.stdout, "ox-state", "rm", "-a", "ops"); r.code != 0 || strings.Count(r.stdout, `"deleted":true`) != 2 {
		t.Fatalf("ox-state ls | ox-state rm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := d.ox("", "ox-state", "ls", "-a", "ops"); strings.Contains(r.stdout, "tmp/") || !strings.Contains(r.stdout, "keep") {
		t.Fatalf("after the pipe:\n%s", r.stdout)
	}
	// Records of another agent are not deleted from this one.
	d.ox("", "ox-state", "save", "-a", "web", "keep", "v")
	web := d.ox("", "ox-state", "ls", "-a", "web")
	if r := d.ox(web.stdout, "ox-state", "rm", "-a", "ops"); r.code != 2 || !strings.Contains(r.stderr, `agent "web"`) {
		t.Fatalf("records of web piped to ox-state rm -a ops: exit %d %s", r.code, r.stderr)
	}

	// ox-commit: a no-op off a terminal is the record and no stderr; -q
	// is silent either way.
	d.ox("", "ox-commit", "-q")
	if r := d.ox("", "ox-commit"); r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, `"message":"nothing to commit"`) {
		t.Fatalf("ox-commit with nothing to commit: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	d.ox("", "ox-state", "save", "-a", "ops", "new", "v")
	if r := d.ox("", "ox-commit", "-q", "-m", "x"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Fatalf("ox-commit -q: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := d.ox("", "ox-commit", "log", "-n", "1"); !strings.Contains(r.stdout, `"message":"x`) {
		t.Fatalf("ox-commit -q did not commit:\n%s", r.stdout)
	}
}

// TestStatusAsksTheDaemon: ox-status checks the config the daemon runs with
// (not the client's default), does not pass another daemon's mount off as
// this one's, and says when the policies folder does not exist.
func TestStatusAsksTheDaemon(t *testing.T) {
	t.Parallel()
	dir := shortTempDir(t)
	nopol := filepath.Join(dir, "no-policies")
	d := startDaemon(t, daemonOpts{config: "policies = \"" + nopol + "\"\n[runs]\nmax_concurrent = 4\n"})
	r := d.ox("", "ox-status")
	checks := map[string]map[string]any{}
	for _, rec := range jsonLines(t, r.stdout) {
		checks[rec["check"].(string)] = rec
	}
	cf := filepath.Join(d.dir, "oxios.toml")
	if c := checks["config"]; c["ok"] != true || !strings.Contains(c["text"].(string), cf) || !strings.Contains(c["text"].(string), "the daemon's") {
		t.Errorf("config check of a daemon running with %s: %v", cf, c)
	}
	if c := checks["policies"]; c["ok"] != true || !strings.Contains(c["text"].(string), nopol+" does not exist") {
		t.Errorf("policies check of a folder that does not exist: %v", c)
	}
	// No daemon: the mount is not checked (one at the default place may
	// be another daemon's), and the exit is 69 (EX_UNAVAILABLE), as for
	// every command.
	r = run(t, []string{"OXIOS_SOCKET=" + filepath.Join(dir, "none.sock")}, "", "ox-status", "--config", "", "--timeout", "1s")
	if r.code != 69 || !strings.Contains(r.stdout, `"check":"mount","ok":false`) || !strings.Contains(r.stdout, "not checked") {
		t.Errorf("ox-status without a daemon: exit %d\n%s", r.code, r.stdout)
	}
}
