package kernel

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

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

func serveMsgRecv(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error) {
	var a proto.MsgListArgs
	if err := proto.DecodeArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	if a.Follow || a.Wait != "" {
		ctx = r.Out.Follow()
	}
	return nil, k.MsgRecv(ctx, c, a, r.Args, followed[proto.MsgRecord](r.Out, a.Follow))
}

func serveApproveList(k *Kernel, ctx context.Context, c *Cred, r *Request) (json.RawMessage, error) {
	var a proto.ApproveListArgs
	if err := proto.DecodeOptionalArgs(r.Op, r.Args, &a); err != nil {
		return nil, err
	}
	if a.Follow {
		ctx = r.Out.Follow()
	}
	return nil, k.ApproveList(ctx, c, a, r.Args, followed[proto.ApprovalRecord](r.Out, a.Follow))
}
