package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// programRepo makes a git repository holding a program "greet" at
// version ver, asking policy (a [policy...] section of program.toml),
// and returns its path.
func programRepo(t *testing.T, dir, ver, policy string) string {
	t.Helper()
	files := map[string]string{
		"program.toml": `name = "greet"
version = "` + ver + `"
description = "Greet someone and keep the greeting."
agent = "greeter"
command = ["greet.sh", "--loud"]

[args.who]
description = "whom to greet"
required = true

[args.how]
description = "the greeting"
default = "hello"
` + policy,
		"SKILL.md":      "---\nname: greet\ndescription: Greet someone.\n---\nSay hello.\n",
		"greet.sh":      "#!/bin/sh\nset -e\nmsg=\"$ARG_HOW $ARG_WHO ($*) from $PROGRAM_NAME " + ver + " in $(pwd)\"\necho \"$msg\"\necho \"$msg\" | ox-state save greet/last >/dev/null\ncat \"$PROGRAM_DIR/lib/extra.txt\"\n",
		"lib/extra.txt": "extra file " + ver + "\n",
	}
	for name, text := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		gitIn(t, dir, "init", "-q")
	}
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "greet "+ver)
	return dir
}

// TestProgramLifecycle: a program installed from a git repository after
// the operator's yes (refused without it, and refused when it asks more
// than its agent's policy grants), run with its arguments, refused at run
// once its agent's policy shrank (by ox-program run and inside a run
// alike), upgraded, versioned by ox-commit, carried by ox-fork, removed.
func TestProgramLifecycle(t *testing.T) {
	noRace(t)
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	src := programRepo(t, filepath.Join(t.TempDir(), "greet"), "1.0", "\n[policy.state]\nwrite = [\"greet/**\"]\n")
	url := "file://" + src

	// Asking for a program the default policy does not allow: refused,
	// naming it, nothing written.
	greedy := programRepo(t, filepath.Join(t.TempDir(), "greedy"), "1.0", "\n[policy.exec]\nallow = [\"git\"]\n[policy.sandbox]\nnetwork = true\n")
	r := d.ox("", "ox-program", "install", "--yes", greedy)
	if r.code != 77 || !strings.Contains(r.stderr, `exec.allow "git"`) || !strings.Contains(r.stderr, "sandbox.network") || !strings.Contains(r.stderr, "greeter") {
		t.Fatalf("a program asking more than the policy: exit %d %s", r.code, r.stderr)
	}
	// No yes: nothing installed.
	r = d.ox("n\n", "ox-program", "install", url)
	if r.code != 1 || !strings.Contains(r.stderr, "not agreed") || !strings.Contains(r.stderr, `write = ["greet/**"]`) {
		t.Fatalf("install answered no: exit %d %s", r.code, r.stderr)
	}
	if out := d.ox("", "ox-state", "ls", "-a", "greeter"); strings.Contains(out.stdout, "programs/") {
		t.Fatalf("a refused install wrote keys:\n%s", out.stdout)
	}
	r = d.ox("y\n", "ox-program", "install", url)
	if r.code != 0 || !strings.Contains(r.stdout, `"source":"`+url+`"`) || !strings.Contains(r.stdout, `"commit":"`) {
		t.Fatalf("install: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if r := d.ox("", "ox-program", "install", "--yes", url); r.code != 1 || !strings.Contains(r.stderr, "EEXIST") {
		t.Fatalf("second install: exit %d %s", r.code, r.stderr)
	}
	if ls := d.mustOx(t, "", "ox-program", "ls", "-a", "greeter"); !strings.Contains(ls, `"name":"greet"`) || !strings.Contains(ls, `"version":"1.0"`) {
		t.Fatalf("ls: %s", ls)
	}
	if out := d.mustOx(t, "", "ox-program", "show", "-a", "greeter", "greet"); !strings.Contains(out, `"text":"Say hello.\n"`) {
		t.Fatalf("show: %s", out)
	}

	// A run: the entry with its arguments, its files beside it, in a run
	// of the agent, reaching Oxios through ox-state.
	if r := d.ox("", "ox-program", "run", "-a", "greeter", "greet"); r.code != 2 || !strings.Contains(r.stderr, "who=VALUE") {
		t.Fatalf("run without a required argument: exit %d %s", r.code, r.stderr)
	}
	run := runEnd(t, d.ox("", "ox-program", "run", "-a", "greeter", "-n", "greet", "who=ann", "extra"), "ox-program run")
	if run.status != 0 || !strings.Contains(run.out, "hello ann (--loud extra) from greet 1.0") || !strings.Contains(run.out, "extra file 1.0") {
		t.Fatalf("run: %+v", run)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "greeter", "greet/last"); !strings.HasPrefix(v, "hello ann") {
		t.Fatalf("the program's state: %q", v)
	}
	commit := d.mustOx(t, "", "ox-commit", "-a", "greeter", "-m", "greet installed")
	if !strings.Contains(commit, "programs/greet/program.toml") {
		t.Fatalf("the commit does not hold the program: %s", commit)
	}

	// The fork carries it and runs it as its own.
	d.mustOx(t, "", "ox-fork", "greeter", "greeter2")
	if ls := d.mustOx(t, "", "ox-program", "ls", "-a", "greeter2"); !strings.Contains(ls, `"name":"greet"`) {
		t.Fatalf("the fork has no program: %s", ls)
	}
	if run := runEnd(t, d.ox("", "ox-program", "run", "-a", "greeter2", "-n", "greet", "who=bob", "how=hi"), "fork run"); run.status != 0 || !strings.Contains(run.out, "hi bob") {
		t.Fatalf("the fork's run: %+v", run)
	}

	// The agent's policy shrinks: the program asks more than it grants
	// now, and is refused at run, by ox-program run and inside a run.
	pol := strings.Replace(defaultPolicy(t), "write = [\"**\"]", "write = [\"notes/**\"]", 1)
	d.mustOx(t, "", "ox-policy", "set", "-a", "greeter", writePolicy(t, pol))
	if r := d.ox("", "ox-program", "run", "-a", "greeter", "-n", "greet", "who=ann"); r.code != 77 || !strings.Contains(r.stderr, `state.write "greet/**"`) {
		t.Fatalf("run under a smaller policy: exit %d %s", r.code, r.stderr)
	}
	if run := spawnArgv(t, d, "greeter", "ox-program", "start", "greet", "who=ann"); run.status != 77 || !strings.Contains(run.out, `state.write "greet/**"`) {
		t.Fatalf("start inside a run under a smaller policy: %+v", run)
	}
	d.mustOx(t, "", "ox-policy", "set", "-a", "greeter", writePolicy(t, defaultPolicy(t)))

	// Upgrade: a new version in the repository; then nothing to do.
	programRepo(t, src, "2.0", "\n[policy.state]\nwrite = [\"greet/**\"]\n")
	if out := d.mustOx(t, "", "ox-program", "upgrade", "-a", "greeter", "greet"); !strings.Contains(out, "upgraded greet from 1.0 to 2.0") {
		t.Fatalf("upgrade: %s", out)
	}
	if run := runEnd(t, d.ox("", "ox-program", "run", "-a", "greeter", "-n", "greet", "who=ann"), "run 2.0"); !strings.Contains(run.out, "extra file 2.0") {
		t.Fatalf("the upgraded run: %+v", run)
	}
	if out := d.mustOx(t, "", "ox-program", "upgrade", "-a", "greeter", "greet"); !strings.Contains(out, "up to date") {
		t.Fatalf("second upgrade: %s", out)
	}
	// An upgrade asking for more needs a yes again.
	programRepo(t, src, "3.0", "\n[policy.state]\nwrite = [\"greet/**\", \"more/**\"]\n")
	if r := d.ox("", "ox-program", "upgrade", "-a", "greeter", "greet"); r.code != 1 || !strings.Contains(r.stderr, "no answer") {
		t.Fatalf("upgrade asking more without a yes: exit %d %s", r.code, r.stderr)
	}
	if out := d.mustOx(t, "", "ox-program", "ls", "-a", "greeter"); !strings.Contains(out, `"version":"2.0"`) {
		t.Fatalf("a refused upgrade changed the program: %s", out)
	}

	// Removal: the program's keys go; the history keeps it.
	if out := d.mustOx(t, "", "ox-program", "rm", "-a", "greeter", "greet"); !strings.Contains(out, `"deleted":true`) {
		t.Fatalf("rm: %s", out)
	}
	if out := d.mustOx(t, "", "ox-state", "ls", "-a", "greeter", "programs/"); strings.TrimSpace(out) != "" {
		t.Fatalf("rm left keys: %s", out)
	}
	if r := d.ox("", "ox-program", "run", "-a", "greeter", "greet", "who=x"); r.code != 1 || !strings.Contains(r.stderr, "no program greet") {
		t.Fatalf("run after rm: exit %d %s", r.code, r.stderr)
	}
	verifyAudit(t, d)
}

// TestProgramMonitor: the shipped monitor keeps its command's output and
// status, remembers a new anomaly once, and is scheduled as a job.
func TestProgramMonitor(t *testing.T) {
	noRace(t)
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	d.mustOx(t, "", "ox-program", "install", "--yes", "monitor")
	watch := []string{"run", "-a", "monitor", "-n", "monitor", "name=disk", `cmd=echo "/dev/sda1 95% /"`, "alert= 9[0-9]% "}
	for i, want := range []string{"anomaly: output matches", "anomaly persists"} {
		run := runEnd(t, d.ox("", "ox-program", watch...), "monitor")
		if run.status != 1 || !strings.Contains(run.out, want) {
			t.Fatalf("run %d: %+v", i, run)
		}
	}
	mems := d.mustOx(t, "", "ox-recall", "-a", "monitor", "-t", "anomaly", "disk")
	if n := strings.Count(mems, `"type":"memory"`); n != 1 || !strings.Contains(mems, "sda1 95%") {
		t.Fatalf("want one anomaly remembered, got %d:\n%s", n, mems)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "monitor", "monitor/disk/last"); v != "/dev/sda1 95% /\n" {
		t.Fatalf("last output %q", v)
	}
	ok := runEnd(t, d.ox("", "ox-program", "run", "-a", "monitor", "-n", "monitor", "name=disk", "cmd=echo /dev/sda1 40% /", "alert= 9[0-9]% "), "monitor ok")
	if ok.status != 0 || !strings.Contains(ok.out, "monitor disk: ok") {
		t.Fatalf("ok run: %+v", ok)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "monitor", "monitor/disk/status"); !strings.Contains(v, " ok") {
		t.Fatalf("status %q", v)
	}
	// On its schedule: a job, which runs the program as a run does.
	job := d.mustOx(t, "", "ox-program", "run", "-a", "monitor", "--schedule", "monitor", "name=fail", "cmd=false")
	if !strings.Contains(job, `"name":"monitor.monitor"`) || !strings.Contains(job, `"schedule":"*/5 * * * *"`) {
		t.Fatalf("schedule: %s", job)
	}
	fired := d.mustOx(t, "", "ox-schedule", "run", "-a", "monitor", "monitor.monitor")
	id := records(t, fired)[0]["id"].(string)
	if out := d.ox("", "ox-wait", id); out.code != 1 {
		t.Fatalf("the job's run: exit %d %s %s", out.code, out.stdout, out.stderr)
	}
	if v := d.mustOx(t, "", "ox-state", "load", "-a", "monitor", "monitor/fail/status"); !strings.Contains(v, "anomaly: exit status 1") {
		t.Fatalf("the job's status %q", v)
	}
	// Removing the program removes its job.
	d.mustOx(t, "", "ox-program", "rm", "-a", "monitor", "monitor")
	if out := d.mustOx(t, "", "ox-schedule", "ls", "-a", "monitor"); strings.Contains(out, "monitor.monitor") {
		t.Fatalf("the job outlived its program: %s", out)
	}
	verifyAudit(t, d)
}

// TestProgramGitSync: the shipped git-sync mirrors an agent's committed
// history to a bare repository, one git commit each, then only the
// commits made since.
func TestProgramGitSync(t *testing.T) {
	noRace(t)
	t.Parallel()
	d := startDaemon(t, daemonOpts{})
	remote := filepath.Join(d.dir, "mirror.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", "--shared=0777", remote).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.Chmod(remote, 0o777)
	pol := strings.Replace(defaultPolicy(t), "read_write = []", "read_write = [\""+remote+"\"]", 1)
	d.mustOx(t, "", "ox-policy", "set", "-a", "ops", writePolicy(t, pol))
	for i, v := range []string{"one", "two"} {
		d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/"+v, v)
		d.mustOx(t, "", "ox-commit", "-a", "ops", "-m", "commit "+string(rune('1'+i)))
	}
	d.mustOx(t, "", "ox-state", "rm", "-a", "ops", "notes/one")
	d.mustOx(t, "", "ox-commit", "-a", "ops", "-m", "commit 3")
	if r := d.ox("", "ox-program", "install", "--yes", "git-sync"); r.code != 2 || !strings.Contains(r.stderr, "no agent") {
		t.Fatalf("git-sync names no agent: exit %d %s", r.code, r.stderr)
	}
	d.mustOx(t, "", "ox-program", "install", "-a", "ops", "--yes", "git-sync")
	run := runEnd(t, d.ox("", "ox-program", "run", "-a", "ops", "-n", "git-sync", "remote="+remote), "git-sync")
	if run.status != 0 || !strings.Contains(run.out, "mirrored 3 commits") {
		t.Fatalf("git-sync: %+v", run)
	}
	log := gitIn(t, remote, "log", "--format=%s|%(trailers:key=Oxios-Commit,valueonly,separator=)", "main")
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "commit 3|") || !strings.HasPrefix(lines[2], "commit 1|") {
		t.Fatalf("the mirror's log:\n%s", log)
	}
	if files := gitIn(t, remote, "ls-tree", "-r", "--name-only", "main"); files != "agents/ops/state/notes/two\n" {
		t.Fatalf("the mirror's files:\n%s", files)
	}
	if files := gitIn(t, remote, "ls-tree", "-r", "--name-only", "main~2"); files != "agents/ops/state/notes/one\n" {
		t.Fatalf("the first commit's files:\n%s", files)
	}
	// Later commits only.
	d.mustOx(t, "", "ox-state", "save", "-a", "ops", "notes/three", "3")
	d.mustOx(t, "", "ox-commit", "-a", "ops", "-m", "commit 4")
	run = runEnd(t, d.ox("", "ox-program", "run", "-a", "ops", "-n", "git-sync", "remote="+remote), "git-sync again")
	if run.status != 0 || !strings.Contains(run.out, "mirrored 1 commits") {
		t.Fatalf("git-sync again: %+v", run)
	}
	if v := gitIn(t, remote, "show", "main:agents/ops/state/notes/three"); v != "3" {
		t.Fatalf("notes/three in the mirror: %q", v)
	}
	if run := runEnd(t, d.ox("", "ox-program", "run", "-a", "ops", "-n", "git-sync", "remote="+remote), "git-sync up to date"); run.status != 0 || !strings.Contains(run.out, "up to date") {
		t.Fatalf("git-sync up to date: %+v", run)
	}
	verifyAudit(t, d)
}

