package runspec

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
	"github.com/oxios/oxios/pkg/supervisor"
)

// What an exec is started with besides its sandbox (its timeout, its
// output cap, its environment), and the record of what it ended with.

// ExecTimeout is an exec's timeout: the policy's, or the one asked
// ("": none; a duration such as 10s) when it is shorter.
func ExecTimeout(p *policy.Policy, asked string) (time.Duration, *proto.Error) {
	return shorter(p.Exec.Timeout.D(), asked)
}

// shorter is limit (0: none), or the timeout asked ("": none; a duration
// such as 10s) when it is shorter.
func shorter(limit time.Duration, asked string) (time.Duration, *proto.Error) {
	if asked == "" {
		return limit, nil
	}
	t, err := time.ParseDuration(asked)
	if err != nil || t <= 0 {
		return 0, proto.Errorf(proto.EINVAL, "timeout %q: want a duration such as 10s", asked)
	}
	if limit == 0 || t < limit {
		return t, nil
	}
	return limit, nil
}

// UIDs hands out the uids of the execs that are not a run's (the
// supervisor's pool).
type UIDs interface {
	AcquireUID() uint32
	ReleaseUID(uid uint32)
}

// ExecUID gives sb, an exec's sandbox (nil: none), the uid it runs in:
// the run's when the caller is a run with one (the exec writes the run's
// workspace), else one of its own from uids while it runs, to which its
// workspace dir is given. It returns the exec's HOME, and release, which
// gives the uid back (to be called even when err is not nil).
func ExecUID(sb *sandbox.Spec, run *supervisor.Run, uids UIDs, dir string) (home string, release func(), err error) {
	release = func() {}
	if sb == nil {
		return dir, release, nil
	}
	if run != nil && run.UID() != 0 {
		sb.UID = run.UID()
		return sandbox.WorkDir, release, nil
	}
	uid := uids.AcquireUID()
	sb.UID = uid
	release = func() { uids.ReleaseUID(uid) }
	if !sb.UserNS {
		if err := sandbox.Chown(dir, uid); err != nil {
			return "", release, err
		}
	}
	return sandbox.WorkDir, release, nil
}

// Execution is an exec that its agent's policy allowed, as RunExec runs
// it.
type Execution struct {
	Agent   string
	Argv    []string // as allowed; Argv[0] is looked up on the PATH of runs
	Stdin   string
	Timeout time.Duration
	// Run is the caller's run when it is a run of Agent: the exec runs
	// in its workspace, as its uid.
	Run *supervisor.Run
	// Work is the host folder the exec works on at /work through an
	// overlay ("": none), absolute with its links resolved (WorkFolder):
	// ox-exec --work. It is not a run's exec (Run is nil). Harvest is
	// called with the overlay's upper layer once the command has ended,
	// before its workspace is removed, to keep what it changed ("": the
	// upper layer was not found, see supervisor.ExecSpec.Harvest).
	Work    string
	Harvest func(upper string)
}

// Refusal is an error of RunExec that is a refusal, audited as one: Rule
// is what its audit target adds (" [sandbox.isolation]", or "").
type Refusal struct {
	Err  *proto.Error
	Rule string
}

func (r *Refusal) Error() string { return r.Err.Error() }

