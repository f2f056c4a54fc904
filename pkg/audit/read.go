package audit

import (
	"bytes"
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// ScanError is Read's failure to scan the log (emit's error, which the
// scan passes on, included).
type ScanError struct{ Err error }

func (e *ScanError) Error() string { return e.Err.Error() }
func (e *ScanError) Unwrap() error { return e.Err }

// Read emits the lines of the entries a selects (Filter) that visible
// lets the caller see, oldest first: from a.SinceSeq, only the last a.N,
// or none of the past with a.OnlyNew. With a.Follow it then emits new
// entries as they are published until ctx ends, calling flush (if not
// nil) after each group so a follower sees them now. It returns a's
// error, emit's, or a *ScanError.
func (l *Log) Read(ctx context.Context, a *proto.AuditLogArgs, visible func(*Info) bool, emit func(line []byte) error, flush func() error) error {
	match, perr := Filter(a)
	if perr != nil {
		return perr
	}
	var err error
	want := func(line []byte) bool {
		in, ok := Peek(line)
		return ok && match(&in) && visible(&in)
	}
	// The last N: a ring of copies, emitted once the scan ends.
	var ring [][]byte
	next := 0
	scan := func(from uint64) (uint64, error) {
		last := from - 1
		err := l.ScanLines(from, func(line []byte) error {
			last = LineSeq(line)
			if !want(line) {
				return nil
			}
			if a.N > 0 && ring != nil {
				if len(ring) < a.N {
					ring = append(ring, bytes.Clone(line))
				} else {
					ring[next] = append(ring[next][:0], line...)
					next = (next + 1) % a.N
				}
				return nil
			}
			return emit(line)
		})
		return last, err
	}
	if a.N > 0 {
		ring = make([][]byte, 0, min(a.N, 1024))
	}
	changed := l.Changed()
	var last uint64
	if a.OnlyNew {
		last = l.Published()
	} else if last, err = scan(max(a.SinceSeq, 1)); err != nil {
		return &ScanError{err}
	}
	for i := range ring {
		if err := emit(ring[(next+i)%len(ring)]); err != nil {
			return err
		}
	}
	ring = nil
	for a.Follow {
		if flush != nil {
			if err := flush(); err != nil {
				return err
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil // the client stopped following: a normal end
		}
		changed = l.Changed()
		if last, err = scan(last + 1); err != nil {
			return &ScanError{err}
		}
	}
	return nil
}
