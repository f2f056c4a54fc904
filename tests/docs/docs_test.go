// Package docs_test keeps the documentation true: every binary has a man
// page, the committed man pages are what their Markdown sources render to,
// every flag and environment variable a binary's --help prints is
// documented, the completions offer every subcommand and flag and real
// values in bash, zsh and fish, the shipped config is valid and complete,
// and the systemd units verify cleanly.
//
// These tests build the binaries; TestExamplesRun also runs every example
// of README.md and of the man pages against a real daemon with its mount.
package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cpuguy83/go-md2man/v2/md2man"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/tests/testbin"
)

// root is the repository's top folder; go test runs in tests/docs.
var root = func() string {
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return r
}()

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// binaries lists the commands: every cmd/* folder with a main.go.
func binaries(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join(root, "cmd", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) == 0 {
		t.Fatal("no cmd/*/main.go")
	}
	var bins []string
	for _, m := range mains {
		bins = append(bins, filepath.Base(filepath.Dir(m)))
	}
	return bins
}

// manPage returns the Markdown source of bin's man page, relative to root.
func manPage(t *testing.T, bin string) string {
	t.Helper()
	for _, sec := range []string{"1", "8"} {
		rel := filepath.Join("man", bin+"."+sec+".md")
		if _, err := os.Stat(filepath.Join(root, rel)); err == nil {
			return rel
		}
	}
	t.Fatalf("%s has no man page: want man/%s.1.md (a command) or man/%[1]s.8.md (a daemon)", bin, bin)
	return ""
}

func TestEveryCommandHasManPage(t *testing.T) {
	for _, bin := range binaries(t) {
		src := manPage(t, bin)
		if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(src, ".md"))); err != nil {
			t.Errorf("%s: %s is not rendered (run make man)", bin, src)
		}
	}
}

var sections = []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "FILES",
	"ENVIRONMENT", "EXIT STATUS", "EXAMPLES", "SEE ALSO"}

