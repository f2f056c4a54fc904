// Package policy reads an agent's policy (oxios-policy(5)) and answers the
// questions the kernel's authorize step asks of it: may this agent exec
// this command, what may it spend, under which limits do its runs run. It
// decides and explains (by naming the rule); the kernel enforces and
// audits. It also loads an agent's policy file (the default when it has
// none), describes it as a record, says what a violation does to the
// run that made it (signals.on_violation), and which programs answer a
// class of question once the rules allow ([hooks], hooks.go: the kernel
// runs them).
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/share"
)

// Policy is an agent's policy. What it does not grant is refused: a
// section left out grants nothing (and limits nothing).
type Policy struct {
	State   State   `toml:"state"`
	Memory  Memory  `toml:"memory"`
	Exec    Exec    `toml:"exec"`
	Tools   Tools   `toml:"tools"`
	Net     Net     `toml:"net"`
	Budget  Budget  `toml:"budget"`
	Limits  Limits  `toml:"limits"`
	Signals Signals `toml:"signals"`
	Ask     Ask     `toml:"ask"`
	Msg     Msg     `toml:"msg"`
	MCP     MCP     `toml:"mcp"`
	Sandbox Sandbox `toml:"sandbox"`
	Hooks   Hooks   `toml:"hooks"`
	Work    Work    `toml:"work"`
	LLM     LLM     `toml:"llm"`

	hosts []hostRule // net.allow, parsed
}

// State governs the agent's key-value state: which keys it may read and
// write (globs, see MatchKey), and how many bytes it may hold in all.
type State struct {
	Read  []string    `toml:"read"`
	Write []string    `toml:"write"`
	Quota config.Size `toml:"quota"`
}

// Memory governs remember and recall: the kinds it may use, and how many
// memories it may hold, and how many bytes.
type Memory struct {
	Kinds []string `toml:"kinds"`
	Quota int64    `toml:"quota"`
	// MaxBytes bounds the bytes of the agent's memory files in all; 0:
	// DefaultMemoryBytes.
	MaxBytes config.Size `toml:"max_bytes"`
}

// DefaultMemoryBytes is memory.max_bytes when the policy gives none. A
// count alone bounded nothing: a memory may be as long as a value
// (limits.max_value, 16 MiB), and the recall index holds its words in
// memory.
const DefaultMemoryBytes = 256 << 20

// Tools governs the WASM tools: which may run, with how much memory and
// time.
type Tools struct {
	Allow   []string    `toml:"allow"`
	Memory  config.Size `toml:"memory"`
	Timeout Duration    `toml:"timeout"`
}

// Net governs the fetch syscall (the runner's HTTP tool): the hosts it
// may reach. Private, loopback and link-local addresses are refused
// unless listed as addresses or networks.
type Net struct {
	Allow    []string    `toml:"allow"`
	Timeout  Duration    `toml:"timeout"`
	MaxBytes config.Size `toml:"max_bytes"`
}

// Sandbox says what the world of the agent's runs and execs holds beyond
// what every sandbox has (the system folders read-only, the workspace,
// the agent's own folder of the mount, its socket), and how much less
// isolation than the full sandbox a run may start with.
type Sandbox struct {
	// Isolation: "full" (the default: a run starts only in the whole
	// sandbox; Landlock is added where the kernel has it), "available"
	// (with whatever layers the machine offers, down to none) or "none"
	// (never sandboxed: for agents trusted as much as the admin).
	Isolation string `toml:"isolation"`
	// Network keeps the host's network for runs and execs; without it
	// they have only a loopback of their own (the LLM runner always has
	// the network: it reaches the model).
	Network bool `toml:"network"`
	// ReadOnly and ReadWrite are host paths the sandbox shows at the same
	// path, read-only or read-write.
	ReadOnly  []string `toml:"read_only"`
	ReadWrite []string `toml:"read_write"`
}

// Work says which host folders the agent's runs may take as their work
// (ox-spawn --work): globs of absolute paths, "*" within a name, "**"
// any number of names. None: no folder.
type Work struct {
	Allow []string `toml:"allow"`
}

