package docs_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/llm/llmtest"
)

// An example is one command of README.md or of a man page's EXAMPLES, as a
// reader would paste it.
type example struct {
	where string // FILE:LINE
	cmd   string
	want  int    // the exit status the text promises (0 unless it says "exit N")
	skip  string // why it is not run here
	// follow marks a command that runs until interrupted (tail -f, -f
	// flags, a refreshing display): it is run for a moment and stopped.
	follow bool
}

// shellWords are the first words of lines that are commands; a block whose
// first line starts with anything else (a TOML table, a JSON object, a
// file tree, a table of paths) is not a shell example.
var shellWords = map[string]bool{
	"export": true, "cd": true, "mkdir": true, "echo": true, "df": true, "grep": true,
	"tail": true, "cat": true, "sed": true, "printf": true, "git": true, "journalctl": true,
	"npx": true, "make": true, "systemctl": true, "if": true, "date": true, "ls": true,
	"jq": true, "seq": true, "for": true, "while": true, "run=$(ox-spawn": true, "uptime": true,
	"sudo": true, "crontab": true, "tar": true, "find": true, "rm": true, "watch": true,
	"printenv": true, "env": true, "id": true, "head": true, "wc": true, "kill": true,
	"curl": true, "ssh": true, "test": true, "[": true, "mv": true, "cp": true, "touch": true,
}

// skips are examples that cannot run inside `make test`, each with why. A
// key matches an example whose command starts with it.
var skips = map[string]string{
	"make ":      "a make target: make test is running it",
	"systemctl ": "needs systemd as PID 1",
	"sudo ":      "needs sudo",
	"vim ":       "an interactive editor",
	"crontab ":   "changes the user's crontab",
	"oxiosd ":    "starts a second daemon on the default paths",
	"ssh ":       "needs another host",
	"watch ":     "an interactive display",
	"npx -y ":    "fetches a package from the network",
	// README's MCP example: the policy it sets starts the filesystem server
	// with npx, which fetches the package from the registry first.
	"ox-spawn -a files ": "its policy starts an MCP server with npx (a download)",
	// ox-spawn(1): the stand-in model answers prose, which the schema
	// refuses (TestAgentSchema in tests/integration runs --schema).
	"ox-spawn -a ops --schema ":    "the stand-in model answers prose, not JSON of the schema",
	"ox-spawn -a ops -n --schema ": "the stand-in model answers prose, not JSON of the schema",
	// oxiosd(8) starts a private daemon in the line before, skipped above.
	"OXIOS_SOCKET=/tmp/ox/": "talks to the daemon the skipped line before starts",
	// ox-audit(1) checks a head the skipped ssh line before fetched.
	`ox-audit show $(jq .seq <<<"$h")`: "checks the head an ssh line fetched",
	// Paths on another machine.
	"ox-audit export > /mnt/offsite":      "writes to a backup host's mount",
	"ox-audit verify --file /mnt/offsite": "reads from a backup host's mount",
	"ox-program run ouroboros":            "needs a model that answers in JSON: the stand-in answers a sentence (tests/integration's TestProgramOuroboros scripts one)",
	"ox-state load -a builder seeds/":     "reads the seed the skipped ouroboros run writes",
}

// skipSections are README sections whose examples need more than one
// machine can give a test.
var skipSections = map[string]string{
	"A fleet of hosts": "needs three hosts running NATS",
}

// interactive are commands of an example line that only make sense on a
// terminal; the line is skipped when it holds one.
var interactive = regexp.MustCompile(`(^|[;&|]\s*)(vim|less|top)\b`)

var (
	notFound  = regexp.MustCompile(`bash: line \d+: (\S+): command not found`)
	exitRe    = regexp.MustCompile(`\bexit(?:s| status)? (\d+)\b`)
	commentRe = regexp.MustCompile(`\s+#\s.*$`)
)

