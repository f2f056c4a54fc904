package docs_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// completionScript writes what `ox completion SHELL CMD` prints (what
// make completions writes and make install installs) to a temporary file
// and returns its path.
func completionScript(t *testing.T, shell, cmd string) string {
	t.Helper()
	dir := built(t)
	out, err := exec.Command(filepath.Join(dir, "ox"), "completion", shell, cmd).Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("ox completion %s %s: %v", shell, cmd, err)
	}
	path := filepath.Join(t.TempDir(), shell+"-"+cmd)
	writeFile(t, path, string(out))
	return path
}

// completer completes command lines in a shell the way it does at a TAB,
// with the built commands first on PATH and a daemon's socket.
type completer struct {
	t    *testing.T
	env  []string
	sock string
}

func newCompleter(t *testing.T, sock string) *completer {
	env := append(os.Environ(), "PATH="+built(t)+string(os.PathListSeparator)+os.Getenv("PATH"), "OXIOS_SOCKET="+sock)
	env = slicesDeleteEnv(env, "OXIOS_AGENT")
	return &completer{t: t, env: env, sock: sock}
}

// words splits a line as the shells do for these tests: at spaces, with
// an empty word last when the line ends in one (the cursor after it).
func words(line string) []string {
	w := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		w = append(w, "")
	}
	return w
}