// LLM governs the agent's model calls (llm.chat): the models it may ask
// for, by the names of oxios.toml ([llm]'s model, a [models.NAME], or a
// model of [llm]'s endpoint asked by its own name), each a name or a glob
// ("*", "?" and classes; "*" matches "/" too). Unlike the sections that
// grant, a policy without models limits nothing: any model oxiosd
// offers; an empty list, none.
type LLM struct {
	Models []string `toml:"models"`
	// limited: models is in the policy, empty or not.
	limited bool
}

// Isolation levels.
const (
	IsolationFull      = "full"
	IsolationAvailable = "available"
	IsolationNone      = "none"
)

// Signals says what a violation does besides being refused and audited.
type Signals struct {
	// OnViolation: "deny" (the call fails, the run goes on), "stop"
	// (SIGSTOP the run, for an operator to look at) or "kill" (end it).
	OnViolation string `toml:"on_violation"`
}

// Violation actions.
const (
	ViolationDeny = "deny"
	ViolationStop = "stop"
	ViolationKill = "kill"
)

// Exec governs the exec syscall.
type Exec struct {
	Allow     []string    `toml:"allow"`
	Shell     bool        `toml:"shell"`
	Timeout   Duration    `toml:"timeout"`
	OutputCap config.Size `toml:"output_cap"`
}

// Budget bounds what an agent and each of its runs spend; 0 is no limit.
type Budget struct {
	Tokens    int64    `toml:"tokens"`
	Cost      float64  `toml:"cost"`
	Wall      Duration `toml:"wall"`
	Execs     int64    `toml:"execs"`
	RunTokens int64    `toml:"run_tokens"`
	RunCost   float64  `toml:"run_cost"`
	RunWall   Duration `toml:"run_wall"`
	RunExecs  int64    `toml:"run_execs"`
}

// Limits are the resource limits of a run's processes; 0 is no limit.
type Limits struct {
	Memory config.Size `toml:"memory"`
	// Disk is the size of a run's or an exec's workspace, a filesystem
	// of its own (a tmpfs, oxiosd being root); Tmp the size of its
	// scratch folders (/tmp, /var/tmp, /run and /dev/shm, one tmpfs).
	// Both count against Memory where a cgroup binds it. Absent from a
	// policy: DefaultDisk, DefaultTmp; "0": no limit of its own (the
	// workspace is a folder of DATA's filesystem).
	Disk      config.Size `toml:"disk"`
	Tmp       config.Size `toml:"tmp"`
	CPU       Duration    `toml:"cpu"`
	Processes uint64      `toml:"processes"`
	OpenFiles uint64      `toml:"open_files"`
	// Runs bounds the agent's runs at once; more wait in oxiosd's queue
	// (issue 8).
	Runs int `toml:"runs"`
}

// The sizes of a workspace and of the scratch folders when a policy
// does not say.
const (
	DefaultDisk config.Size = 1 << 30
	DefaultTmp  config.Size = 256 << 20
)

// Duration is a Go duration in TOML ("30s", "1h"; "0" is none).
type Duration time.Duration

// UnmarshalTOML reads a duration string.
func (d *Duration) UnmarshalTOML(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a duration such as \"30s\" or \"0\", got %v", v)
	}
	if s == "0" || s == "" {
		*d = 0
		return nil
	}
	x, err := time.ParseDuration(s)
	if err != nil || x < 0 {
		return fmt.Errorf("bad duration %q: want a duration such as \"30s\" or \"0\"", s)
	}
	*d = Duration(x)
	return nil
}

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Error is a policy that does not parse: the line and the reason.
type Error struct {
	Line   int
	Reason string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("policy line %d: %s", e.Line, e.Reason)
	}
	return "policy: " + e.Reason
}

