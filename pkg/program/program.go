// Package program reads Oxios programs: workflows installed into an
// agent and run through the kernel's syscalls only. A program is a folder
// with a program.toml (its name, version, description, the agent it runs
// as, the policy it needs as a fragment of a policy, its entry command or
// LLM task, an optional schedule and its arguments), a SKILL.md that
// tells a model what the program does, and its scripts.
//
// An installed program is a folder of its agent's state, programs/NAME/,
// so it is policy-checked, audited, committed (ox-commit) and carried by
// ox-fork like the rest of the agent; no kernel mechanism of its own. Its
// policy fragment is what it asks of its agent's policy: Exceeds names
// what the agent's policy does not grant, and ox-program refuses such a
// program at install and again at every run. The kernel enforces the
// agent's policy on every syscall of the run anyway: the fragment is what
// the operator agrees to, and a program never gets more than its agent.
package program

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/skill"
)

// Prefix is where an agent's programs live in its state.
const Prefix = "programs/"

// Manifest is the file that makes a folder a program.
const Manifest = "program.toml"

// Meta is the key, in an installed program's folder, of where it was
// installed from (hidden: a program's own hidden files are never
// installed, so it cannot collide with one).
const Meta = ".install.json"

// Program is a parsed program.toml.
type Program struct {
	Name        string `toml:"name" json:"name"`
	Version     string `toml:"version" json:"version"`
	Description string `toml:"description" json:"description"`
	// Agent is the agent the program runs as when none is given; created
	// with the default policy on its first run if it does not exist.
	Agent string `toml:"agent" json:"agent,omitempty"`
	// Command is the entry: a command run inside a process run of the
	// agent, its words looked up in the program's folder first. Or Task:
	// an LLM run's task, with SKILL.md as its system prompt.
	Command []string `toml:"command" json:"command,omitempty"`
	Task    string   `toml:"task" json:"task,omitempty"`
	// Schedule is a cron schedule (5 fields or @hourly...) that
	// ox-program run --schedule adds a job of.
	Schedule string         `toml:"schedule" json:"schedule,omitempty"`
	Args     map[string]Arg `toml:"args" json:"args,omitempty"`
	Policy   Fragment       `toml:"policy" json:"policy"`
	// Needs are the host programs the entry runs (git, jq): told to the
	// operator, looked up before a run.
	Needs []string `toml:"needs" json:"needs,omitempty"`
	// Terminal: the entry asks the operator. Run from a terminal, its
	// stdin stays open and is what the operator types, line by line, and
	// PROGRAM_TTY=1 is in its environment; otherwise its stdin is what
	// ox-program run was given, as for any program.
	Terminal bool `toml:"terminal" json:"terminal,omitempty"`
}

// Arg is an argument of a program, given as NAME=VALUE to ox-program run
// and found by the entry as $ARG_NAME (upper case, - as _), or in the task
// as {{NAME}}.
type Arg struct {
	Description string `toml:"description" json:"description"`
	Default     string `toml:"default" json:"default,omitempty"`
	Required    bool   `toml:"required" json:"required,omitempty"`
}

// Fragment is the policy a program asks of its agent, in the policy's own
// terms (oxios-policy(5)): each entry must be granted by the agent's
// policy.
type Fragment struct {
	State struct {
		Read  []string `toml:"read" json:"read,omitempty"`
		Write []string `toml:"write" json:"write,omitempty"`
	} `toml:"state" json:"state"`
	Memory struct {
		Kinds []string `toml:"kinds" json:"kinds,omitempty"`
	} `toml:"memory" json:"memory"`
	Exec struct {
		Allow []string `toml:"allow" json:"allow,omitempty"`
		Shell bool     `toml:"shell" json:"shell,omitempty"`
	} `toml:"exec" json:"exec"`
	Tools struct {
		Allow []string `toml:"allow" json:"allow,omitempty"`
	} `toml:"tools" json:"tools"`
	Net struct {
		Allow []string `toml:"allow" json:"allow,omitempty"`
	} `toml:"net" json:"net"`
	Msg struct {
		Send []string `toml:"send" json:"send,omitempty"`
	} `toml:"msg" json:"msg"`
	Work struct {
		Allow []string `toml:"allow" json:"allow,omitempty"`
	} `toml:"work" json:"work"`
	Sandbox struct {
		Network   bool     `toml:"network" json:"network,omitempty"`
		ReadOnly  []string `toml:"read_only" json:"read_only,omitempty"`
		ReadWrite []string `toml:"read_write" json:"read_write,omitempty"`
	} `toml:"sandbox" json:"sandbox"`
}

