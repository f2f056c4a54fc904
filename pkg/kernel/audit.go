package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// The audit syscalls read the log. What a caller sees (access.Cred.Reads):
// the admin, every entry; anyone else, the entries about or by the agents
// they may act on. Checking the whole chain (verify, export, head) is the
// admin's (declared Admin: the gate refuses anyone else).

// auditCall is the gate's call of an op on the whole log.
func auditCall(c *Cred, op string) call { return call{op: op, c: c, target: "audit"} }

// AuditLog emits the lines of the selected entries, oldest first; with
// Follow it then emits new entries as they are committed until ctx ends,
// calling flush (if not nil) after each group so a follower sees them now.
func (k *Kernel) AuditLog(ctx context.Context, c *Cred, a proto.AuditLogArgs, raw []byte, emit func(line []byte) error, flush func() error) error {
	if err := k.gate(call{op: proto.OpAuditLog, c: c, agent: a.Agent, raw: raw}); err != nil {
		return err
	}
	err := k.audit.Read(ctx, &a, c.Reads, emit, flush)
	if se, ok := err.(*audit.ScanError); ok {
		return proto.AsError(se.Err)
	}
	return err
}

// AuditShow returns the line of entry seq, when c may see it.
func (k *Kernel) AuditShow(ctx context.Context, c *Cred, seq uint64) ([]byte, error) {
	if err := k.gate(auditCall(c, proto.OpAuditShow)); err != nil {
		return nil, err
	}
	return k.audit.Show(seq, c.UID, c.Reads)
}

// AuditHead makes every committed entry durable in the log itself and
// returns its head.
func (k *Kernel) AuditHead(ctx context.Context, c *Cred) (proto.AuditHead, error) {
	if err := k.gate(auditCall(c, proto.OpAuditHead)); err != nil {
		return proto.AuditHead{}, err
	}
	return k.audit.SyncedHead()
}

// AuditVerify recomputes the chain of the live log up to its head.
func (k *Kernel) AuditVerify(ctx context.Context, c *Cred) (proto.AuditVerify, error) {
	if err := k.gate(auditCall(c, proto.OpAuditVerify)); err != nil {
		return proto.AuditVerify{}, err
	}
	return k.audit.VerifySynced("oxiosd")
}

// AuditExport emits every durable line of the log and then its head line:
// the self-contained file that `ox-audit verify --file` checks.
func (k *Kernel) AuditExport(ctx context.Context, c *Cred, emit func(line []byte) error) error {
	if err := k.gate(auditCall(c, proto.OpAuditExport)); err != nil {
		return err
	}
	if err := k.audit.ExportLines(ctx, emit); err != nil {
		return proto.AsError(err)
	}
	return nil
}

// AuditScan calls fn with each entry line c may see from seq from on (the
// mount's /audit/log).
func (k *Kernel) AuditScan(ctx context.Context, c *Cred, from uint64, fn func(line []byte) error) error {
	return k.AuditLog(ctx, c, proto.AuditLogArgs{SinceSeq: from}, nil, fn, nil)
}
