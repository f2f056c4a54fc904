package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// openWork opens the workspace of a run whose shim serves its execs:
// the tmpfs inside its mount namespace, through the shim's root. The
// open folder keeps the filesystem for as long as the run's record
// needs it, even once the namespace is gone.
func (r *Run) openWork() {
	p := fmt.Sprintf("/proc/%d/root%s", r.rec.PID, sandbox.WorkDir)
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		r.s.log.Warn("run workspace", "run", r.rec.ID, "err", err)
		return
	}
	r.work = os.NewFile(uintptr(fd), p)
}

// Workspace is the path by which oxiosd reaches the run's workspace: its
// folder under DATA, or, for a run whose workspace is a filesystem of its
// own namespace, that filesystem through a folder oxiosd holds open.
func (r *Run) Workspace() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.work != nil {
		return fmt.Sprintf("/proc/self/fd/%d", r.work.Fd())
	}
	return r.spec.Dir
}

// Upper is the path by which oxiosd reaches the upper layer of the
// run's overlay (ox-spawn --work) once the run has exited: rootless, on
// the tmpfs its shim made (sandbox.Overlay.Size), through the folder the
// shim sent (or the spec's folder, when the shim said the overlay refused
// the tmpfs), "" if it sent neither; else the folder the spec names.
func (r *Run) Upper() string {
	if r.spec.Sandbox == nil || r.spec.Sandbox.Overlay == nil {
		return ""
	}
	o := r.spec.Sandbox.Overlay
	if o.Size == 0 || r.execs == nil {
		return o.Upper
	}
	return r.execs.Upper(5*time.Second, o.Upper)
}

// ServesExecs reports whether the run's execs start inside it (ExecIn).
func (r *Run) ServesExecs() bool { return r.execs != nil }

// ExecIn runs s as a process of the run, started by its shim inside its
// sandbox (ServesExecs): the run's walls, uid and workspace, s's argv,
// environment, stdin, time limit and output cap (its Sandbox, Limits
// and Cgroups are the run's own and are not read).
func (r *Run) ExecIn(ctx context.Context, s ExecSpec) (ExecResult, error) {
	if r.execs == nil {
		return ExecResult{}, errors.New("the run does not start execs itself")
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return ExecResult{}, err
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return ExecResult{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inW.Close()
		outR.Close()
		outW.Close()
		return ExecResult{}, err
	}
	start := time.Now()
	id, replies, err := r.execs.Start(s.Argv, s.Env, sandbox.WorkDir, [3]*os.File{inR, outW, errW})
	outW.Close()
	errW.Close()
	inR.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return ExecResult{}, proto.Errorf(proto.ESRCH, "exec in run %s: %v", r.rec.ID, err)
	}
	go func() {
		inW.Write(s.Stdin)
		inW.Close()
	}()
	out, errb := &capped{max: s.Cap}, &capped{max: s.Cap}
	var readers sync.WaitGroup
	readers.Add(2)
	for _, p := range []struct {
		f *os.File
		c *capped
	}{{outR, out}, {errR, errb}} {
		go func() {
			defer readers.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := p.f.Read(buf)
				p.c.Write(buf[:n])
				if err != nil {
					return
				}
			}
		}()
	}
	defer outR.Close()
	defer errR.Close()
	res := ExecResult{}
	killed := false
	ended := func(rep ExecReply, ok bool) (ExecResult, error) {
		// A grandchild holding the pipes open must not hold the reply.
		drained := make(chan struct{})
		go func() { readers.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(time.Second):
			outR.SetReadDeadline(time.Now())
			errR.SetReadDeadline(time.Now())
			<-drained
		}
		res.Stdout, res.Stderr, res.Truncated = out.buf.Bytes(), errb.buf.Bytes(), out.over || errb.over
		res.Duration = time.Since(start)
		res.TimedOut = killed
		switch {
		case !ok:
			return res, proto.Errorf(proto.ESRCH, "exec in run %s: %v", r.rec.ID, sandbox.ErrRunEnded)
		case rep.Err != "":
			return res, errors.New(rep.Err)
		case rep.Signal != 0:
			res.Status = 128 + rep.Signal
			res.Signal = SignalName(syscall.Signal(rep.Signal))
		default:
			res.Status = rep.Code
		}
		return res, nil
	}
	for {
		select {
		case rep, ok := <-replies:
			if !ok || rep.Done || rep.Err != "" {
				return ended(rep, ok)
			}
		case <-ctx.Done():
			if !killed {
				killed = true
				r.execs.Kill(id)
			}
			// The shim answers the kill with the exec's end; a shim that
			// is gone closes replies.
			ctx = context.Background()
		}
	}
}

// ExecReply is one answer of a run's shim to an exec asked of it.
type ExecReply = sandbox.ExecReply