var argName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// CheckName reports why name is not a program name: the rule of skill
// names (1 to 64 of a-z, 0-9 and -).
func CheckName(name string) error {
	if err := skill.CheckName(name); err != nil {
		return fmt.Errorf("program name: %v", strings.TrimPrefix(err.Error(), "skill name "))
	}
	return nil
}

// Parse reads a program.toml strictly: a key it does not know is an
// error naming it, as a policy's is (a misspelt policy entry must never
// silently ask for nothing).
func Parse(b []byte) (*Program, error) {
	var p Program
	md, err := toml.NewDecoder(bytes.NewReader(b)).Decode(&p)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", Manifest, err)
	}
	if un := md.Undecoded(); len(un) > 0 {
		keys := make([]string, len(un))
		for i, k := range un {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%s: unknown key %q (see ox-program(1))", Manifest, keys[0])
	}
	if err := CheckName(p.Name); err != nil {
		return nil, fmt.Errorf("%s: %v", Manifest, err)
	}
	switch {
	case strings.TrimSpace(p.Version) == "":
		return nil, fmt.Errorf("%s: no version", Manifest)
	case strings.TrimSpace(p.Description) == "":
		return nil, fmt.Errorf("%s: no description", Manifest)
	case len(p.Command) == 0 && strings.TrimSpace(p.Task) == "":
		return nil, fmt.Errorf("%s: no entry: give command = [...] (a process run) or task = \"...\" (an LLM run)", Manifest)
	case len(p.Command) > 0 && p.Task != "":
		return nil, fmt.Errorf("%s: give command or task, not both", Manifest)
	case len(p.Command) > 0 && p.Command[0] == "":
		return nil, fmt.Errorf("%s: command: an empty program name", Manifest)
	}
	for name, a := range p.Args {
		if !argName.MatchString(name) {
			return nil, fmt.Errorf("%s: argument %q: want 1 to 32 of a-z, 0-9, _ and -, starting with a letter", Manifest, name)
		}
		if a.Required && a.Default != "" {
			return nil, fmt.Errorf("%s: argument %s is required and has a default: give one", Manifest, name)
		}
	}
	if err := p.Policy.check(); err != nil {
		return nil, fmt.Errorf("%s: policy: %v", Manifest, err)
	}
	return &p, nil
}

// check refuses a fragment that could not be part of a policy.
func (f *Fragment) check() error {
	for _, list := range []struct {
		rule string
		pats []string
	}{{"state.read", f.State.Read}, {"state.write", f.State.Write}} {
		for _, p := range list.pats {
			if err := policy.CheckPattern(p); err != nil {
				return fmt.Errorf("%s: %v", list.rule, err)
			}
		}
	}
	for _, k := range f.Memory.Kinds {
		if !slices.Contains([]string{"working", "episodic", "semantic"}, k) {
			return fmt.Errorf("memory.kinds: %q is not a kind (working, episodic, semantic)", k)
		}
	}
	for _, w := range f.Work.Allow {
		if !path.IsAbs(w) {
			return fmt.Errorf("work.allow: %q is not an absolute path", w)
		}
	}
	for _, p := range append(slices.Clone(f.Sandbox.ReadOnly), f.Sandbox.ReadWrite...) {
		if !path.IsAbs(p) {
			return fmt.Errorf("sandbox: %q is not an absolute path", p)
		}
	}
	return nil
}

// Empty reports whether the fragment asks for nothing.
func (f *Fragment) Empty() bool {
	var z Fragment
	return f.TOML() == z.TOML()
}