// TestProgramCodeReview: the shipped code-review reviews the changes of
// a repository taken with --work: the model (scripted) gets the diff, and
// its findings land in the agent's state and inbox; the folder is left
// as it was.
func TestProgramCodeReview(t *testing.T) {
	noRace(t)
	t.Parallel()
	finding := "src/a.txt:1: bug: answer=43 is off by one, the test wants 42"
	d, s := llmDaemon(t, "", llmtest.Turn{Content: finding}, llmtest.Turn{Content: "Haiku about disks."})
	repo := workRepo(t, d.dir, 0)
	if err := os.WriteFile(filepath.Join(repo, "src", "a.txt"), []byte("answer=43\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(repo, "src", "new.txt"), []byte("brand new\n"), 0o644)
	pol := strings.Replace(defaultPolicy(t), "None by default.\nallow = []", "None by default.\nallow = [\""+d.dir+"/**\"]", 1)
	d.mustOx(t, "", "ox-policy", "set", "-a", "reviewer", writePolicy(t, pol))
	d.mustOx(t, "", "ox-program", "install", "--yes", "code-review")
	run := runEnd(t, d.ox("", "ox-program", "run", "-a", "reviewer", "-n", "--work", repo, "code-review"), "code-review")
	if run.status != 0 || !strings.Contains(run.out, finding) {
		t.Fatalf("code-review: %+v", run)
	}
	reqs := s.Requests()
	if len(reqs) != 1 || !strings.Contains(reqs[0].Text(), "+answer=43") || !strings.Contains(reqs[0].Text(), "+brand new") || !strings.Contains(reqs[0].Text(), "FILE:LINE: SEVERITY") {
		t.Fatalf("the model was not given the diff and the skill:\n%v", reqs)
	}
	review := d.mustOx(t, "", "ox-state", "load", "-a", "reviewer", "reviews/"+run.id+".md")
	if !strings.Contains(review, finding) || !strings.Contains(review, "2 files changed") {
		t.Fatalf("reviews/%s.md: %s", run.id, review)
	}
	if msgs := d.mustOx(t, "", "ox-msg", "ls", "-a", "reviewer"); !strings.Contains(msgs, "code-review "+run.id) || !strings.Contains(msgs, "off by one") {
		t.Fatalf("the inbox: %s", msgs)
	}
	if st := gitIn(t, repo, "status", "--porcelain"); st != " M src/a.txt\n?? src/new.txt\n" {
		t.Fatalf("the folder changed: %q", st)
	}

	// A program whose entry is an LLM task: an LLM run of the task with
	// its arguments, its SKILL.md as the system prompt.
	dir := filepath.Join(t.TempDir(), "poet")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "program.toml"), []byte("name = \"poet\"\nversion = \"1\"\ndescription = \"Write a poem\"\ntask = \"Write a {{form}} about {{topic}}.\"\n[args.form]\ndescription = \"the form\"\ndefault = \"haiku\"\n[args.topic]\ndescription = \"what about\"\nrequired = true\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: poet\ndescription: Write poems.\n---\nRhyme nothing; count syllables.\n"), 0o644)
	d.mustOx(t, "", "ox-program", "install", "-a", "reviewer", "--yes", dir)
	poem := runEnd(t, d.ox("", "ox-program", "run", "-a", "reviewer", "-n", "poet", "topic=disks", "in", "five", "lines"), "poet")
	if poem.status != 0 {
		t.Fatalf("poet: %+v", poem)
	}
	reqs = s.Requests()
	if last := reqs[len(reqs)-1].Text(); !strings.Contains(last, "Rhyme nothing; count syllables.") || !strings.Contains(last, "Write a haiku about disks.\n\nin five lines") {
		t.Fatalf("the task program's request:\n%s", last)
	}
	verifyAudit(t, d)
}