// Parse reads a policy. Keys the policy does not know are refused, with
// their line, like a syntax error: a misspelt rule must not silently
// grant nothing (or everything).
func Parse(b []byte) (*Policy, error) {
	var p Policy
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&p)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{Line: pe.Position.Line, Reason: pe.Message}
		}
		return nil, &Error{Reason: err.Error()}
	}
	if un := md.Undecoded(); len(un) > 0 {
		key := un[0].String()
		last := un[0][len(un[0])-1]
		return nil, &Error{Line: lineOf(b, last+" ", last+"=", "["+key+"]", "[["+key+"]]", last), Reason: fmt.Sprintf("unknown key %q", key)}
	}
	for _, a := range p.Exec.Allow {
		if a == "" || strings.ContainsAny(a, " \t\n") || (strings.Contains(a, "/") && !filepath.IsAbs(a)) {
			return nil, &Error{Line: lineOf(b, "allow"), Reason: fmt.Sprintf("exec.allow: %q is not a command name or an absolute path", a)}
		}
	}
	for _, list := range []struct {
		name string
		pats []string
	}{{"state.read", p.State.Read}, {"state.write", p.State.Write}} {
		for _, pat := range list.pats {
			if err := CheckPattern(pat); err != nil {
				return nil, &Error{Line: lineOf(b, list.name[len("state."):]), Reason: fmt.Sprintf("%s: %v", list.name, err)}
			}
		}
	}
	for _, k := range p.Memory.Kinds {
		switch k {
		case "working", "episodic", "semantic":
		default:
			return nil, &Error{Line: lineOf(b, "kinds"), Reason: fmt.Sprintf("memory.kinds: %q is not a kind (working, episodic, semantic)", k)}
		}
	}
	if !md.IsDefined("limits", "disk") {
		p.Limits.Disk = DefaultDisk
	}
	if !md.IsDefined("limits", "tmp") {
		p.Limits.Tmp = DefaultTmp
	}
	if p.Limits.Runs < 0 {
		return nil, &Error{Line: lineOf(b, "runs"), Reason: "limits.runs may not be negative"}
	}
	if p.Memory.MaxBytes < 0 {
		return nil, &Error{Line: lineOf(b, "max_bytes"), Reason: "memory.max_bytes may not be negative"}
	}
	if p.Memory.Quota < 0 {
		return nil, &Error{Line: lineOf(b, "quota"), Reason: "memory.quota may not be negative"}
	}
	for _, t := range p.Tools.Allow {
		if t == "" || strings.ContainsAny(t, "/ \t\n") {
			return nil, &Error{Line: lineOf(b, "allow"), Reason: fmt.Sprintf("tools.allow: %q is not a tool name", t)}
		}
	}
	for _, h := range p.Net.Allow {
		if _, err := parseHost(h); err != nil {
			return nil, &Error{Line: lineOf(b, "allow"), Reason: "net.allow: " + err.Error()}
		}
	}
	if err := p.MCP.check(b); err != nil {
		return nil, err
	}
	switch p.Signals.OnViolation {
	case "":
		p.Signals.OnViolation = ViolationDeny
	case ViolationDeny, ViolationStop, ViolationKill:
	default:
		return nil, &Error{Line: lineOf(b, "on_violation"), Reason: fmt.Sprintf("signals.on_violation: %q: want \"deny\", \"stop\" or \"kill\"", p.Signals.OnViolation)}
	}
	if err := p.parseAsk(b); err != nil {
		return nil, err
	}
	if err := p.Hooks.check(b); err != nil {
		return nil, err
	}
	switch p.Sandbox.Isolation {
	case "":
		p.Sandbox.Isolation = IsolationFull
	case IsolationFull, IsolationAvailable, IsolationNone:
	default:
		return nil, &Error{Line: lineOf(b, "isolation"), Reason: fmt.Sprintf("sandbox.isolation: %q: want \"full\", \"available\" or \"none\"", p.Sandbox.Isolation)}
	}
	for _, list := range []struct {
		key   string
		paths []string
	}{{"read_only", p.Sandbox.ReadOnly}, {"read_write", p.Sandbox.ReadWrite}} {
		for _, path := range list.paths {
			if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
				return nil, &Error{Line: lineOf(b, list.key), Reason: fmt.Sprintf("sandbox.%s: %q: want an absolute, clean path other than /", list.key, path)}
			}
		}
	}
	for _, g := range p.Work.Allow {
		if !filepath.IsAbs(g) || filepath.Clean(g) != g || g == "/" || CheckPattern(g[1:]) != nil {
			return nil, &Error{Line: lineOf(b, "allow", "[work]"), Reason: fmt.Sprintf("work.allow: %q: want an absolute, clean glob of host folders other than / (such as /home/alice/src/**)", g)}
		}
	}
	if p.LLM.limited = md.IsDefined("llm", "models"); p.LLM.limited {
		for _, m := range p.LLM.Models {
			if _, err := path.Match(m, ""); err != nil || strings.TrimSpace(m) != m || m == "" || strings.ContainsAny(m, " \t\n") {
				return nil, &Error{Line: lineOf(b, "models"), Reason: fmt.Sprintf("llm.models: %q is not a model name or a glob of names", m)}
			}
		}
	}
	p.compile()
	for _, f := range []struct {
		key string
		neg bool
	}{
		{"tokens", p.Budget.Tokens < 0}, {"cost", p.Budget.Cost < 0}, {"execs", p.Budget.Execs < 0},
		{"run_tokens", p.Budget.RunTokens < 0}, {"run_cost", p.Budget.RunCost < 0}, {"run_execs", p.Budget.RunExecs < 0},
	} {
		if f.neg {
			return nil, &Error{Line: lineOf(b, f.key+" ", f.key+"=", "[budget]"), Reason: "budget." + f.key + " may not be negative"}
		}
	}
	return &p, nil
}