// parseExamples reads the shell examples of a Markdown text: indented
// blocks (README.md) or, with quoted, the "> " quoted indented lines that
// the man pages use in EXAMPLES.
func parseExamples(file, md string, manPage bool) []example {
	lines := strings.Split(md, "\n")
	inExamples := !manPage
	var blocks [][]int // line indexes of each block
	var cur []int
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, cur)
			cur = nil
		}
	}
	section := ""
	for i, l := range lines {
		if !manPage && strings.HasPrefix(l, "## ") {
			flush()
			section = strings.TrimPrefix(l, "## ")
			continue
		}
		if skipSections[section] != "" {
			continue
		}
		if manPage && strings.HasPrefix(l, "# ") {
			flush()
			inExamples = strings.TrimSpace(l) == "# EXAMPLES"
			continue
		}
		if !inExamples {
			continue
		}
		body, ok := codeLine(l, manPage)
		switch {
		case ok && (len(cur) > 0 || strings.TrimSpace(body) != ""):
			cur = append(cur, i)
		case strings.TrimSpace(strings.TrimPrefix(l, ">")) == "" && len(cur) > 0:
			// A blank line inside a block keeps it open.
		default:
			flush()
		}
	}
	flush()

	var out []example
	for _, b := range blocks {
		first, _ := codeLine(lines[b[0]], manPage)
		word := strings.Fields(first + " x")[0]
		if strings.HasPrefix(first, "$ ") {
			word = "$"
		}
		if !shellWords[word] && !strings.HasPrefix(word, "ox") && word != "$" && word != "#" {
			continue // not shell: a config file, a record, a tree
		}
		prompts := strings.HasPrefix(first, "$ ")
		for j := 0; j < len(b); j++ {
			text, _ := codeLine(lines[b[j]], manPage)
			where := fmt.Sprintf("%s:%d", file, b[j]+1)
			if prompts {
				if !strings.HasPrefix(text, "$ ") {
					continue // output shown after a prompt
				}
				text = strings.TrimPrefix(text, "$ ")
			}
			if strings.TrimSpace(text) == "" || strings.HasPrefix(strings.TrimSpace(text), "#") {
				continue
			}
			// A here-document or a continued line takes the lines after it.
			if m := regexp.MustCompile(`<<-?'?(\w+)'?`).FindStringSubmatch(text); m != nil {
				for j+1 < len(b) {
					j++
					more, _ := codeLine(lines[b[j]], manPage)
					text += "\n" + more
					if strings.TrimSpace(more) == m[1] {
						break
					}
				}
			}
			for strings.HasSuffix(strings.TrimSpace(commentRe.ReplaceAllString(text, "")), "\\") && j+1 < len(b) {
				j++
				more, _ := codeLine(lines[b[j]], manPage)
				text += "\n" + more
			}
			out = append(out, newExample(where, text))
		}
	}
	return out
}

// codeLine returns the code of an example line, if it is one.
func codeLine(l string, manPage bool) (string, bool) {
	if manPage {
		rest, ok := strings.CutPrefix(l, ">     ")
		return rest, ok
	}
	rest, ok := strings.CutPrefix(l, "    ")
	return rest, ok
}

func newExample(where, text string) example {
	e := example{where: where, cmd: text}
	firstLine, _, _ := strings.Cut(text, "\n")
	if m := commentRe.FindString(firstLine); m != "" {
		if n := exitRe.FindStringSubmatch(m); n != nil {
			e.want, _ = strconv.Atoi(n[1])
		}
	}
	for prefix, why := range skips {
		if strings.HasPrefix(text, prefix) {
			e.skip = why
		}
	}
	code := commentRe.ReplaceAllString(firstLine, "")
	if interactive.MatchString(code) {
		e.skip = "an interactive command"
	}
	if regexp.MustCompile(`\bssh\b`).MatchString(code) {
		e.skip = "needs another host"
	}
	// Streams that end only when stopped: -f flags, ox-events, ox-top, a
	// served MCP endpoint.
	if regexp.MustCompile(`(^|\s)(-f|--follow)(\s|$)|^(ox-top|ox-events)\b|^ox-mcp .*--http`).MatchString(code) {
		e.follow = true
	}
	return e
}

