package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpRunSpawn] = handler{serve: serveRunSpawn}
	handlers[proto.OpRunAttach] = handler{serve: serveRunAttach}
	handlers[proto.OpRunWait] = handler{serve: serveRunWait}
	handlers[proto.OpRunKill] = handler{serve: serveRunKill}
	handlers[proto.OpRunPs] = handler{serve: serveRunPs}
	handlers[proto.OpExec] = handler{serve: serveExec}
	handlers[proto.OpBudgetShow] = handler{serve: serveBudgetShow}
	handlers[proto.OpBudgetSet] = handler{serve: serveBudgetSet}
	handlers[proto.OpBudgetReset] = handler{serve: serveBudgetReset}
	handlers[proto.OpBudgetCheck] = handler{serve: serveBudgetCheck}
	handlers[proto.OpBudgetCharge] = handler{serve: serveBudgetCharge}
}

// serveRunSpawn starts a run. Attached, it streams the run's records until
// its exit record (or until the client goes away: the run goes on).
func serveRunSpawn(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.SpawnArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.RunSpawn(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	if !a.Attach {
		return marshal(&rec)
	}
	return nil, c.s.k.RunAttach(c.follow, c.cred, rec.ID, req.Args, c.itemSender(req.ID))
}

// itemSender sends each record as an item, flushed at once: a run's
// records are read as they happen.
func (c *conn) itemSender(id uint64) func([]byte) error {
	return func(b []byte) error {
		if err := c.sendItem(id, b); err != nil {
			return err
		}
		c.flush()
		return nil
	}
}

func serveRunAttach(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.AttachArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.RunAttach(c.follow, c.cred, a.Run, req.Args, c.itemSender(req.ID))
}

func serveRunWait(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.RunsArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	send := c.itemSender(req.ID)
	return nil, c.s.k.RunWait(c.follow, c.cred, a.Runs, req.Args, func(rec *proto.ExitRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return send(b)
	})
}

func serveRunKill(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.KillArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.RunKill(ctx, c.cred, a, req.Args, c.runSender(req.ID))
}

func serveRunPs(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.PsArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.RunPs(ctx, c.cred, a, req.Args, c.runSender(req.ID))
}

func (c *conn) runSender(id uint64) func(*proto.RunRecord) error {
	return func(rec *proto.RunRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(id, b)
	}
}

func serveExec(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ExecArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, c.refused(req, "exec", err)
	}
	rec, err := c.s.k.Exec(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveBudgetShow(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.BudgetArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return budgetReply(c.s.k.BudgetShow(ctx, c.cred, a.Agent, req.Args))
}

func serveBudgetSet(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.BudgetSetArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return budgetReply(c.s.k.BudgetSet(ctx, c.cred, a, req.Args))
}

func serveBudgetReset(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.BudgetArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return budgetReply(c.s.k.BudgetReset(ctx, c.cred, a.Agent, req.Args))
}

func serveBudgetCheck(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.BudgetCheckArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return budgetReply(c.s.k.BudgetCheck(ctx, c.cred, a, req.Args))
}

func serveBudgetCharge(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.BudgetChargeArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return budgetReply(c.s.k.BudgetCharge(ctx, c.cred, a, req.Args))
}

func budgetReply(rec proto.BudgetRecord, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}