// calcRepo makes a project whose test wants answer=42 in calc.txt, which
// holds answer=41.
func calcRepo(t *testing.T, dir string) string {
	t.Helper()
	repo := filepath.Join(dir, "calc")
	os.MkdirAll(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "calc.txt"), []byte("answer=41\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "test.sh"), []byte("#!/bin/sh\ngrep -qx answer=42 calc.txt && echo PASS || { echo FAIL: want answer=42, have $(cat calc.txt); exit 1; }\n"), 0o755)
	gitIn(t, repo, "init", "-q")
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "commit", "-qm", "a failing test")
	return repo
}

// ouroborosDaemon is a daemon whose scripted model plays turns, with
// agent dev allowed to work on its folder and ouroboros installed.
func ouroborosDaemon(t *testing.T, turns ...llmtest.Turn) (*daemon, *llmtest.Server, string) {
	t.Helper()
	d, s := llmDaemon(t, "", turns...)
	repo := calcRepo(t, d.dir)
	pol := strings.Replace(defaultPolicy(t), "None by default.\nallow = []", "None by default.\nallow = [\""+d.dir+"/**\"]", 1)
	d.mustOx(t, "", "ox-policy", "set", "-a", "dev", writePolicy(t, pol))
	d.mustOx(t, "", "ox-program", "install", "-a", "dev", "--yes", "ouroboros")
	return d, s, repo
}