// TestExamplesRun runs every example of README.md and of the man pages'
// EXAMPLES, as pasted, in order, against a real oxiosd with its mount and
// a stand-in model endpoint, in a fresh folder that holds the files the
// examples name. An example fails when its exit status is not the one its
// text promises (0, or the "exit N" of its comment).
func TestExamplesRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the examples use the mount and the sandbox of runs: run as root")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("the examples pipe into jq: install jq")
	}
	bin := built(t)
	// Installed commands are world-executable: a run's sandbox uid execs
	// ox-agent, a schedule's run ox-commit.
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	w := t.TempDir()
	work := filepath.Join(w, "work")
	ox := filepath.Join(work, ".oxios")
	for _, d := range []string{ox, filepath.Join(w, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A checkout's bin/, as `make build` leaves it.
	if err := os.Symlink(bin, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	tools := wasmToolsDir(t, w)
	llm := llmtest.New(llmtest.Turn{Content: "The disk holds old logs under /var/log.", Repeat: -1})
	t.Cleanup(llm.Close)
	cfg := filepath.Join(w, "oxios.toml")
	writeFile(t, cfg, fmt.Sprintf("[llm]\nbase_url = %q\nmodel = \"m\"\n\n[runs]\ntools = %q\n", llm.URL, tools))
	fixtures(t, work)

	sock := filepath.Join(ox, "oxiosd.sock")
	mnt := filepath.Join(ox, "mnt")
	data := filepath.Join(ox, "data")
	env := append(os.Environ(),
		"HOME="+filepath.Join(w, "home"),
		"PATH="+bin+":"+os.Getenv("PATH"),
		"OXIOS_SOCKET="+sock,
		"OXIOS_CONFIG="+cfg,
		"XDG_RUNTIME_DIR="+w,
		"TZ=UTC",
		// ox-agent by hand reads its endpoint from the environment.
		"OPENAI_BASE_URL="+llm.URL,
	)
	env = slicesDeleteEnv(env, "OXIOS_AGENT")
	// Each page gets a fresh daemon, as if it were the reader's first.
	// README.md is a walkthrough: its blocks run in order on an empty
	// daemon, each on what the ones before left, as a reader pastes them
	// (issue 47). A man page's examples stand alone: its daemon holds what
	// a reader's agent ops would, a few keys and a memory.
	var stop func(show bool)
	pageFailed := false
	t.Cleanup(func() {
		if stop != nil {
			stop(pageFailed)
		}
	})
	fresh := func(page string) {
		if stop != nil {
			stop(pageFailed)
		}
		pageFailed = false
		os.RemoveAll(data)
		stop = startExampleDaemon(t, bin, env, w, cfg, data, sock, mnt)
		if page == "README.md" {
			return
		}
		seed := `set -e
ox-state save -a ops notes/today.md "deploy at 10" >/dev/null
df -h 2>/dev/null | ox-state save -a ops disk/latest >/dev/null
ox-remember -a ops "the backup failed at 02:00: the disk was full" >/dev/null
`
		c := exec.Command("bash", "-c", seed)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: seeding the daemon: %v\n%s", page, err, out)
		}
	}

	subst := strings.NewReplacer(
		"/run/oxios/mnt", mnt,
		"/var/lib/oxios", data,
		"npx @modelcontextprotocol/inspector", "mcp-inspector",
		// "a local llama-server": the stand-in plays it.
		"http://localhost:8080/v1", llm.URL,
	)
	var all []example
	add := func(rel string, man bool) {
		all = append(all, parseExamples(rel, read(t, rel), man)...)
	}
	add("README.md", false)
	pages, _ := filepath.Glob(filepath.Join(root, "man", "*.md"))
	for _, p := range pages {
		add(filepath.Join("man", filepath.Base(p)), true)
	}
	if len(all) < 100 {
		t.Fatalf("found %d examples in README.md and man/*.md: the parser lost them", len(all))
	}

	state := filepath.Join(w, "shell.env")
	cwd := filepath.Join(w, "shell.cwd")
	ran, skipped := 0, 0
	file := ""
	for _, e := range all {
		// Each page is read on its own: its examples start in the
		// reader's folder with a fresh shell (the daemon keeps what the
		// pages before did).
		if f, _, _ := strings.Cut(e.where, ":"); f != file {
			file = f
			os.Remove(state)
			writeFile(t, cwd, work)
			fresh(f)
		}
		if strings.Contains(subst.Replace(e.cmd), "mcp-inspector") {
			if _, err := exec.LookPath("mcp-inspector"); err != nil && e.skip == "" {
				e.skip = "no MCP Inspector (npm install -g @modelcontextprotocol/inspector)"
			}
		}
		if e.skip != "" {
			skipped++
			t.Logf("%s: skipped (%s): %s", e.where, e.skip, e.cmd)
			continue
		}
		ran++
		start := time.Now()
		rc, out := runExample(t, env, state, cwd, subst.Replace(e.cmd), e.follow)
		// A tool the reader may lack (socat, ...) is not the example's
		// fault; a missing ox-* command is.
		if m := notFound.FindStringSubmatch(out); rc == 127 && m != nil && !strings.HasPrefix(m[1], "ox") {
			skipped++
			t.Logf("%s: skipped (%s is not installed): %s", e.where, m[1], e.cmd)
			continue
		}
		if e.follow && (rc == 124 || rc == 130 || rc == 143) {
			rc = 0 // stopped by us while it followed
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Logf("%s: took %v: %s", e.where, took.Round(time.Millisecond), e.cmd)
		}
		if rc != e.want {
			pageFailed = true
			t.Errorf("%s: exit %d, want %d:\n    %s\n%s", e.where, rc, e.want, e.cmd, indent(tailString(out, 1500)))
		}
	}
	t.Logf("%d examples run, %d skipped", ran, skipped)
}

// startExampleDaemon starts oxiosd with its mount and waits until both
// answer; the function it returns stops it and waits for the mount to go.
func startExampleDaemon(t *testing.T, bin string, env []string, w, cfg, data, sock, mnt string) func(show bool) {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(w, "oxiosd.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	d := exec.Command(filepath.Join(bin, "oxiosd"), "--config", cfg, "--data", data, "--socket", sock, "--mount", mnt)
	d.Env = env
	d.Stdout, d.Stderr = logf, logf
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Wait() }()
	stop := func(show bool) {
		d.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			d.Process.Kill()
			<-done
			exec.Command("umount", "-l", mnt).Run()
		}
		logf.Close()
		if show {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("oxiosd's log:\n%s", tailString(string(b), 4000))
		}
	}
	waitReady(t, sock, mnt)
	return stop
}