// RunExec runs x under p, with the data dir data (the workspaces): its
// program looked up (LookPath), in its workspace (Workspace), in the
// sandbox of p on h (Sandbox), as the run's uid or one of sup's while it
// runs (ExecUID), with p's output cap and limits, in a cgroup of its own
// when sup makes them. A program not found, a sandbox not made and a
// start that failed are a *Refusal; any other error is not the caller's.
func RunExec(ctx context.Context, h Host, sup *supervisor.Supervisor, data string, p *policy.Policy, x Execution) (supervisor.ExecResult, error) {
	var none supervisor.ExecResult
	prog, err := LookPath(x.Argv[0])
	if err != nil {
		return none, &Refusal{Err: proto.AsError(err)}
	}
	argv := append([]string{prog}, x.Argv[1:]...)
	dir, done, err := Workspace(data, x.Agent, x.Run)
	if err != nil {
		return none, proto.AsError(err)
	}
	defer done()
	sb, serr := Sandbox(h, x.Agent, p, dir, false, false)
	if serr != nil {
		return none, &Refusal{Err: serr, Rule: " [sandbox.isolation]"}
	}
	if x.Run != nil && x.Run.ServesExecs() {
		// A rootless run's workspace is in its own namespaces: the exec
		// is a process of the run, started by its shim.
		res, err := x.Run.ExecIn(ctx, supervisor.ExecSpec{
			Argv: argv, Stdin: []byte(x.Stdin), Timeout: x.Timeout, Cap: ExecCap(p), Env: ExecEnv(x.Agent, sandbox.WorkDir),
		})
		if err != nil {
			return none, &Refusal{Err: proto.Errorf(proto.ENOENT, "exec %s: %v", x.Argv[0], err)}
		}
		return res, nil
	}
	if x.Work != "" && sb == nil {
		return none, &Refusal{Err: proto.Errorf(proto.EPERM, "--work needs the sandbox, and agent %q's execs start without one here (its policy's [sandbox] isolation, or what this machine lacks: ox-status)", x.Agent), Rule: " [sandbox.isolation]"}
	}
	if x.Run == nil {
		if err := supervisor.MakeWorkspace(dir, sb); err != nil {
			return none, proto.AsError(err)
		}
	} else if done, err := shareOverlay(sb, x.Run); err != nil {
		return none, proto.AsError(err)
	} else {
		defer done()
	}
	home, release, err := ExecUID(sb, x.Run, sup, dir)
	defer release()
	if err != nil {
		return none, proto.AsError(err)
	}
	if x.Work != "" {
		if err := execOverlay(h, sb, x.Work, dir); err != nil {
			return none, proto.AsError(err)
		}
	}
	if sb != nil && sb.Overlay != nil {
		home = "/tmp" // as the run's: not its work folder
	}
	spec := supervisor.ExecSpec{
		Argv: argv, Dir: dir, Stdin: []byte(x.Stdin), Timeout: x.Timeout, Cap: ExecCap(p), Limits: Limits(p), Cgroups: sup.Cgroups,
		Env: ExecEnv(x.Agent, home), Sandbox: sb,
	}
	if x.Work != "" {
		spec.Harvest = x.Harvest
	}
	res, err := supervisor.Exec(ctx, spec)
	if err != nil {
		return none, &Refusal{Err: proto.Errorf(proto.ENOENT, "exec %s: %v", x.Argv[0], err)}
	}
	return res, nil
}

// ExecCap is how many bytes of each output an exec keeps (the policy's
// exec output cap, 1 MiB by default).
func ExecCap(p *policy.Policy) int {
	capBytes := int(p.Exec.OutputCap)
	if capBytes <= 0 {
		capBytes = 1 << 20
	}
	return capBytes
}

// ExecEnv is the environment of an exec of agent, HOME being home.
func ExecEnv(agent, home string) []string {
	return append([]string{"PATH=" + Path(), "HOME=" + home, "LANG=C.UTF-8", "OXIOS_AGENT=" + agent}, sandbox.RaceEnv...)
}

// ExecRecord is the record of an exec of argv for agent (run: the
// caller's run, "" if none) that ended with res, its text the command
// and the outcome, and that outcome, which its audit entry names too
// (" => status N", or the timeout, with the limits it ran into).
func ExecRecord(agent, run string, argv []string, res supervisor.ExecResult, timeout time.Duration) (proto.ExecRecord, string) {
	rec := proto.ExecRecord{
		Type: proto.RecordExec, Agent: agent, Run: run, Argv: argv, Status: res.Status, Signal: res.Signal,
		TimedOut: res.TimedOut, Stdout: strings.ToValidUTF8(string(res.Stdout), "\uFFFD"), Stderr: strings.ToValidUTF8(string(res.Stderr), "\uFFFD"),
		Truncated: res.Truncated, Limits: res.Limits, Digest: outputDigest(res.Stdout, res.Stderr), Duration: res.Duration.Seconds(),
	}
	outcome := fmt.Sprintf(" => status %d", res.Status)
	if res.TimedOut {
		outcome = fmt.Sprintf(" => timed out after %s", timeout)
	}
	if res.Limits != "" {
		outcome += " (" + res.Limits + ")"
	}
	rec.Text = strings.TrimPrefix(ExecTarget("", argv, "", outcome), ":exec ")
	return rec, outcome
}

