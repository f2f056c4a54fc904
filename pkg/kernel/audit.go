package kernel

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// The audit syscalls read the log. What a caller sees (access.Cred.Reads):
// the admin, every entry; anyone else, the entries about or by the agents
// they may act on. Checking the whole chain (verify, export, head) is the
// admin's (declared Admin: the gate refuses anyone else).

// auditStream is what a stream of the log's lines takes: its args, and
// where its lines go (each already JSON) and, for a follower, when to
// make them visible.
type auditStream struct {
	proto.AuditLogArgs
	emit  func(line []byte) error
	flush func() error
}

// AuditLog emits the lines of the selected entries, oldest first; with
// Follow it then emits new entries as they are committed until ctx ends,
// calling flush (if not nil) after each group so a follower sees them now.
func (k *Kernel) AuditLog(ctx context.Context, c *Cred, a proto.AuditLogArgs, raw []byte, emit func(line []byte) error, flush func() error) error {
	_, err := sysAuditLog.Call(k, ctx, c, auditStream{a, emit, flush}, raw)
	return err
}

func (k *Kernel) auditLog(ctx context.Context, c *Cred, a auditStream, raw []byte) (struct{}, error) {
	err := k.audit.Read(ctx, &a.AuditLogArgs, c.Reads, a.emit, a.flush)
	if se, ok := err.(*audit.ScanError); ok {
		return struct{}{}, proto.AsError(se.Err)
	}
	return struct{}{}, err
}

// AuditShow returns the line of entry seq, when c may see it.
func (k *Kernel) AuditShow(ctx context.Context, c *Cred, seq uint64) ([]byte, error) {
	return sysAuditShow.Call(k, ctx, c, proto.AuditShowArgs{Seq: seq}, nil)
}

func (k *Kernel) auditShow(ctx context.Context, c *Cred, a proto.AuditShowArgs, _ []byte) (json.RawMessage, error) {
	return k.audit.Show(a.Seq, c.UID, c.Reads)
}

// AuditHead makes every committed entry durable in the log itself and
// returns its head.
func (k *Kernel) AuditHead(ctx context.Context, c *Cred) (proto.AuditHead, error) {
	return sysAuditHead.Call(k, ctx, c, struct{}{}, nil)
}

// AuditVerify recomputes the chain of the live log up to its head.
func (k *Kernel) AuditVerify(ctx context.Context, c *Cred) (proto.AuditVerify, error) {
	return sysAuditVerify.Call(k, ctx, c, struct{}{}, nil)
}

// AuditExport emits every durable line of the log and then its head line:
// the self-contained file that `ox-audit verify --file` checks.
func (k *Kernel) AuditExport(ctx context.Context, c *Cred, emit func(line []byte) error) error {
	_, err := sysAuditExport.Call(k, ctx, c, auditStream{emit: emit}, nil)
	return err
}

func (k *Kernel) auditExport(ctx context.Context, c *Cred, a auditStream, _ []byte) (struct{}, error) {
	if err := k.audit.ExportLines(ctx, a.emit); err != nil {
		return struct{}{}, proto.AsError(err)
	}
	return struct{}{}, nil
}

// AuditScan calls fn with each entry line c may see from seq from on (the
// mount's /audit/log).
func (k *Kernel) AuditScan(ctx context.Context, c *Cred, from uint64, fn func(line []byte) error) error {
	return k.AuditLog(ctx, c, proto.AuditLogArgs{SinceSeq: from}, nil, fn, nil)
}
