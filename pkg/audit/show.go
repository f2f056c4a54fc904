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

// Show returns the line of published entry seq for a reader who may
// see the entries visible lets through: ENOENT when the log holds no
// such entry, and as well when it is not the reader's (uid's) to see,
// without saying whether it exists.
func (l *Log) Show(seq uint64, uid uint32, visible func(*Info) bool) ([]byte, error) {
	if seq == 0 {
		return nil, proto.Errorf(proto.EINVAL, "audit entries are numbered from 1")
	}
	out, err := l.Line(seq)
	if err != nil {
		return nil, proto.AsError(err)
	}
	if out == nil {
		return nil, proto.Errorf(proto.ENOENT, "no audit entry %d (the log ends at %d)", seq, l.Published())
	}
	in, _ := Peek(out)
	if !visible(&in) {
		return nil, proto.Errorf(proto.ENOENT, "no audit entry %d visible to uid %d", seq, uid)
	}
	return out, nil
}

// SyncedHead makes every appended entry durable in the log itself (Sync)
// and returns the head's record.
func (l *Log) SyncedHead() (proto.AuditHead, error) {
	if err := l.Sync(); err != nil {
		return proto.AuditHead{}, proto.AsError(err)
	}
	seq, hash := l.Head()
	return proto.AuditHead{Type: proto.RecordAuditHead, Seq: seq, Hash: hash}, nil
}

// VerifySynced makes the log durable (Sync) and recomputes its chain up
// to the head (Verify), as source's record.
func (l *Log) VerifySynced(source string) (proto.AuditVerify, error) {
	if err := l.Sync(); err != nil {
		return proto.AuditVerify{}, proto.AsError(err)
	}
	rep, err := l.Verify()
	if err != nil {
		return proto.AuditVerify{}, proto.AsError(err)
	}
	return rep.Record(source), nil
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