func seedTurn(goal string, checks ...string) llmtest.Turn {
	q := make([]string, len(checks))
	for i, c := range checks {
		q[i] = strconv.Quote(c)
	}
	return llmtest.Turn{Content: `{"goal": ` + strconv.Quote(goal) + `, "constraints": ["change calc.txt only"], "checks": [` + strings.Join(q, ", ") + `]}`, PromptTokens: 900, CompletionTokens: 100}
}

func changeTurn(answer string) llmtest.Turn {
	return llmtest.Turn{Content: "```json\n{\"files\": [{\"path\": \"calc.txt\", \"content\": \"answer=" + answer + "\\n\"}], \"note\": \"answer " + answer + "\"}\n```", PromptTokens: 900, CompletionTokens: 100}
}

// TestProgramOuroboros: a scripted model that needs two evolutions of its
// spec to pass a real check (the project's test.sh): the interview's
// answers come from stdin, three generations are executed and evaluated
// in copy-on-write workspaces of the folder, the seed is committed at each
// and ox-commit log seeds/ shows it, and the passing change waits in the
// last run's work while the folder is untouched.
func TestProgramOuroboros(t *testing.T) {
	noRace(t)
	t.Parallel()
	d, s, repo := ouroborosDaemon(t,
		llmtest.Turn{Content: `{"questions": ["Which value must calc.txt hold?"]}`},
		seedTurn("make the project's test pass", "./test.sh"),
		changeTurn("40"),
		seedTurn("make test.sh pass: it wants calc.txt to hold answer=42", "./test.sh"),
		changeTurn("43"),
		seedTurn("calc.txt holds exactly the line answer=42", "./test.sh", "grep -qx answer=42 calc.txt"),
		changeTurn("42"),
	)
	r := d.ox("forty-two\n", "ox-program", "run", "-a", "dev", "--work", repo, "ouroboros", "name=calc", "make the test pass")
	run := runEnd(t, r, "ouroboros")
	if run.status != 0 || !strings.Contains(run.out, "generation 3 passed its checks") || !strings.Contains(run.out, "answers from stdin") {
		t.Fatalf("ouroboros: %+v\n%s", run, r.stderr)
	}
	reqs := s.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d model calls, want 7", len(reqs))
	}
	if !strings.Contains(reqs[1].Text(), "Which value must calc.txt hold? -> forty-two") || !strings.Contains(reqs[0].Text(), "answer=41") {
		t.Fatalf("the interview's answer did not reach the seed, or the project the interview:\n%s\n%s", reqs[0].Text(), reqs[1].Text())
	}
	if !strings.Contains(reqs[3].Text(), "FAIL: want answer=42, have answer=40") {
		t.Fatalf("the evolve step was not given the evaluation:\n%s", reqs[3].Text())
	}
	seed := d.mustOx(t, "", "ox-state", "load", "-a", "dev", "seeds/calc.md")
	if !strings.Contains(seed, "(generation 3)") || !strings.Contains(seed, "`grep -qx answer=42 calc.txt`") || !strings.Contains(seed, "generation 2 failed ./test.sh") {
		t.Fatalf("seeds/calc.md:\n%s", seed)
	}
	// The evolution, committed.
	var gens []string
	for _, c := range records(t, d.mustOx(t, "", "ox-commit", "log", "-a", "dev", "seeds/")) {
		gens = append(gens, c["message"].(string))
	}
	want := []string{"ouroboros calc: passed at generation 3", "ouroboros calc: seed generation 3: generation 2 failed ./test.sh", "ouroboros calc: seed generation 2: generation 1 failed ./test.sh", "ouroboros calc: seed generation 1"}
	if strings.Join(gens, "|") != strings.Join(want, "|") {
		t.Fatalf("ox-commit log seeds/:\n%s\nwant\n%s", strings.Join(gens, "\n"), strings.Join(want, "\n"))
	}
	// Each generation's evaluation is a record; the passing one's run
	// holds the change, pending.
	var passed string
	for i, want := range []string{"false", "false", "true"} {
		ev := d.mustOx(t, "", "ox-state", "load", "-a", "dev", "seeds/calc/evals/"+strconv.Itoa(i+1)+".json")
		if !strings.Contains(ev, `"passed": `+want) {
			t.Fatalf("evaluation %d: %s", i+1, ev)
		}
		if want == "true" {
			passed = records(t, strings.ReplaceAll(ev, "\n", ""))[0]["run"].(string)
		}
	}
	if diff := d.mustOx(t, "", "ox-work", "diff", passed); !strings.Contains(diff, "+answer=42") {
		t.Fatalf("the passing run's work:\n%s", diff)
	}
	if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
		t.Fatalf("the folder changed: %q", st)
	}
	// Three generations on the audit log: the loop's runs, each audited
	// as started by the loop's run: seven of the model, three on the
	// folder (whose work waits, with the loop's own).
	c := d.client(t)
	spawned := 0
	err := c.AuditLog(context.Background(), proto.AuditLogArgs{Op: proto.OpRunSpawn}, func(line json.RawMessage) error {
		var e auditRec
		if json.Unmarshal(line, &e) == nil && e.Actor.Run == run.id && e.Result == "ok" {
			spawned++
		}
		return nil
	})
	if err != nil || spawned != 10 {
		t.Errorf("%d runs audited as the loop's (%v), want 10", spawned, err)
	}
	if n := strings.Count(d.mustOx(t, "", "ox-work", "ls", "-a", "dev"), `"type":"work"`); n != 4 {
		t.Errorf("%d runs with pending work, want 4 (the loop and three generations)", n)
	}
	verifyAudit(t, d)
}