// TOML is the fragment as the policy sections it asks for, what the
// operator is shown before saying yes.
func (f *Fragment) TOML() string {
	var b bytes.Buffer
	sec := func(name string, lines ...string) {
		var some []string
		for _, l := range lines {
			if l != "" {
				some = append(some, l)
			}
		}
		if len(some) == 0 {
			return
		}
		fmt.Fprintf(&b, "[%s]\n%s\n", name, strings.Join(some, "\n"))
	}
	list := func(key string, v []string) string {
		if len(v) == 0 {
			return ""
		}
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = fmt.Sprintf("%q", s)
		}
		return key + " = [" + strings.Join(q, ", ") + "]"
	}
	yes := func(key string, v bool) string {
		if !v {
			return ""
		}
		return key + " = true"
	}
	sec("state", list("read", f.State.Read), list("write", f.State.Write))
	sec("memory", list("kinds", f.Memory.Kinds))
	sec("exec", list("allow", f.Exec.Allow), yes("shell", f.Exec.Shell))
	sec("tools", list("allow", f.Tools.Allow))
	sec("net", list("allow", f.Net.Allow))
	sec("msg", list("send", f.Msg.Send))
	sec("work", list("allow", f.Work.Allow))
	sec("sandbox", yes("network", f.Sandbox.Network), list("read_only", f.Sandbox.ReadOnly), list("read_write", f.Sandbox.ReadWrite))
	return b.String()
}

// Exceeds names each thing the fragment asks that the policy p does not
// grant, in the policy's terms (empty: p grants all of it). It is
// conservative: a pattern is granted only when every key it matches is.
func (f *Fragment) Exceeds(p *policy.Policy) []string {
	var out []string
	miss := func(rule, what, why string) {
		out = append(out, fmt.Sprintf("%s %q: %s", rule, what, why))
	}
	for _, a := range f.State.Read {
		if !anyCovers(p.State.Read, a) {
			miss("state.read", a, "not every key it matches is readable under the agent's state.read")
		}
	}
	for _, a := range f.State.Write {
		if !anyCovers(p.State.Write, a) {
			miss("state.write", a, "not every key it matches is writable under the agent's state.write")
		}
	}
	for _, k := range f.Memory.Kinds {
		if !slices.Contains(p.Memory.Kinds, k) {
			miss("memory.kinds", k, "not among the agent's memory.kinds")
		}
	}
	for _, e := range f.Exec.Allow {
		if !slices.Contains(p.Exec.Allow, e) {
			miss("exec.allow", e, "not on the agent's exec.allow")
		}
	}
	if f.Exec.Shell && !p.Exec.Shell {
		out = append(out, "exec.shell true: the agent's policy allows no shell")
	}
	for _, t := range f.Tools.Allow {
		if !slices.Contains(p.Tools.Allow, t) {
			miss("tools.allow", t, "not on the agent's tools.allow")
		}
	}
	for _, h := range f.Net.Allow {
		if !hostCovered(p.Net.Allow, h) {
			miss("net.allow", h, "not on the agent's net.allow")
		}
	}
	for _, s := range f.Msg.Send {
		if !nameCovered(p.Msg.Send, s) {
			miss("msg.send", s, "not every agent it matches is on the agent's msg.send")
		}
	}
	for _, w := range f.Work.Allow {
		if !anyCovers(trimSlash(p.Work.Allow), strings.TrimPrefix(path.Clean(w), "/")) {
			miss("work.allow", w, "not every folder it matches is on the agent's work.allow")
		}
	}
	if f.Sandbox.Network && !p.Sandbox.Network {
		out = append(out, "sandbox.network true: the agent's runs have no network")
	}
	for _, r := range f.Sandbox.ReadOnly {
		if !under(p.Sandbox.ReadOnly, r) && !under(p.Sandbox.ReadWrite, r) {
			miss("sandbox.read_only", r, "not shown to the agent's runs (its sandbox.read_only and read_write)")
		}
	}
	for _, r := range f.Sandbox.ReadWrite {
		if !under(p.Sandbox.ReadWrite, r) {
			miss("sandbox.read_write", r, "not writable by the agent's runs (its sandbox.read_write)")
		}
	}
	return out
}

// anyCovers reports whether one of the granted key patterns matches
// every key the asked pattern matches.
func anyCovers(granted []string, asked string) bool {
	a := strings.Split(asked, "/")
	for _, g := range granted {
		if covers(strings.Split(g, "/"), a) {
			return true
		}
	}
	return false
}

// covers reports whether the pattern g (segments) matches every key the
// pattern a matches: "**" in a only under "**" in g, a segment with
// wildcards only under "*" or itself, a literal one as path.Match says.
func covers(g, a []string) bool {
	if len(g) == 0 {
		return len(a) == 0
	}
	if g[0] == "**" {
		return covers(g[1:], a) || len(a) > 0 && covers(g, a[1:])
	}
	if len(a) == 0 || a[0] == "**" {
		return false
	}
	if strings.ContainsAny(a[0], "*?[\\") {
		if g[0] != a[0] && g[0] != "*" {
			return false
		}
	} else if ok, _ := path.Match(g[0], a[0]); !ok {
		return false
	}
	return covers(g[1:], a[1:])
}