// bash sources the command's script and calls its function with
// COMP_WORDS and COMP_CWORD set as bash sets them, then prints COMPREPLY.
func (c *completer) bash(w ...string) []string {
	c.t.Helper()
	script := completionScript(c.t, "bash", w[0])
	prog := `source "$1" || exit 1
fn=$(complete -p "$2" | sed -n 's/.*-F \([^ ]*\) .*/\1/p')
[[ -n $fn ]] || { echo "no completion function for $2" >&2; exit 1; }
shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
"$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
	return c.run("bash", append([]string{"-c", prog, "bash", script}, w...)...)
}

// zsh runs the command's completion function (the script as autoloaded)
// with words and CURRENT set and compadd and _files standing in for the
// completion system's, printing what it is given.
func (c *completer) zsh(w ...string) []string {
	c.t.Helper()
	script := completionScript(c.t, "zsh", w[0])
	prog := `compadd() {
  local arr
  while (( $# )); do
    case $1 in -a) arr=$2; shift 2 ;; -d) shift 2 ;; *) shift ;; esac
  done
  print -rl -- "${(@P)arr}"
}
_files() { print -r -- :files }
script=$1; shift
words=("$@"); CURRENT=$#
source $script`
	return c.run("zsh", append([]string{"-f", "-c", prog, "zsh", script}, w...)...)
}

// fish asks fish what it completes for the line, the script sourced.
func (c *completer) fish(w ...string) []string {
	c.t.Helper()
	script := completionScript(c.t, "fish", w[0])
	line := strings.Join(w, " ")
	out := c.run("fish", "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, line)
	for i, l := range out {
		out[i], _, _ = strings.Cut(l, "\t")
	}
	return out
}

func (c *completer) run(shell string, args ...string) []string {
	c.t.Helper()
	cmd := exec.Command(shell, args...)
	cmd.Env = c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		c.t.Fatalf("%s %q: %v\n%s%s", shell, args, err, out, stderr.String())
	}
	var lines []string
	for l := range strings.Lines(string(out)) {
		if l = strings.TrimSuffix(l, "\n"); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// startDaemon starts oxiosd without a mount and waits for its socket.
func startDaemon(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "oxc-") // short: a socket path has a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	var log bytes.Buffer
	d := exec.Command(filepath.Join(built(t), "oxiosd"), "--config", "", "--data", filepath.Join(dir, "data"), "--socket", sock, "--no-mount")
	d.Stdout, d.Stderr = &log, &log
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return sock
		}
	}
	t.Fatalf("oxiosd did not answer on %s within 30 s:\n%s", sock, log.String())
	return ""
}

// TestCompletions completes, in bash, every subcommand and every flag
// --help lists of every command (before the subcommand too), and real
// values from a daemon: agents, keys, runs, revisions, skills, personas; then the same values in zsh
// and fish when they are installed.
func TestCompletions(t *testing.T) {
	dir := built(t)
	sock := startDaemon(t)
	c := newCompleter(t, sock)
	for _, kv := range [][]string{{"web", "config/port", "8080"}, {"web", "notes/today.md", "hi"}, {"ops", "x", "1"}, {"ops", "skills/triage/SKILL.md", "a skill"}, {"web", "notes/two words*.md", "x"}} {
		cmd := exec.Command(filepath.Join(dir, "ox-state"), "save", "-a", kv[0], kv[1], kv[2])
		cmd.Env = c.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ox-state save: %v\n%s", err, out)
		}
	}
	tag := exec.Command(filepath.Join(dir, "ox-commit"), "-a", "web", "-m", "first", "--tag", "v1")
	tag.Env = c.env
	if out, err := tag.CombinedOutput(); err != nil {
		t.Fatalf("ox-commit --tag v1: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(dir, "ox-spawn"), "-a", "web", "-d", "--", "sleep", "60")
	cmd.Env = c.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ox-spawn -d: %v", err)
	}
	run, _, _ := strings.Cut(strings.TrimPrefix(string(out), `{"type":"run","id":"`), `"`)
	if run == "" || strings.Contains(run, "{") {
		t.Fatalf("no run id in %s", out)
	}
	t.Cleanup(func() {
		k := exec.Command(filepath.Join(dir, "ox-kill"), "-s", "KILL", run)
		k.Env = c.env
		k.Run()
	})

	want := func(t *testing.T, got []string, line string, values ...string) {
		t.Helper()
		for _, v := range values {
			if !slices.Contains(got, v) {
				t.Errorf("completing %q offers %q, not %q", line, got, v)
			}
		}
	}

	t.Run("tree", func(t *testing.T) {
		for _, bin := range append(binaries(t), "ox") {
			path := filepath.Join(dir, bin)
			top := helpOf(t, path)
			subs := subcommands(top)
			if bin == "ox" {
				subs = []string{"state", "spawn", "agents", "help"}
			}
			want(t, c.bash(words(bin+" ")...), bin+" ", subs...)
			if bin == "ox" {
				continue
			}
			want(t, c.bash(words(bin+" -")...), bin+" -", longFlags(top)...)
			for _, sub := range subs {
				want(t, c.bash(words(bin+" "+sub+" --")...), bin+" "+sub+" --", longFlags(helpOf(t, path, sub))...)
			}
		}
	})

	t.Run("bash", func(t *testing.T) {
		for _, tc := range []struct {
			words []string
			want  []string
			only  bool
		}{
			{words("ox-state load -a "), []string{"web", "ops"}, false},
			{words("ox-state load -a w"), []string{"web"}, true},
			{[]string{"ox-state", "ls", "--agent", "=", "w"}, []string{"web"}, true},
			{words("ox-state -a web load "), []string{"config/port", "notes/today.md", "notes/two words*.md"}, true},
			{words("ox-state rm k -a web c"), []string{"config/port"}, true}, // flags after the words count
			{words("ox-state load c -a web "), nil, true},
			{words("ox-agents show w"), []string{"web"}, true},
			{words("ox-kill "), []string{run}, false},
			{words("ox-commit show v"), []string{"v1"}, true},
			{words("ox-commit diff -a web HEAD "), []string{"HEAD", "v1"}, false},
			{words("ox-fork -r H"), []string{"HEAD"}, true},
			{words("ox-skill show -a ops "), []string{"triage"}, true},
			{words("ox-spawn -a ops -P rev"), []string{"reviewer"}, true},
			{words("ox state load -a web n"), []string{"notes/today.md", "notes/two words*.md"}, true}, // a space, a '*': one value each
			{words("ox sta"), []string{"state", "status"}, true},
			{words("ox help sta"), []string{"state", "status"}, true},
			{words("ox state l"), []string{"load", "ls"}, true},
		} {
			line := strings.Join(tc.words, " ")
			got := c.bash(tc.words...)
			want(t, got, line, tc.want...)
			if tc.only && len(got) != len(tc.want) {
				t.Errorf("completing %q offers %q, want only %q", line, got, tc.want)
			}
		}
		// A value completed after "--agent=": bash split the word at '='.
		want(t, c.bash("ox-state", "ls", "--agent", "=", ""), "ox-state ls --agent=", "web", "ops")
		// A flag that takes a file: the shell's file names.
		if got := c.bash(words("ox-state ls --socket " + filepath.Dir(sock) + "/s")...); !slices.Contains(got, sock) {
			t.Errorf("completing --socket %s/s offers %q, not %s", filepath.Dir(sock), got, sock)
		}
	})

	for _, shell := range []string{"zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			if _, err := exec.LookPath(shell); err != nil {
				t.Skipf("%s is not installed", shell)
			}
			complete := c.zsh
			if shell == "fish" {
				complete = c.fish
			}
			for _, line := range []string{"ox-state load -a w", "ox-state -a web load n", "ox state load -a web c", "ox-state l"} {
				w := words(line)
				got := complete(w...)
				var exp []string
				switch line {
				case "ox-state load -a w":
					exp = []string{"web"}
				case "ox-state -a web load n":
					exp = []string{"notes/today.md"}
				case "ox state load -a web c":
					exp = []string{"config/port"}
				case "ox-state l":
					exp = []string{"load", "ls"}
				}
				want(t, got, line, exp...)
			}
			want(t, complete(words("ox-state load --")...), "ox-state load --", "--agent", "--socket", "--json", "--help")
		})
	}
}

// optionRe finds the long flags of the OPTIONS sections of a --help: a
// line's first word.
var optionRe = regexp.MustCompile(`(?m)^\s+--([a-z][a-z0-9-]*)`)

// longFlags returns the long flags a --help lists, --name each.
func longFlags(help string) []string {
	var flags []string
	for _, m := range optionRe.FindAllStringSubmatch(help, -1) {
		if f := "--" + m[1]; !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	return flags
}