// lineOf finds the first line that starts with one of keys, tried in
// order, for error messages about keys the decoder reports without a
// position.
func lineOf(b []byte, keys ...string) int {
	lines := strings.Split(string(b), "\n")
	for _, key := range keys {
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), key) {
				return i + 1
			}
		}
	}
	return 0
}

var def *Policy

func init() {
	p, err := Parse(share.DefaultPolicy)
	if err != nil {
		panic("share/policies/default.toml: " + err.Error())
	}
	def = p
}

// Default returns the default policy (share/policies/default.toml).
func Default() *Policy { c := *def; return &c }

// DefaultText is the default policy's file.
func DefaultText() []byte { return share.DefaultPolicy }

// Metachars are what a shell would interpret: a command holding one runs
// only when the policy allows a shell.
const Metachars = ";|&$`<>()\n\r\\*?{}[]~!#'\""

// Denied is a refusal: the rule that refused, and why.
type Denied struct {
	Rule   string
	Reason string
}

func (d *Denied) Error() string { return d.Reason + " (policy rule " + d.Rule + ")" }

// Refused is the EPERM error of a call d refused: what was refused, why,
// and the rule.
func (d *Denied) Refused(what string) *proto.Error {
	return proto.Errorf(proto.EPERM, "%s refused: %s (policy rule %s)", what, d.Reason, d.Rule)
}

// AsDenied returns err as a *Denied, or nil.
func AsDenied(err error) *Denied {
	var d *Denied
	if errors.As(err, &d) {
		return d
	}
	return nil
}

// Command is a command the exec syscall may run, as decided by CheckExec.
type Command struct {
	Argv  []string // what to run: argv, or /bin/sh -c COMMAND
	Shell bool
	Rule  string // the rule that allowed it
}