func trimSlash(pats []string) []string {
	out := make([]string, len(pats))
	for i, p := range pats {
		out[i] = strings.TrimPrefix(p, "/")
	}
	return out
}

// hostCovered: the host rule asked is granted as it is, or a name under a
// granted *.domain.
func hostCovered(granted []string, asked string) bool {
	for _, g := range granted {
		if g == asked {
			return true
		}
		if dom, ok := strings.CutPrefix(g, "*"); ok && strings.HasPrefix(dom, ".") && strings.HasSuffix(strings.TrimPrefix(asked, "*"), dom) && strings.TrimPrefix(asked, "*") != dom {
			return true
		}
	}
	return false
}

// nameCovered: the agent-name glob asked is one granted, or every name
// it matches is matched by one ("*" covers all).
func nameCovered(granted []string, asked string) bool {
	for _, g := range granted {
		if g == asked || g == "*" {
			return true
		}
		if !strings.ContainsAny(asked, "*?[\\") {
			if ok, _ := path.Match(g, asked); ok {
				return true
			}
		}
	}
	return false
}

// under: path p is one of dirs or inside one.
func under(dirs []string, p string) bool {
	p = path.Clean(p)
	for _, d := range dirs {
		d = path.Clean(d)
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

// Load reads the program in folder dir of fsys: its program.toml, parsed,
// and every file, with program.toml last so that an install that writes
// them in order makes the program visible only once it is whole. Hidden
// files and folders (.git) are left out; a symbolic link is refused; a
// SKILL.md is required (what the program does, for a model), and the
// limits of a skill's folder bind a program's.
func Load(fsys fs.FS, dir string) (*Program, []skill.FileData, error) {
	b, err := fs.ReadFile(fsys, path.Join(dir, Manifest))
	if err != nil {
		return nil, nil, fmt.Errorf("no %s: a program is a folder with a %s, a %s and its scripts", Manifest, Manifest, skill.File)
	}
	p, err := Parse(b)
	if err != nil {
		return nil, nil, err
	}
	sk, files, err := skill.Load(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	if sk.Name != p.Name {
		return nil, nil, fmt.Errorf("its %s names it %q, its %s %q", Manifest, p.Name, skill.File, sk.Name)
	}
	if len(p.Command) > 0 && !strings.Contains(p.Command[0], "/") {
		// An entry of the program's own is one of its files.
		for _, f := range files {
			if f.Path == p.Command[0] && !bytes.HasPrefix(f.Data, []byte("#!")) {
				return nil, nil, fmt.Errorf("its entry %s does not start with #! (an interpreter line)", f.Path)
			}
		}
	}
	sort.SliceStable(files, func(i, j int) bool {
		if (files[i].Path == Manifest) != (files[j].Path == Manifest) {
			return files[j].Path == Manifest
		}
		return false
	})
	return p, files, nil
}

// Bind matches the words given to ox-program run against the program's
// arguments: NAME=VALUE for a declared NAME sets it, every other word is
// passed on (to the command's argv, or appended to the task). Required
// arguments must be given; the others take their default.
func (p *Program) Bind(words []string) (vals map[string]string, rest []string, err error) {
	vals = map[string]string{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok {
			if _, declared := p.Args[k]; declared {
				vals[k] = v
				continue
			}
		}
		rest = append(rest, w)
	}
	names := make([]string, 0, len(p.Args))
	for n := range p.Args {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := p.Args[n]
		if _, ok := vals[n]; ok {
			continue
		}
		if a.Required {
			return nil, nil, fmt.Errorf("program %s needs %s=VALUE (%s)", p.Name, n, a.Description)
		}
		vals[n] = a.Default
	}
	return vals, rest, nil
}

// Env is the environment variable of argument name.
func Env(name string) string {
	return "ARG_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// TaskText is the task of an LLM program with its arguments put in
// ({{NAME}}) and the other words given appended.
func (p *Program) TaskText(vals map[string]string, rest []string) string {
	t := p.Task
	for k, v := range vals {
		t = strings.ReplaceAll(t, "{{"+k+"}}", v)
	}
	if len(rest) > 0 {
		t = strings.TrimRight(t, "\n") + "\n\n" + strings.Join(rest, " ")
	}
	return t
}