// TestProgramOuroborosTerminal: run from a terminal (a pty, by script(1)),
// the interview's question is asked there and the line typed is its
// answer, which reaches the seed step.
func TestProgramOuroborosTerminal(t *testing.T) {
	noRace(t)
	t.Parallel()
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("no script(1) to give ox-program a terminal")
	}
	d, s, repo := ouroborosDaemon(t,
		llmtest.Turn{Content: `{"questions": ["Which value must calc.txt hold?", "Anything else?"]}`},
		seedTurn("calc.txt holds answer=42", "./test.sh"),
		changeTurn("42"),
	)
	line := strings.Join([]string{bin("ox-program"), "run", "-a", "dev", "--work", repo, "ouroboros", "name=calc", "'make the test pass'"}, " ")
	// The answers typed: the first question's, then an empty line.
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	cmd.Env = append(os.Environ(), "OXIOS_SOCKET="+d.sock)
	cmd.Stdin = strings.NewReader("forty-two\n\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ox-program on a terminal: %v\n%s", err, out)
	}
	for _, want := range []string{"question 1/2: Which value must calc.txt hold?", "question 2/2: Anything else?", "answers from the terminal", "generation 1 passed its checks"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("ox-program on a terminal does not say %q:\n%s", want, out)
		}
	}
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	if txt := reqs[1].Text(); !strings.Contains(txt, "Which value must calc.txt hold? -> forty-two") || strings.Contains(txt, "Anything else? ->") {
		t.Fatalf("the answers typed did not reach the seed step as typed:\n%s", txt)
	}
	verifyAudit(t, d)
}

