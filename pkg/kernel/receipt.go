package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/receipt"
	"github.com/oxios/oxios/pkg/version"
)

// RunReceipt emits the lines of run a.Run's receipt (package receipt):
// its log, its work's patch, and the audit log's lines from the agent's
// state commit before the run (or the run's spawn) to the head. The
// admin's, as those lines are every agent's. The run must have exited.
func (k *Kernel) RunReceipt(ctx context.Context, c *Cred, a proto.ReceiptArgs, raw []byte, emit func(*proto.ReceiptLine) error) error {
	return sysRunReceipt.Stream(k, ctx, c, a, raw, emit)
}

func (k *Kernel) runReceipt(ctx context.Context, c *Cred, a proto.ReceiptArgs, raw []byte, emit func(*proto.ReceiptLine) error) error {
	r, ok := k.sup.Get(a.Run)
	if !ok {
		return proto.Errorf(proto.ESRCH, "no run %q (ox-ps --all lists the runs whose records are kept)", a.Run)
	}
	if err := k.gate(call{op: proto.OpRunReceipt, c: c, agent: r.Agent(), key: a.Run, raw: raw}); err != nil {
		return err
	}
	rec := r.Record()
	if rec.State != proto.RunExited {
		return proto.Errorf(proto.ESRCH, "run %s is %s: a receipt is of a run that exited", a.Run, rec.State)
	}
	b, err := os.ReadFile(k.sup.LogPath(a.Run))
	if err != nil {
		return proto.Errorf(proto.EIO, "the log of run %s: %v", a.Run, err)
	}
	log := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	h := receipt.Header{Run: rec.ID, Agent: rec.Agent, Dir: rec.Work, Policy: rec.Policy}
	var patch []byte
	if rec.Work != "" {
		if m, err := k.works.Load(a.Run); err == nil && m.Digest != "" {
			if patch, err = k.works.Patch(a.Run); err != nil {
				return proto.Errorf(proto.EIO, "the patch of run %s: %v", a.Run, err)
			}
			h.Work = m.Digest
		}
	}
	if err := k.audit.Sync(); err != nil {
		return proto.AsError(err)
	}
	// The run's entries: its spawn and its exit, from the segment of the
	// log that holds the entries of the minute before it started (its
	// spawn is recorded once it has), not from the log's first entry.
	name := rec.Agent + ":" + rec.ID
	find := func(from uint64) error {
		return k.audit.ScanLines(from, func(line []byte) error {
			in, ok := audit.Peek(line)
			switch {
			case !ok:
			case in.Op == proto.OpRunSpawn && in.Target == name && h.Spawn == 0:
				h.Spawn = in.Seq
			case in.Op == proto.OpRunExit && strings.HasPrefix(in.Target, name+" "):
				h.Exit = in.Seq
				var e struct {
					Args string `json:"args"`
				}
				json.Unmarshal(line, &e)
				h.Log = e.Args
				return io.EOF
			}
			return nil
		})
	}
	from := k.audit.Since(rec.Started.Add(-time.Minute))
	err = find(from)
	if err == nil && from > 1 && (h.Spawn == 0 || h.Exit == 0) {
		// The clock stepped back past the margin: the whole log.
		h.Spawn, h.Exit = 0, 0
		err = find(1)
	}
	if err != nil && err != io.EOF {
		return proto.AsError(err)
	}
	if h.Spawn == 0 || h.Exit == 0 {
		return proto.Errorf(proto.ENOENT, "the audit log holds no spawn or exit of run %s", a.Run)
	}
	// The agent's state commits around the run, by the heads their
	// trailers name.
	var before, after *proto.CommitRecord
	k.ver.repo.History(ctx, "", version.AgentPrefix(rec.Agent), 200, func(cm *proto.CommitRecord) error {
		if cm.AuditHead == nil {
			return nil
		}
		if cm.AuditHead.Seq < h.Spawn && before == nil {
			c := *cm
			before = &c
		}
		if cm.AuditHead.Seq >= h.Exit {
			c := *cm
			after = &c
		}
		return nil
	})
	from = h.Spawn
	if before != nil {
		from = min(from, before.AuditHead.Seq+1)
	}
	var lines [][]byte
	err = k.audit.ScanLines(from, func(line []byte) error {
		in, ok := audit.Peek(line)
		if ok && in.Op == proto.OpCommit {
			if before != nil && h.Before == nil && strings.HasSuffix(in.Target, ":"+before.Commit) && in.Seq < h.Spawn {
				h.Before = &receipt.Commit{Hash: before.Commit, Seq: in.Seq}
			}
			if after != nil && h.After == nil && strings.HasSuffix(in.Target, ":"+after.Commit) && in.Seq > h.Exit {
				h.After = &receipt.Commit{Hash: after.Commit, Seq: in.Seq}
			}
		}
		lines = append(lines, bytes.Clone(line))
		return nil
	})
	if err != nil {
		return proto.AsError(err)
	}
	// Start at the commit's entry, or at the spawn when it was not found.
	start := h.Spawn
	if h.Before != nil {
		start = h.Before.Seq
	}
	for len(lines) > 0 && audit.LineSeq(lines[0]) < start {
		lines = lines[1:]
	}
	links, bad, why := audit.Links(lines)
	if bad >= 0 {
		return proto.Errorf(proto.EIO, "the audit log does not verify at entry %d: %s (ox-audit verify)", audit.LineSeq(lines[bad]), why)
	}
	last := links[len(links)-1]
	h.Head = proto.AuditHead{Seq: last.Seq, Hash: last.Hash}
	out, err := receipt.Lines(h, log, patch, lines)
	if err != nil {
		return proto.Errorf(proto.EIO, "%v", err)
	}
	for _, l := range out {
		if err := emit(&proto.ReceiptLine{Type: proto.RecordReceiptLine, Line: string(l)}); err != nil {
			return err
		}
	}
	return nil
}
