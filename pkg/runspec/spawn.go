package runspec

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
	"github.com/oxios/oxios/pkg/supervisor"
)

// CheckSpawn checks what a spawn asks to run: a task (an LLM run) or a
// command, not both, and variables NAME=VALUE that are not oxiosd's.
func CheckSpawn(a proto.SpawnArgs) *proto.Error {
	if len(a.Command) == 0 && strings.TrimSpace(a.Task) == "" && !a.Chatting() {
		return proto.Errorf(proto.EINVAL, "nothing to run: give a task (an LLM run) or a command after --")
	}
	if len(a.Command) > 0 && a.Task != "" {
		return proto.Errorf(proto.EINVAL, "give a task or a command, not both")
	}
	if a.OpenStdin && len(a.Command) == 0 && !a.Chatting() {
		return proto.Errorf(proto.EINVAL, "open_stdin is for a command or a chat (llm.chat): an LLM run's input is its context, read at its start")
	}
	if a.Chatting() && a.LLM != nil && len(a.LLM.Schema) > 0 {
		return proto.Errorf(proto.EINVAL, "a chat has no final answer for a schema: give chat or schema, not both")
	}
	for _, e := range a.Env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t\n\x00") {
			return proto.Errorf(proto.EINVAL, "env %q: want NAME=VALUE", e)
		}
		if strings.HasPrefix(name, "OXIOS_") {
			return proto.Errorf(proto.EINVAL, "env %q: OXIOS_ variables are set by oxiosd", e)
		}
	}
	return nil
}

// Argv is the command line of the spawn a: the LLM runner (runner, as
// configured in [runs]) with a's task when a has no command, under the
// live [llm] section l; else a's command found in PATH. A refusal the
// kernel audits (no model endpoint, no runner, no such command) has
// refused set; args that do not make sense are not audited.
func Argv(a proto.SpawnArgs, l config.LLM, runner string) (argv []string, err *proto.Error, refused bool) {
	if len(a.Command) == 0 {
		if l.BaseURL == "" {
			return nil, proto.Errorf(proto.ENOEXEC, "no model endpoint is configured for LLM runs: set base_url in the [llm] section of oxios.toml (for example https://api.openai.com/v1, or http://localhost:11434/v1 for ollama) and restart oxiosd; `ox-spawn -a %s -- COMMAND` runs a command without one", a.Agent), true
		}
		prog, rerr := Runner(runner)
		if rerr != nil {
			return nil, proto.AsError(rerr), true
		}
		argv, err = RunnerArgv(prog, a)
		return argv, err, false
	}
	if a.LLM != nil {
		return nil, proto.Errorf(proto.EINVAL, "the options of an LLM run (system, persona, continue...) are not for a command"), false
	}
	prog, lerr := LookPath(a.Command[0])
	if lerr != nil {
		return nil, proto.AsError(lerr), true
	}
	return append([]string{prog}, a.Command[1:]...), nil, false
}

// Where is where oxiosd serves a run: its socket, and its mount ("" when
// it has none).
type Where struct {
	Socket string
	Mount  string
}

// Env is the environment of run id of the spawn a, working in dir: PATH,
// HOME, the OXIOS_ variables (for an LLM run, with model, the [llm]
// section l and its key, key), then sysEnv (oxiosd's own additions, such
// as a scheduled run's OXIOS_SCHEDULE) and a race-built oxiosd's GORACE
// (sandbox.RaceEnv), then a's own.
func Env(a proto.SpawnArgs, id, dir string, w Where, l config.LLM, model string, sysEnv []string) []string {
	env := []string{
		"PATH=" + Path(), "HOME=" + dir, "LANG=C.UTF-8",
		"OXIOS_AGENT=" + a.Agent, "OXIOS_RUN=" + id, "OXIOS_SOCKET=" + w.Socket,
	}
	if w.Mount != "" {
		env = append(env, "OXIOS_MNT="+w.Mount)
	}
	if len(a.Command) == 0 {
		// No endpoint and no key: the kernel makes the model calls
		// (llm.chat), so nothing in the run's world can call the model
		// behind its budget.
		env = append(env, RunnerEnv(l, model)...)
	}
	env = append(env, sysEnv...)
	env = append(env, sandbox.RaceEnv...)
	return append(env, a.Env...)
}

// SandboxHome points HOME of env at the sandbox's work folder, where a
// sandboxed run's workspace is.
func SandboxHome(env []string) {
	for i, e := range env {
		if strings.HasPrefix(e, "HOME=") {
			env[i] = "HOME=" + sandbox.WorkDir
		}
	}
}

// Host is what a sandbox is made on: the features this machine offers,
// the sandbox's root, and oxiosd's own files, which no sandbox shows
// (data, socket, and mount when Mount is not "").
type Host struct {
	Features sandbox.Features
	Root     string
	Data     string
	Socket   string
	Mount    string
}