// TestProgramOuroborosBudget: the agent's budget ends mid-loop: the loop
// stops cleanly, its seed committed and its status recorded.
func TestProgramOuroborosBudget(t *testing.T) {
	noRace(t)
	t.Parallel()
	d, _, repo := ouroborosDaemon(t,
		llmtest.Turn{Content: `{"questions": []}`, PromptTokens: 900, CompletionTokens: 100},
		seedTurn("make the project's test pass", "./test.sh"),
		changeTurn("40"),
		seedTurn("never reached", "./test.sh"),
		changeTurn("42"),
	)
	d.mustOx(t, "", "ox-budget", "set", "-a", "dev", "--tokens", "2500")
	r := d.ox("", "ox-program", "run", "-a", "dev", "-n", "--work", repo, "ouroboros", "name=calc", "make the test pass")
	run := runEnd(t, r, "ouroboros")
	if run.status != 1 || !strings.Contains(run.out, "the budget ended") || !strings.Contains(run.out, `"status":"budget"`) {
		t.Fatalf("ouroboros over budget: %+v\n%s", run, r.stderr)
	}
	if st := d.mustOx(t, "", "ox-state", "load", "-a", "dev", "seeds/calc/status.json"); !strings.Contains(st, `"status":"budget"`) {
		t.Fatalf("status: %s", st)
	}
	log := d.mustOx(t, "", "ox-commit", "log", "-a", "dev", "seeds/")
	if !strings.Contains(log, "seed generation 1") || !strings.Contains(log, "ouroboros calc: budget at generation 1") || strings.Contains(log, "generation 2") {
		t.Fatalf("ox-commit log seeds/:\n%s", log)
	}
	verifyAudit(t, d)
}
