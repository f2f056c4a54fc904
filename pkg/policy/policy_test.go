package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func TestDefault(t *testing.T) {
	p := Default()
	if p.Exec.Shell || p.Exec.Timeout.D() != 30*time.Second || p.Exec.OutputCap != 1<<20 || len(p.Exec.Allow) == 0 {
		t.Fatalf("default policy: %+v", p.Exec)
	}
	if p.Budget.RunWall.D() != time.Hour || p.Limits.OpenFiles != 1024 {
		t.Fatalf("default budget/limits: %+v %+v", p.Budget, p.Limits)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"syntax", "[exec]\nallow = [\"ls\"\n", "line 2"},
		{"unknown key", "[exec]\nallow = []\nshel = true\n", `line 3: unknown key "exec.shel"`},
		{"unknown section", "[netz]\nhosts = []\n", `unknown key "netz`},
		{"bad duration", "[exec]\ntimeout = \"soon\"\n", "bad duration"},
		{"bad size", "[exec]\noutput_cap = \"lots\"\n", "bad size"},
		{"relative path", "[exec]\nallow = [\"./ls\"]\n", `line 2: exec.allow: "./ls"`},
		{"negative", "[budget]\ntokens = -1\n", "negative"},
	} {
		_, err := Parse([]byte(c.text))
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestCheckExec(t *testing.T) {
	p, err := Parse([]byte("[exec]\nallow = [\"ls\", \"echo\", \"/usr/bin/env\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ok := []struct {
		argv []string
		cmd  string
	}{
		{[]string{"ls", "-l"}, ""},
		{nil, "echo hello world"},
		{[]string{"/usr/bin/env"}, ""},
	}
	for _, c := range ok {
		if got, err := p.CheckExec(c.argv, c.cmd); err != nil || got.Shell {
			t.Errorf("%v %q: refused: %v", c.argv, c.cmd, err)
		}
	}
	refused := []struct {
		argv []string
		cmd  string
		rule string
	}{
		{[]string{"rm", "-rf", "/"}, "", "exec.allow"},
		{[]string{"/bin/ls"}, "", "exec.allow"}, // allowed by name only
		{[]string{"env"}, "", "exec.allow"},     // allowed by path only
		{nil, "ls; id", "exec.shell"},
		{nil, "ls | id", "exec.shell"},
		{nil, "echo $(id)", "exec.shell"},
		{nil, "echo `id`", "exec.shell"},
		{nil, "ls > /etc/x", "exec.shell"},
		{nil, "PATH=/tmp ls", "exec.allow"},
		{[]string{"echo", "a;b"}, "", "exec.shell"},
		{nil, "   ", "exec"},
	}
	for _, c := range refused {
		_, err := p.CheckExec(c.argv, c.cmd)
		var d *Denied
		if !errors.As(err, &d) || d.Rule != c.rule {
			t.Errorf("%v %q: got %v, want refused by %s", c.argv, c.cmd, err, c.rule)
		}
	}
	p.Exec.Shell = true
	got, err := p.CheckExec(nil, "ls | wc -l")
	if err != nil || !got.Shell || got.Argv[0] != "/bin/sh" {
		t.Fatalf("with a shell allowed: %+v %v", got, err)
	}
	if _, err := p.CheckExec(nil, "rm -rf / | ls"); err == nil {
		t.Fatal("a shell command must start with an allowed program")
	}
}

func TestAsDeniedRefused(t *testing.T) {
	d := &Denied{Rule: "exec.allow", Reason: "rm is not allowed"}
	if AsDenied(fmt.Errorf("wrapped: %w", d)) != d || AsDenied(errors.New("other")) != nil || AsDenied(nil) != nil {
		t.Fatal("AsDenied")
	}
	err := d.Refused("exec")
	if err.Code != proto.EPERM || err.Message != "exec refused: rm is not allowed (policy rule exec.allow)" {
		t.Fatalf("%+v", err)
	}
}

// Quote shows every argument as it is: what a terminal would show as
// other text (an escape sequence, a bidirectional override, a zero-width
// character, invalid UTF-8) is Go-quoted.
func TestQuote(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"ls", "-l", "/tmp"}, "ls -l /tmp"},
		{[]string{"echo", "a b", ""}, `echo "a b" ""`},
		{[]string{"rm", "\x1b[2K\x1b[1A/etc"}, `rm "\x1b[2K\x1b[1A/etc"`},
		{[]string{"cat", "x\u202egnp.exe"}, `cat "x\u202egnp.exe"`},
		{[]string{"cat", "a\u200bb", "c\rd"}, `cat "a\u200bb" "c\rd"`},
		{[]string{"cat", "\xff"}, `cat "\xff"`},
		{[]string{"cat", "héllo"}, "cat héllo"},
	} {
		if got := Quote(c.argv); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.argv, got, c.want)
		}
	}
}

// memory.max_bytes bounds the bytes of an agent's memories: 256MiB when
// left out or 0, never unlimited; a negative one does not parse.
func TestMemoryMaxBytes(t *testing.T) {
	p, err := Parse([]byte("[memory]\nkinds = [\"episodic\"]\nmax_bytes = \"1MiB\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckMemoryBytes(1 << 20); err != nil {
		t.Fatal(err)
	}
	var d *Denied
	if err := p.CheckMemoryBytes(1<<20 + 1); !errors.As(err, &d) || d.Rule != "memory.max_bytes" {
		t.Fatalf("past max_bytes: %v", err)
	}
	p, _ = Parse([]byte("[memory]\nkinds = [\"episodic\"]\n"))
	if p.CheckMemoryBytes(DefaultMemoryBytes) != nil || p.CheckMemoryBytes(DefaultMemoryBytes+1) == nil {
		t.Fatal("left out: not the default")
	}
	if _, err := Parse([]byte("[memory]\nmax_bytes = -1\n")); err == nil || !strings.Contains(err.Error(), "max_bytes") {
		t.Fatalf("negative: %v", err)
	}
	if Default().Memory.MaxBytes != DefaultMemoryBytes {
		t.Fatalf("the default policy's max_bytes: %d", Default().Memory.MaxBytes)
	}
}