// Sandbox is the sandbox of a run (run) or an exec of agent under
// policy p, with its workspace dir; nil when the policy says none. llm:
// the LLM runner, which needs no network for its model (the kernel calls
// it, llm.chat): the policy's [sandbox] network applies to it as to any
// run.
func Sandbox(h Host, agent string, p *policy.Policy, dir string, llm, run bool) (*sandbox.Spec, *proto.Error) {
	sp := p.Sandbox
	if sp.Isolation == policy.IsolationNone {
		return nil, nil
	}
	f := h.Features
	if sp.Isolation == policy.IsolationFull && (!f.Namespaces || !f.Seccomp) {
		return nil, proto.Errorf(proto.EPERM, "agent %q may start only in the full sandbox ([sandbox] isolation = \"full\" of its policy), and this machine lacks: %s (ox-status shows what oxiosd found; a policy with isolation = \"available\" starts runs with less)",
			agent, strings.Join(f.Missing, "; "))
	}
	if !f.Namespaces {
		return nil, nil // "available", and nothing is
	}
	spec := &sandbox.Spec{
		Root: h.Root, Net: sp.Network, UserNS: f.Rootless,
		Disk: uint64(p.Limits.Disk), Tmp: uint64(p.Limits.Tmp),
		NoSeccomp: !f.Seccomp, NoLandlock: f.Landlock == 0,
		Binds: []sandbox.Bind{{Src: dir, Path: sandbox.WorkDir, RW: true}}, Dir: sandbox.WorkDir,
	}
	if f.Rootless && p.Limits.Disk > 0 {
		// Rootless, oxiosd can mount nothing: the shim makes the
		// workspace's filesystem inside the sandbox, and a run's shim
		// starts the run's execs there too (sandbox/serve.go), with the
		// run's walls (an LLM runner's network is the policy's, as its
		// execs').
		spec.Binds[0] = sandbox.Bind{Path: sandbox.WorkDir, RW: true, Tmpfs: uint64(p.Limits.Disk)}
		spec.Serve = run
	}
	for _, list := range []struct {
		paths []string
		rw    bool
	}{{sp.ReadOnly, false}, {sp.ReadWrite, true}} {
		for _, path := range list.paths {
			if overlaps(path, h.Data) || overlaps(path, h.Socket) || (h.Mount != "" && overlaps(path, h.Mount)) {
				return nil, proto.Errorf(proto.EPERM, "sandbox path %s of agent %q's policy would show oxiosd's own files (its data, socket or mount): refused", path, agent)
			}
			spec.Binds = append(spec.Binds, sandbox.Bind{Path: path, RW: list.rw, Optional: true})
		}
	}
	if run && h.Mount != "" {
		// Only its own agent's folder of the mount.
		spec.Binds = append(spec.Binds, sandbox.Bind{Path: filepath.Join(h.Mount, "agent", agent), RW: true, Optional: true, Mkdir: true})
	}
	return spec, nil
}

// overlaps reports whether one of a and b is the other or inside it.
func overlaps(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	in := func(x, y string) bool { return x == y || strings.HasPrefix(x, y+"/") || y == "/" }
	return in(a, b) || in(b, a)
}

// Run is what a spawn's run is made of besides its args: its id and
// workspace dir, its command line, its agent's policy and the wall time
// its budget leaves (seconds), where oxiosd serves it, the [llm] section
// in force and oxiosd's own environment additions.
type Run struct {
	ID, Dir string
	Argv    []string
	Policy  *policy.Policy
	Wall    float64
	Where   Where
	LLM     config.LLM
	SysEnv  []string
	// Work is the host folder the run works on at /work through an
	// overlay ("": none), absolute with its links resolved (WorkFolder).
	Work string
}

// Spec is the supervisor's spec of the spawn a as run r: a command, or
// the LLM runner with a.Task and the model (a's, else [llm]'s). The
// endpoint's key stays in oxiosd.
func Spec(a proto.SpawnArgs, r Run) supervisor.Spec {
	llm := len(a.Command) == 0
	model := a.Model
	if llm && model == "" {
		model = r.LLM.Model
	}
	spec := supervisor.Spec{
		ID: r.ID, Agent: a.Agent, Argv: r.Argv, Env: Env(a, r.ID, r.Dir, r.Where, r.LLM, model, r.SysEnv), Dir: r.Dir,
		Stdin: input(a), OpenStdin: a.OpenStdin || a.Chatting(), Limits: Limits(r.Policy), Command: a.Command, Model: model, Records: llm,
		Wall: time.Duration(r.Wall * float64(time.Second)),
	}
	if llm {
		spec.Task = a.Task
	}
	return spec
}

