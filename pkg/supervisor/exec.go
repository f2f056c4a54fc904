package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/sandbox"
)

// ExecSpec is a command the exec syscall runs to completion.
type ExecSpec struct {
	Argv    []string // Argv[0] is a path
	Env     []string
	Dir     string
	Stdin   []byte
	Timeout time.Duration
	// Cap bounds what is kept of stdout and of stderr each; the rest is
	// read and dropped, so the command never blocks on a full pipe.
	Cap    int
	Limits Limits
	// Cgroups, when set, bounds the exec's processes together in a
	// cgroup of their own.
	Cgroups *Cgroups
	// Sandbox, when set, is the exec's sandbox (its UID set by the
	// caller: the run's, or one of AcquireUID); the command, environment
	// and folder are filled in from the fields above.
	Sandbox *sandbox.Spec
	// Harvest, when set, is called once the command has ended (not when
	// it could not start) with the path of its sandbox's overlay's upper
	// layer (ox-exec --work), before Exec returns and the path goes;
	// "" when the shim of a rootless exec never sent it.
	Harvest func(upper string)
}

var execSeq atomic.Uint64

// ExecResult is how it went.
type ExecResult struct {
	// Limits says which limits of its cgroup the exec ran into, if any.
	Limits    string
	Status    int // as a shell reports it: 128+N when killed by signal N
	Signal    string
	TimedOut  bool
	Stdout    []byte
	Stderr    []byte
	Truncated bool
	Duration  time.Duration
}

// capped keeps the first max bytes written to it.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.over = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	c.buf.Write(p)
	return len(p), nil
}

// Exec runs s in its own process group and waits for it. On timeout (or
// ctx's end) the whole group is killed.
func Exec(ctx context.Context, s ExecSpec) (ExecResult, error) {
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, s.Argv[0], s.Argv[1:]...)
	cmd.Env, cmd.Dir = s.Env, s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var group *Group
	s.Cgroups.hold()
	if s.Cgroups != nil {
		// A group failing to be made leaves the rlimits: they still bind.
		group, _ = s.Cgroups.New("exec-"+strconv.FormatUint(execSeq.Add(1), 10), s.Limits)
	}
	defer func() {
		group.Remove()
		s.Cgroups.release(group)
	}()
	var statusR *os.File
	var shimLimits Limits // what the sandbox's shim sets on itself
	upper := func() string { return "" }
	if s.Sandbox != nil && s.Sandbox.Overlay != nil {
		upper = func() string { return s.Sandbox.Overlay.Upper }
	}
	if s.Sandbox != nil {
		sb := *s.Sandbox
		sb.GID = sb.UID
		sb.Argv, sb.Env = s.Argv, s.Env
		shimLimits = group.rlimits(s.Limits)
		sb.Rlimits = shimLimits.sandboxRlimits()
		if sb.Dir == "" {
			sb.Dir = s.Dir
		}
		path, argv, env, attr, err := sandbox.Cmd(&sb)
		if err != nil {
			return ExecResult{}, err
		}
		r, w, err := os.Pipe()
		if err != nil {
			return ExecResult{}, err
		}
		statusR = r
		defer r.Close()
		defer w.Close()
		cmd.Path, cmd.Args, cmd.Env, cmd.Dir, cmd.SysProcAttr, cmd.Err = path, argv, env, "", attr, nil
		cmd.ExtraFiles = []*os.File{w}
		if o := sb.Overlay; sb.UserNS && o != nil && o.Size > 0 {
			// Its upper layer is a tmpfs of its namespace, whose folder
			// the shim sends on fd ServeFD (sandbox.Overlay.Size).
			shim, ours, err := sandbox.ServePair()
			if err != nil {
				return ExecResult{}, err
			}
			defer shim.Close()
			defer ours.Close()
			upper = func() string { return ours.Upper(5*time.Second, o.Upper) }
			cmd.ExtraFiles = append(cmd.ExtraFiles, shim)
		}
	}
	// A killed shim takes its pid namespace with it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild holding the pipes open must not hold the reply.
	cmd.WaitDelay = time.Second
	if len(s.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(s.Stdin)
	}
	out, errb := &capped{max: s.Cap}, &capped{max: s.Cap}
	cmd.Stdout, cmd.Stderr = out, errb
	start := time.Now()
	startCmd := func(attr *syscall.SysProcAttr) error {
		cmd.SysProcAttr = attr
		return cmd.Start()
	}
	err := group.Start(startCmd, cmd.SysProcAttr, s.Limits)
	if errors.Is(err, errJoin) {
		// The group is no use: the rlimits still bind.
		group.Remove()
		group = nil
		err = startCmd(cmd.SysProcAttr)
	}
	if err != nil {
		return ExecResult{}, err
	}
	for _, f := range cmd.ExtraFiles {
		f.Close() // the shim's now
	}
	if l := group.rlimits(s.Limits); statusR == nil || l != shimLimits {
		// Unsandboxed, or the group was lost at the start: set from here
		// what the shim did not set itself.
		if err := SetLimits(cmd.Process.Pid, l); err != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
			return ExecResult{}, fmt.Errorf("setting resource limits: %w", err)
		}
	}
	err = cmd.Wait()
	res := ExecResult{Stdout: out.buf.Bytes(), Stderr: errb.buf.Bytes(), Truncated: out.over || errb.over, Duration: time.Since(start)}
	res.TimedOut = ctx.Err() != nil
	res.Limits = group.Hits().String()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case statusR != nil && !ws.Signaled():
		st := sandbox.ReadStatus(statusR)
		switch {
		case st.Err != "":
			return res, errors.New(st.Err)
		case st.Exited:
			res.Status = st.Code
		default:
			res.Status = 128 + int(st.Signal)
			res.Signal = SignalName(st.Signal)
		}
	case ws.Signaled():
		res.Status = 128 + int(ws.Signal())
		res.Signal = SignalName(ws.Signal())
	default:
		res.Status = ws.ExitStatus()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		return res, err
	}
	if s.Harvest != nil {
		s.Harvest(upper())
	}
	return res, nil
}
