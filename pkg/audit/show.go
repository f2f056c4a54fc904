package audit

import (
	"bytes"
	"context"
	"io"

	"github.com/oxios/oxios/pkg/proto"
)

// Line returns a copy of the line of published entry seq; nil when the
// log holds none (it ends before seq).
func (l *Log) Line(seq uint64) ([]byte, error) {
	var out []byte
	err := l.ScanLines(seq, func(line []byte) error {
		out = bytes.Clone(line)
		return io.EOF
	})
	if err != nil && err != io.EOF {
		return nil, err
	}
	if out == nil || LineSeq(out) != seq {
		return nil, nil
	}
	return out, nil
}

// ExportLines makes the log durable (Sync) and emits what Export writes,
// line by line without the newline, until ctx ends.
func (l *Log) ExportLines(ctx context.Context, emit func(line []byte) error) error {
	if err := l.Sync(); err != nil {
		return err
	}
	w := &Lines{Ctx: ctx, Emit: emit}
	if err := l.Export(w); err != nil {
		return err
	}
	if len(w.Partial) > 0 {
		return proto.Errorf(proto.EIO, "audit export ended without a newline")
	}
	return nil
}
