package supervisor

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// A run's stdin kept open (Spec.OpenStdin): the write end of a pipe
// whose read end is the run's stdin, which WriteStdin writes until
// CloseStdin closes it or the run ends. Writes are in order, one at a
// time; one that the run does not read waits (a pipe holds 64 KiB) until
// it does or the writer's context ends.

// The errors of WriteStdin.
var (
	ErrNoStdin     = errors.New("the run's stdin is not kept open: its input was given at its start")
	ErrStdinClosed = errors.New("the run's stdin is closed")
)

// stdin is a run's open stdin.
type stdin struct {
	f    *os.File // the write end, set once at the start
	mu   chan struct{}
	open bool // under mu
}

// openStdin makes the pipe of a run whose stdin stays open: it returns
// the read end, for the process, which the caller closes once started.
func (r *Run) openStdin() (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	r.in = &stdin{f: pw, mu: make(chan struct{}, 1), open: true}
	return pr, nil
}

// lock takes the stdin's turn, or fails when ctx ends first.
func (in *stdin) lock(ctx context.Context) error {
	select {
	case in.mu <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (in *stdin) unlock() { <-in.mu }

// WriteStdin writes b to the run's stdin, after the writes before it.
func (r *Run) WriteStdin(ctx context.Context, b []byte) error {
	in := r.in
	if in == nil {
		return ErrNoStdin
	}
	if err := in.lock(ctx); err != nil {
		return err
	}
	defer in.unlock()
	if !in.open {
		return ErrStdinClosed
	}
	in.f.SetWriteDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { in.f.SetWriteDeadline(time.Now()) })
	_, err := in.f.Write(b)
	stop()
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.EPIPE):
		return ErrStdinClosed // the run ended, or nothing of it reads it
	}
	return err
}

// CloseStdin closes the run's stdin (end of file for the run), after the
// writes before it.
func (r *Run) CloseStdin(ctx context.Context) error {
	in := r.in
	if in == nil {
		return ErrNoStdin
	}
	if err := in.lock(ctx); err != nil {
		return err
	}
	defer in.unlock()
	if in.open {
		in.open = false
		return in.f.Close()
	}
	return nil
}

// endStdin closes the stdin of a run that has ended: a write waiting
// for a reader (a process of the run that still holds it) stops.
func (r *Run) endStdin() {
	in := r.in
	if in == nil {
		return
	}
	in.f.SetWriteDeadline(time.Now())
	in.mu <- struct{}{}
	if in.open {
		in.open = false
		in.f.Close()
	}
	<-in.mu
}
