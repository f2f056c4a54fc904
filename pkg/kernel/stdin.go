package kernel

import (
	"context"
	"errors"
	"fmt"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/supervisor"
	"github.com/oxios/oxios/pkg/work"
)

// RunStdin writes a.Data to the stdin of run a.Run, and then closes it
// when a.Close (the run reads end of file): the input of a run started
// with its stdin open (SpawnArgs.OpenStdin; the mount's spawn file starts
// its runs so), through the mount's runs/RUN/stdin. Writes reach the run
// in the order they are made; one the run does not read waits for it
// (or for ctx). Each is audited with its size and the BLAKE3 digest of
// what was written.
func (k *Kernel) RunStdin(ctx context.Context, c *Cred, a proto.StdinArgs, raw []byte) (proto.RunRecord, error) {
	return sysRunStdin.Call(k, ctx, c, a, raw)
}

func (k *Kernel) runStdin(ctx context.Context, c *Cred, a proto.StdinArgs, raw []byte) (proto.RunRecord, error) {
	r, err := k.run(c, proto.OpRunStdin, a.Run, raw)
	if err != nil {
		return proto.RunRecord{}, err
	}
	if len(a.Data) == 0 && !a.Close {
		return r.Record(), proto.Errorf(proto.EINVAL, "run.stdin: no data, and no close")
	}
	var werr error
	if len(a.Data) > 0 {
		werr = r.WriteStdin(ctx, a.Data)
	}
	if werr == nil && a.Close {
		werr = r.CloseStdin(ctx)
	}
	switch {
	case errors.Is(werr, supervisor.ErrNoStdin):
		return r.Record(), proto.Errorf(proto.EINVAL, "run %s: %v (a run started through the mount's spawn file keeps it open)", a.Run, werr)
	case errors.Is(werr, supervisor.ErrStdinClosed):
		return r.Record(), proto.Errorf(proto.ESRCH, "run %s: %v", a.Run, werr)
	case errors.Is(werr, context.Canceled) || errors.Is(werr, context.DeadlineExceeded):
		return r.Record(), proto.Errorf(proto.ECANCELED, "run %s: the write to its stdin was interrupted before the run read it", a.Run)
	case werr != nil:
		return r.Record(), proto.Errorf(proto.EIO, "run %s's stdin: %v", a.Run, werr)
	}
	target := fmt.Sprintf("%s:%s stdin %d bytes %s", r.Agent(), a.Run, len(a.Data), work.Digest(a.Data)[:16])
	if a.Close {
		target += " closed"
	}
	e := &audit.Entry{Actor: c.Actor(), Op: proto.OpRunStdin, Target: target, Args: audit.ArgsDigest(raw), Result: "ok"}
	if err := k.submit(ctx, &tx{entry: e}, true); err != nil {
		return r.Record(), err
	}
	return r.Record(), nil
}