// runExample runs one example in bash as the reader's shell would: the
// variables and the folder of the examples before it carry over, standard
// input is empty (not a terminal), pipefail is on.
func runExample(t *testing.T, env []string, state, cwd, cmd string, follow bool) (int, string) {
	t.Helper()
	limit := 20 * time.Second
	if follow {
		limit = 2 * time.Second
	}
	script := fmt.Sprintf(`set -a -o pipefail
[ -f %[1]q ] && . %[1]q 2>/dev/null
cd "$(cat %[2]q)" || exit 125
%[3]s
__rc=$?
export -p > %[1]q
pwd > %[2]q
exit $__rc
`, state, cwd, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", script)
	c.Env = env
	c.Stdin = nil
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGINT) }
	c.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if ctx.Err() != nil {
		if follow {
			return 124, out.String()
		}
		return -1, out.String() + fmt.Sprintf("\n(killed after %v)", limit)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// fixtures are the files the examples name as the reader's own.
func fixtures(t *testing.T, work string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "README.md"), string(readme))
	writeFile(t, filepath.Join(work, "data.json"), `{"items":[{"name":"a","size":3}],"ok":true}`+"\n")
	writeFile(t, filepath.Join(work, "backup.sh"), "#!/bin/sh\necho backed up\n")
	writeFile(t, filepath.Join(work, "incident.txt"), "the backup failed at 02:00: disk full on /var\n")
	writeFile(t, filepath.Join(work, "oxios.toml.new"), "[limits]\nmax_value = \"8MiB\"\n")
	os.MkdirAll(filepath.Join(work, "skills", "pg-vacuum"), 0o755)
	writeFile(t, filepath.Join(work, "skills", "pg-vacuum", "SKILL.md"), "---\nname: pg-vacuum\ndescription: Vacuum a bloated PostgreSQL table.\n---\nRun VACUUM (VERBOSE) on it.\n")
	os.Chmod(filepath.Join(work, "backup.sh"), 0o755)
	// The reader's folder is a git checkout with a change (git diff |
	// ox-spawn ...) and holds a backup.
	for _, args := range [][]string{
		{"tar", "czf", "backup.tgz", "README.md", "data.json"},
		{"git", "init", "-q"},
		{"git", "add", "README.md", "data.json"},
		{"git", "-c", "user.name=reader", "-c", "user.email=reader@example.org", "commit", "-qm", "start"},
	} {
		c := exec.Command(args[0], args[1:]...)
		c.Dir = work
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	writeFile(t, filepath.Join(work, "data.json"), `{"items":[{"name":"a","size":4}],"ok":true}`+"\n")
}

// wasmToolsDir builds the WASM tools with their manifests into a folder.
func wasmToolsDir(t *testing.T, w string) string {
	t.Helper()
	dir := filepath.Join(w, "tools")
	cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "./tools/jsonq", "./tools/textstat")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the WASM tools: %v\n%s", err, out)
	}
	for _, n := range []string{"jsonq", "textstat"} {
		os.Rename(filepath.Join(dir, n), filepath.Join(dir, n+".wasm"))
		writeFile(t, filepath.Join(dir, n+".json"), read(t, filepath.Join("share", "tools", n+".json")))
	}
	return dir
}

// waitReady waits until the daemon answers on its socket and its mount is
// up.
func waitReady(t *testing.T, sock, mnt string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
			if _, err := os.Stat(filepath.Join(mnt, "audit", "head")); err == nil {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("oxiosd did not answer on %s with its mount at %s within 30 s", sock, mnt)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func slicesDeleteEnv(env []string, name string) []string {
	out := env[:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

func indent(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		b.WriteString("    | " + sc.Text() + "\n")
	}
	return b.String()
}