// CheckExec decides whether argv (or, when argv is empty, the command
// line cmd) may run: its program must be on exec.allow, and a command
// with shell metacharacters (in any word) or an environment assignment in
// front needs exec.shell. lookPath resolves a name as exec would.
func (p *Policy) CheckExec(argv []string, cmd string) (Command, error) {
	if len(argv) == 0 {
		if strings.TrimSpace(cmd) == "" {
			return Command{}, &Denied{Rule: "exec", Reason: "empty command"}
		}
		if i := strings.IndexAny(cmd, Metachars); i >= 0 {
			if !p.Exec.Shell {
				return Command{}, &Denied{Rule: "exec.shell", Reason: fmt.Sprintf("command has the shell metacharacter %q and the policy allows no shell", cmd[i])}
			}
			first := strings.Fields(cmd)[0]
			if !p.allowed(first) && !p.askExec(first) {
				return Command{}, &Denied{Rule: "exec.allow", Reason: fmt.Sprintf("%q is not on the policy's exec.allow list", first)}
			}
			c := Command{Argv: []string{"/bin/sh", "-c", cmd}, Shell: true, Rule: "exec.shell"}
			if p.askExec(first) {
				return c, &Asked{Rule: "ask.exec", Reason: fmt.Sprintf("running %q", first)}
			}
			return c, nil
		}
		argv = strings.Fields(cmd)
	}
	if strings.Contains(argv[0], "=") {
		return Command{}, &Denied{Rule: "exec.allow", Reason: fmt.Sprintf("%q: environment assignments are not commands", argv[0])}
	}
	if !p.Exec.Shell {
		for _, a := range argv {
			if i := strings.IndexAny(a, ";|&$`<>\n"); i >= 0 {
				return Command{}, &Denied{Rule: "exec.shell", Reason: fmt.Sprintf("argument %q has the shell metacharacter %q and the policy allows no shell", a, a[i])}
			}
		}
	}
	if !p.allowed(argv[0]) && !p.askExec(argv[0]) {
		return Command{}, &Denied{Rule: "exec.allow", Reason: fmt.Sprintf("%q is not on the policy's exec.allow list", argv[0])}
	}
	if d := p.runsOther(argv); d != nil {
		return Command{}, d
	}
	c := Command{Argv: argv, Rule: "exec.allow"}
	if prog := p.asksFor(argv); prog != "" {
		c.Rule = "ask.exec"
		return c, &Asked{Rule: "ask.exec", Reason: fmt.Sprintf("running %q", prog)}
	}
	return c, nil
}

// runsOther refuses the arguments with which an allowed program runs
// another program or sets its environment: env's COMMAND (unless that is
// allowed itself), its NAME=VALUE and options (-S splits a string into a
// command, -u and -i change the environment), and sort's
// --compress-program. Without this, env (on the default list) runs rm, and
// sort runs sh on its own input (issue 7, the red-team suite).
func (p *Policy) runsOther(argv []string) *Denied {
	switch filepath.Base(argv[0]) {
	case "env":
		for i, a := range argv[1:] {
			switch {
			case strings.HasPrefix(a, "-") || strings.Contains(a, "="):
				return &Denied{Rule: "exec.allow", Reason: fmt.Sprintf("env %q: env may not set the environment or take options", a)}
			default:
				_, err := p.CheckExec(argv[1+i:], "")
				if d, ok := err.(*Denied); ok {
					return d
				}
				return nil
			}
		}
	case "sort":
		for _, a := range argv[1:] {
			if a == "--" {
				break
			}
			// getopt takes any unambiguous abbreviation: --compress=sh
			// is --compress-program=sh.
			name, _, _ := strings.Cut(a, "=")
			if len(name) >= len("--co") && strings.HasPrefix("--compress-program", name) {
				return &Denied{Rule: "exec.allow", Reason: fmt.Sprintf("sort %q: sort may not run another program", a)}
			}
		}
	}
	return nil
}

// allowed reports whether prog is on the allow list: by name, or by its
// absolute path. A path is allowed only when listed as that path, so
// ./ls or /tmp/ls does not pass for ls.
func (p *Policy) allowed(prog string) bool {
	for _, a := range p.Exec.Allow {
		if a == prog {
			return true
		}
	}
	return false
}

// Quote renders argv for a log line, a message or an operator's
// decision: an argument with a space, a quote, a shell metacharacter, or
// anything not printable (a control character, an escape sequence, a
// bidirectional override or a zero-width character, which would make a
// terminal show other text than the argument holds; invalid UTF-8) is
// shown Go-quoted, so every argument reads as it is.
func Quote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\"+Metachars) || !proto.Printable(a) {
			q[i] = strconv.Quote(a)
		} else {
			q[i] = a
		}
	}
	return strings.Join(q, " ")
}
