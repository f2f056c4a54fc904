package serve

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// The syscalls whose wire shape is their own: fast paths for the state
// ops, streams with a reply, raw log lines, and calls that follow.

// stateRecordSize is what a state record without its value takes besides
// its agent and key (its longest time and size): the buffer it is
// written in is allocated once, not grown four times.
const stateRecordSize = 128

func stateSave(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.StateSaveArgs
	if err := proto.DecodeSaveArgs(r.Args, &a); err != nil {
		return nil, err
	}
	rec, err := k.StateSave(ctx, c, a, r.Args)
	if err != nil {
		return nil, err
	}
	return proto.AppendStateRecord(r.Scratch(stateRecordSize+len(rec.Agent)+len(rec.Key)), &rec), nil
}

func stateDelete(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.StateArgs
	if err := proto.DecodeStateArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	rec, err := k.StateDelete(ctx, c, a, r.Args)
	if err != nil {
		return nil, err
	}
	return proto.AppendStateRecord(r.Scratch(stateRecordSize+len(rec.Agent)+len(rec.Key)), &rec), nil
}

func stateLoad(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.StateArgs
	if err := proto.DecodeStateArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	v, rec, err := k.StateLoad(ctx, c, a, r.Args)
	if err != nil {
		return nil, err
	}
	return proto.AppendStateRecordValue(r.Scratch(192+len(v)*4/3), &rec, v), nil
}

func stateList(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.StateListArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	var buf []byte
	return nil, k.StateList(ctx, c, a, r.Args, func(rec *proto.StateRecord) error {
		buf = proto.AppendStateRecord(buf[:0], rec)
		return r.Out.Item(buf)
	})
}

// memForget streams the forgotten memories' records: forget is one
// commit, and its result may be long (--before).
func memForget(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.MemForgetArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	recs, err := k.MemForget(ctx, c, a, r.Args)
	send := items[proto.MemoryRecord](r.Out)
	for i := range recs {
		if serr := send(&recs[i]); serr != nil {
			return nil, serr
		}
	}
	return nil, err
}

func auditLog(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.AuditLogArgs
	if err := proto.DecodeOptionalArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	if a.Follow {
		ctx = r.Out.Follow()
	}
	// Entries already are JSON: each line is sent as the item itself. A
	// follower gets each batch as it comes, not when a buffer fills.
	return nil, k.AuditLog(ctx, c, a, r.Args, r.Out.Item, flusher(r.Out))
}

func flusher(out Out) func() error {
	return func() error {
		out.Flush()
		return nil
	}
}

func auditShow(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.AuditShowArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	return k.AuditShow(ctx, c, a.Seq)
}

func auditExport(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	return nil, k.AuditExport(ctx, c, r.Out.Item)
}

// events streams events until the client closes its side of the
// connection or the daemon stops; each record is flushed as it comes.
func events(k *kernel.Kernel, _ context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.EventsArgs
	if err := proto.DecodeOptionalArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	return nil, k.Events(r.Out.Follow(), c, a, r.Args, func(rec any) error {
		if b, ok := rec.(json.RawMessage); ok {
			return r.Out.Item(b) // encoded once for every subscriber
		}
		b, err := proto.Marshal(rec)
		if err != nil {
			return err
		}
		return r.Out.Item(b)
	}, flusher(r.Out))
}

// policyTest streams the actions judged otherwise; the reply counts.
func policyTest(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.PolicyTestArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	res, err := k.PolicyTest(ctx, c, a, r.Args, items[proto.PolicyTestRecord](r.Out))
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&res)
}

// runSpawn starts a run. Attached, it streams the run's records until
// its exit record (or until the client goes away: the run goes on).
func runSpawn(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.SpawnArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	rec, err := k.RunSpawn(ctx, c, a, r.Args)
	if err != nil {
		return nil, err
	}
	if !a.Attach {
		return proto.Marshal(&rec)
	}
	return nil, k.RunAttach(r.Out.Follow(), c, rec.ID, r.Args, flushed(r.Out))
}

func runAttach(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.AttachArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	return nil, k.RunAttach(r.Out.Follow(), c, a.Run, r.Args, flushed(r.Out))
}

func runWait(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.RunsArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	send := flushed(r.Out)
	return nil, k.RunWait(r.Out.Follow(), c, a.Runs, r.Args, func(rec *proto.ExitRecord) error {
		b, err := proto.Marshal(rec)
		if err != nil {
			return err
		}
		return send(b)
	})
}

// followed sends each record as an item and, when the call follows,
// flushes it at once: a follower reads each as it comes.
func followed[R any](out Out, follow bool) func(*R) error {
	send := items[R](out)
	return func(rec *R) error {
		if err := send(rec); err != nil {
			return err
		}
		if follow {
			out.Flush()
		}
		return nil
	}
}

func msgRecv(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.MsgListArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	if a.Follow || a.Wait != "" {
		ctx = r.Out.Follow()
	}
	return nil, k.MsgRecv(ctx, c, a, r.Args, followed[proto.MsgRecord](r.Out, a.Follow))
}

func approveList(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.ApproveListArgs
	if err := proto.DecodeOptionalArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	if a.Follow {
		ctx = r.Out.Follow()
	}
	return nil, k.ApproveList(ctx, c, a, r.Args, followed[proto.ApprovalRecord](r.Out, a.Follow))
}

func fleetCall(k *kernel.Kernel, ctx context.Context, c *kernel.Cred, r *Request) (json.RawMessage, error) {
	var a proto.FleetCallArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	// A followed call (events, attach) lasts until the client goes.
	return k.FleetCall(r.Out.Follow(), c, a, r.Args, flushed(r.Out))
}