// outputDigest is the BLAKE3 digest of an exec's or a tool call's
// output, stdout then stderr, that its record and audit entry name.
func outputDigest(stdout, stderr []byte) string {
	h := blake3.New(32, nil)
	h.Write(stdout)
	h.Write(stderr)
	return hex.EncodeToString(h.Sum(nil))
}

// ExecTarget is the target of an exec's audit entry: the agent, the
// command (argv, else the command line), and what came of it.
func ExecTarget(agent string, argv []string, cmd, outcome string) string {
	what := cmd
	if len(argv) > 0 {
		what = policy.Quote(argv)
	}
	return agent + ":exec " + audit.Clip(what, audit.MaxTarget) + outcome
}

// Workspace makes and returns the folder an exec or a WASM tool call of
// agent works in: the workspace of run, the caller, or else a folder of
// its own, DATA/work/AGENT/exec-*, which done removes (each exec its own:
// two at once of one agent each have theirs, and nothing one leaves is
// found by the next). done is to be called once the call has ended.
func Workspace(data, agent string, run *supervisor.Run) (dir string, done func(), err error) {
	if run != nil {
		if run.ServesExecs() {
			return run.Workspace(), func() {}, nil
		}
		dir = run.Spec().Dir
		return dir, func() {}, os.MkdirAll(dir, 0o700)
	}
	parent := filepath.Join(data, "work", agent)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", func() {}, err
	}
	dir, err = os.MkdirTemp(parent, "exec-")
	if err != nil {
		return "", func() {}, err
	}
	return dir, func() { sandbox.RemoveWorkspace(dir) }, nil
}

// execOverlay gives sb, the sandbox of an exec of its own with its
// workspace ws, the host folder dir at /work through an overlay whose
// layers are in ws, as a run's (Boxed), owned by the exec's uid; or,
// rootless, on a tmpfs of the workspace's size that its shim makes
// (sandbox.Overlay.Size), so that the exec obeys limits.disk.
func execOverlay(h Host, sb *sandbox.Spec, dir, ws string) error {
	o, perr := WorkOverlay(h, dir, ws)
	if perr != nil {
		return perr
	}
	for _, d := range []string{o.Upper, o.Work} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
		if !sb.UserNS {
			if err := sandbox.Chown(d, sb.UID); err != nil {
				return err
			}
		}
	}
	sb.Overlay = o
	binds := sb.Binds[:0]
	for _, b := range sb.Binds {
		if b.Path != sandbox.WorkDir {
			binds = append(binds, b)
		} else if b.Tmpfs > 0 {
			o.Size = b.Tmpfs
		}
	}
	sb.Binds = binds
	return nil
}

// shareOverlay gives sb, the sandbox of an exec of run, the run's view
// of its work folder when it has one (ox-spawn --work): the same lower
// and upper layers at /work, with an overlay work folder of the exec's
// own (two mounts may not share one), so that an LLM run's tools see and
// change what the run does. done removes that folder.
func shareOverlay(sb *sandbox.Spec, run *supervisor.Run) (done func(), err error) {
	done = func() {}
	rs := run.Spec().Sandbox
	if sb == nil || rs == nil || rs.Overlay == nil {
		return done, nil
	}
	o := *rs.Overlay
	w, err := os.MkdirTemp(filepath.Dir(o.Work), ".overlay-exec-")
	if err != nil {
		return done, err
	}
	if !sb.UserNS {
		if err := sandbox.Chown(w, run.UID()); err != nil {
			os.RemoveAll(w)
			return done, err
		}
	}
	o.Work = w
	sb.Overlay = &o
	binds := sb.Binds[:0]
	for _, b := range sb.Binds {
		if b.Path != sandbox.WorkDir {
			binds = append(binds, b)
		}
	}
	sb.Binds = binds
	return func() { sandbox.RemoveAll(w) }, nil
}