func TestManPagesUpToDate(t *testing.T) {
	srcs, err := filepath.Glob(filepath.Join(root, "man", "*.md"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no man/*.md: %v", err)
	}
	for _, src := range srcs {
		rel, _ := filepath.Rel(root, src)
		md := read(t, rel)
		for _, s := range sections {
			if !regexp.MustCompile(`(?m)^# ` + s + `$`).MatchString(md) {
				t.Errorf("%s: no %q section", rel, s)
			}
		}
		// What `make man` does: go-md2man -in X.md -out X, at the version
		// go.mod pins.
		want := md2man.Render([]byte(md))
		out := strings.TrimSuffix(rel, ".md")
		got, err := os.ReadFile(filepath.Join(root, out))
		if err != nil {
			t.Errorf("%s: %v (run make man)", out, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what %s renders to: run make man and commit the result", out, rel)
		}
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// built builds every command once into a temporary folder, as make build
// does; or, with OXIOS_TEST_BIN, a folder where make test built them once
// for these tests and tests/integration, links them there.
func built(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oxios-docs-test-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		if pre := os.Getenv(testbin.Env); pre != "" {
			buildErr = testbin.Link(pre, dir, nil)
			return
		}
		cmd := exec.Command("go", "build", "-tags", "urfave_cli_no_docs", "-o", dir+string(filepath.Separator), "./cmd/...")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = &buildError{err, out}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string {
	return "go build ./cmd/...: " + e.err.Error() + "\n" + string(e.out)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	longFlagRe = regexp.MustCompile(`(?:^|[\s,\[])--([a-z][a-z0-9-]*)`)
	envRe      = regexp.MustCompile(`\[\$([A-Z][A-Z0-9_]*)(?:, \$[A-Z][A-Z0-9_]*)*\]`)
	envAllRe   = regexp.MustCompile(`\$([A-Z][A-Z0-9_]*)`)
)

// helpOf runs bin with args and --help and returns what it printed.
func helpOf(t *testing.T, path string, args ...string) string {
	t.Helper()
	cmd := exec.Command(path, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s --help: %v\n%s", filepath.Base(path), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// subcommands parses the COMMANDS: section of urfave/cli's help.
func subcommands(help string) []string {
	var cmds []string
	in := false
	for line := range strings.Lines(help) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "COMMANDS:"):
			in = true
		case in && (line == "" || !strings.HasPrefix(line, " ")):
			in = false
		case in:
			f := strings.Fields(line)
			if len(f) > 0 {
				name := strings.TrimSuffix(f[0], ",")
				if name != "help" && name != "h" {
					cmds = append(cmds, name)
				}
			}
		}
	}
	return cmds
}

// TestHelpMatchesDocs checks that what --help says is what the man page
// says: every long flag, subcommand and environment variable. (What the
// completions offer is checked against --help by TestCompletions.)
func TestHelpMatchesDocs(t *testing.T) {
	dir := built(t)
	for _, bin := range binaries(t) {
		t.Run(bin, func(t *testing.T) {
			path := filepath.Join(dir, bin)
			top := helpOf(t, path)
			helps := map[string]string{"": top}
			subs := subcommands(top)
			for _, sub := range subs {
				helps[sub] = helpOf(t, path, sub)
			}

			man := read(t, manPage(t, bin))

			for _, sub := range subs {
				if !strings.Contains(man, "**"+bin+" "+sub+"**") && !strings.Contains(man, "**"+sub+"**") {
					t.Errorf("man page of %s does not describe the subcommand %q", bin, sub)
				}
			}

			var flags, envs []string
			for _, h := range helps {
				for _, m := range longFlagRe.FindAllStringSubmatch(h, -1) {
					flags = append(flags, m[1])
				}
				for _, m := range envRe.FindAllString(h, -1) {
					for _, e := range envAllRe.FindAllStringSubmatch(m, -1) {
						envs = append(envs, e[1])
					}
				}
			}
			slices.Sort(flags)
			flags = slices.Compact(flags)
			slices.Sort(envs)
			envs = slices.Compact(envs)
			if len(flags) == 0 {
				t.Fatalf("%s --help lists no flags:\n%s", bin, top)
			}
			for _, f := range flags {
				long := regexp.MustCompile(`(?:^|[^a-z0-9-])--` + regexp.QuoteMeta(f) + `(?:[^a-z0-9-]|$)`)
				if !long.MatchString(man) {
					t.Errorf("%s --%s is not in its man page", bin, f)
				}
			}
			env := section(man, "ENVIRONMENT")
			for _, e := range envs {
				if !strings.Contains(env, e) {
					t.Errorf("%s reads $%s (--help says so), but its man page's ENVIRONMENT does not list it", bin, e)
				}
			}
		})
	}
}

// section returns the text of the "# NAME" section of a Markdown man page.
func section(md, name string) string {
	i := strings.Index(md, "\n# "+name+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+len(name)+4:]
	if j := strings.Index(rest, "\n# "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// TestExitStatusDocumented checks that every man page of a command lists the
// exit codes the commands share (see oxios(7)).
func TestExitStatusDocumented(t *testing.T) {
	for _, bin := range binaries(t) {
		es := section(read(t, manPage(t, bin)), "EXIT STATUS")
		want := []string{"**0**", "**1**", "**2**"}
		if strings.HasPrefix(bin, "ox-") {
			want = append(want, "**69**", "**77**")
		}
		for _, w := range want {
			if !strings.Contains(es, w) {
				t.Errorf("%s: EXIT STATUS does not list %s", bin, w)
			}
		}
	}
	es := section(read(t, "man/oxios.7.md"), "EXIT STATUS")
	for _, w := range []string{"**0**", "**1**", "**2**", "**69**", "**77**"} {
		if !strings.Contains(es, w) {
			t.Errorf("oxios(7): EXIT STATUS does not list %s", w)
		}
	}
}

// tomlKeys lists the dotted keys of a config struct from its toml tags.
func tomlKeys(typ reflect.Type, prefix string) []string {
	var keys []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" || tag == "-" || !f.IsExported() {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			keys = append(keys, "["+prefix+tag+"]")
			keys = append(keys, tomlKeys(f.Type, prefix+tag+".")...)
			continue
		}
		if f.Type.Kind() == reflect.Map {
			keys = append(keys, "["+prefix+tag+"]")
			continue
		}
		keys = append(keys, prefix+tag)
	}
	return keys
}

// TestShippedConfig checks share/oxios.toml: it loads, it changes nothing
// (every key at its default), and it and oxios.toml(5) name every key.
func TestShippedConfig(t *testing.T) {
	file := filepath.Join(root, "share", "oxios.toml")
	got, err := config.Load(file, true)
	if err != nil {
		t.Fatalf("share/oxios.toml does not load: %v", err)
	}
	def, err := config.Load("", true)
	if err != nil {
		t.Fatal(err)
	}
	got.File = ""
	// An empty list or table in the file is the same as none.
	if len(got.Access.Admins) == 0 {
		got.Access.Admins = def.Access.Admins
	}
	if len(got.Access.Users) == 0 {
		got.Access.Users = def.Access.Users
	}
	if !reflect.DeepEqual(got, def) {
		t.Errorf("share/oxios.toml is not all defaults:\n got %+v\nwant %+v", got, def)
	}

	shipped := read(t, "share/oxios.toml")
	man := read(t, "man/oxios.toml.5.md")
	for _, k := range tomlKeys(reflect.TypeFor[config.Config](), "") {
		if strings.HasPrefix(k, "[") {
			if !strings.Contains(shipped, "\n"+k+"\n") {
				t.Errorf("share/oxios.toml has no %s table", k)
			}
			if !strings.Contains(man, k) {
				t.Errorf("oxios.toml(5) does not mention %s", k)
			}
			continue
		}
		name := k[strings.LastIndex(k, ".")+1:]
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` = `).MatchString(shipped) {
			t.Errorf("share/oxios.toml does not set %s", k)
		}
		if !strings.Contains(man, "**"+name+"**") {
			t.Errorf("oxios.toml(5) does not document %s", k)
		}
	}
}

// TestScriptsParse checks the syntax of the demo, CI's script and the
// completion scripts with each shell that is installed.
func TestScriptsParse(t *testing.T) {
	check := func(shell, path string) {
		if _, err := exec.LookPath(shell); err != nil {
			t.Logf("%s not installed: not checking %s", shell, path)
			return
		}
		out, err := exec.Command(shell, "-n", path).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("%s -n %s: %v\n%s", shell, path, err, out)
		}
	}
	check("bash", filepath.Join(root, "contrib/demo.sh"))
	check("bash", filepath.Join(root, ".ci/run"))
	for _, shell := range []string{"bash", "zsh", "fish"} {
		check(shell, completionScript(t, shell, "ox-state"))
	}
}

// TestReadmeListsCommands checks the command table of README.md.
func TestReadmeListsCommands(t *testing.T) {
	readme := read(t, "README.md")
	for _, bin := range binaries(t) {
		if !strings.Contains(readme, "| `"+bin+"` |") {
			t.Errorf("README.md's command table has no row for %s", bin)
		}
	}
}

// TestSystemdUnits runs systemd-analyze verify on the units as make install
// writes them, with the man pages they point to installed: it must print
// nothing.
func TestSystemdUnits(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart= names an executable; any will do.
	for _, b := range binaries(t) {
		if err := os.WriteFile(filepath.Join(bin, b), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Documentation=man:... is checked with man(1) when it is installed.
	manArgs := []string{"--man=no"}
	manpath := filepath.Join(tmp, "man")
	if _, err := exec.LookPath("man"); err == nil {
		manArgs = nil
		pages, _ := filepath.Glob(filepath.Join(root, "man", "*.[1-8]"))
		for _, p := range pages {
			d := filepath.Join(manpath, "man"+p[len(p)-1:])
			os.MkdirAll(d, 0o755)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, filepath.Base(p)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	for _, mode := range []struct{ name, src string }{
		{"system", "contrib/systemd"},
		{"user", "contrib/systemd/user"},
		// Examples (a timer and its job), verified as user units.
		{"examples", "contrib/systemd/examples"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			units, _ := filepath.Glob(filepath.Join(root, mode.src, "*.service"))
			sockets, _ := filepath.Glob(filepath.Join(root, mode.src, "*.socket"))
			timers, _ := filepath.Glob(filepath.Join(root, mode.src, "*.timer"))
			units = append(append(units, sockets...), timers...)
			if len(units) == 0 {
				t.Fatalf("no units in %s", mode.src)
			}
			dir := filepath.Join(tmp, mode.name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			args := []string{}
			if mode.name != "system" {
				args = append(args, "--user")
			}
			args = append(args, "verify")
			args = append(args, manArgs...)
			for _, u := range units {
				b, err := os.ReadFile(u)
				if err != nil {
					t.Fatal(err)
				}
				s := string(b)
				if strings.HasSuffix(u, ".service") && strings.HasPrefix(filepath.Base(u), "oxiosd") {
					for _, want := range []string{"Type=notify", "ExecStart=@BINDIR@/oxiosd"} {
						if !strings.Contains(s, want) {
							t.Errorf("%s lacks %s", u, want)
						}
					}
				}
				name := filepath.Join(dir, filepath.Base(u))
				if err := os.WriteFile(name, []byte(strings.ReplaceAll(s, "@BINDIR@", bin)), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, name)
			}
			cmd := exec.Command(sa, args...)
			cmd.Dir = dir
			runtime := filepath.Join(tmp, "runtime-"+mode.name)
			os.MkdirAll(runtime, 0o700)
			cmd.Env = append(os.Environ(), "MANPATH="+manpath, "XDG_RUNTIME_DIR="+runtime, "SYSTEMD_LOG_COLOR=0")
			out, err := cmd.CombinedOutput()
			if err != nil || len(bytes.TrimSpace(out)) > 0 {
				t.Errorf("systemd-analyze %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// TestManPagesRender formats every page with man(1), as a reader would at
// 80 columns: groff must not warn (a table too wide, a bad request).
func TestManPagesRender(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man not installed")
	}
	pages, _ := filepath.Glob(filepath.Join(root, "man", "*.[1-8]"))
	for _, p := range pages {
		cmd := exec.Command("man", "-l", p)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("man -l %s: %v\n%s", filepath.Base(p), err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "SEE ALSO") {
			t.Errorf("man -l %s: no SEE ALSO in the output", filepath.Base(p))
		}
	}
}