// Box puts spec's run in the sandbox sb (nil: none), which reaches
// oxiosd at socket, with HOME at the sandbox's work folder.
func Box(spec *supervisor.Spec, sb *sandbox.Spec, socket string) {
	if sb == nil {
		return
	}
	spec.Sandbox, spec.SocketAt = sb, socket
	SandboxHome(spec.Env)
}

// Boxed is the supervisor's spec of the spawn a as run r (Spec), in the
// sandbox of r.Policy on h (Sandbox, whose refusal is its error),
// reaching oxiosd at socket (Box). r.Dir is the run's workspace,
// DATA/work/AGENT/ID (WorkDir).
func Boxed(a proto.SpawnArgs, r Run, h Host, socket string) (supervisor.Spec, *proto.Error) {
	spec := Spec(a, r)
	sb, err := Sandbox(h, a.Agent, r.Policy, r.Dir, len(a.Command) == 0, true)
	if err != nil {
		return spec, err
	}
	if r.Work != "" {
		if sb == nil {
			return spec, proto.Errorf(proto.EPERM, "--work needs the sandbox, and agent %q's runs start without one here (its policy's [sandbox] isolation, or what this machine lacks: ox-status)", a.Agent)
		}
		o, err := WorkOverlay(h, r.Work, r.Dir)
		if err != nil {
			return spec, err
		}
		sb.Overlay = o
		// The overlay is the run's /work, not over the workspace's bind.
		binds := sb.Binds[:0]
		for _, b := range sb.Binds {
			if b.Path != sandbox.WorkDir {
				binds = append(binds, b)
			} else if b.Tmpfs > 0 {
				// Rootless: the upper layer on a filesystem of the
				// workspace's size, which the shim makes.
				o.Size = b.Tmpfs
			}
		}
		sb.Binds = binds
		spec.Work = r.Work
	}
	Box(&spec, sb, socket)
	if r.Work != "" && sb != nil {
		// Not the folder: what tools keep in HOME (caches, histories)
		// would be the run's changes to it.
		for i, e := range spec.Env {
			if strings.HasPrefix(e, "HOME=") {
				spec.Env[i] = "HOME=/tmp"
			}
		}
	}
	return spec, nil
}

// WorkDir is the workspace of run id of agent: DATA/work/AGENT/ID.
func WorkDir(data, agent, id string) string { return filepath.Join(data, "work", agent, id) }

var runIDEnc = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID is a new run id: "r" and 9 random base32 letters, short enough
// to type, that taken does not know yet.
func NewID(taken func(id string) bool) string { return newID("r", taken) }

// NewExecID is the id of an exec that works on a host folder (ox-exec
// --work), which names its pending work: "x" and 9 letters, as a run's.
func NewExecID(taken func(id string) bool) string { return newID("x", taken) }

func newID(prefix string, taken func(id string) bool) string {
	for {
		var b [6]byte
		rand.Read(b[:])
		id := prefix + runIDEnc.EncodeToString(b[:])[:9]
		if !taken(id) {
			return id
		}
	}
}

// LimitErrno is the errno of a run's processes refused what its policy's
// [limits] do not grant (the supervisor's record names it, limits): a
// fork refused is EAGAIN, memory ENOMEM.
func LimitErrno(limits string) string {
	if strings.Contains(limits, "fork") {
		return proto.EAGAIN
	}
	return proto.ENOMEM
}

// input is the run's stdin: its input, after the text of the files an LLM
// run was given as fragments (ox-spawn -f FILE), each under its name, so
// the runner says them to the model with the rest of its context. A chat
// run's is one line, a context record, before the messages its stdin
// then brings.
func input(a proto.SpawnArgs) []byte {
	if a.Chatting() {
		b, _ := json.Marshal(proto.ContextRecord{Type: proto.RecordContext, Text: string(handed(a))})
		return append(b, '\n')
	}
	return handed(a)
}

// handed is a run's input, after the text of its fragments.
func handed(a proto.SpawnArgs) []byte {
	if a.LLM == nil || len(a.LLM.Fragments) == 0 {
		return []byte(a.Input)
	}
	var b strings.Builder
	for _, f := range a.LLM.Fragments {
		if !f.URL {
			fmt.Fprintf(&b, "Fragment %s:\n%s\n\n", f.Name, strings.TrimRight(f.Text, "\n"))
		}
	}
	b.WriteString(a.Input)
	return []byte(b.String())
}

// IsID reports whether id is a run's id as NewID makes them: "r" and 9
// letters.
func IsID(id string) bool {
	if len(id) != 10 || id[0] != 'r' {
		return false
	}
	return strings.Trim(id[1:], "abcdefghijklmnopqrstuvwxyz234567") == ""
}
