package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// Spawn starts a run and returns its record. a.Attach is ignored: use
// SpawnAttach to follow the run.
func (c *Client) Spawn(ctx context.Context, a proto.SpawnArgs) (proto.RunRecord, error) {
	a.Attach = false
	var rec proto.RunRecord
	err := c.Call(ctx, proto.OpRunSpawn, a, &rec)
	return rec, err
}

// SpawnAttach starts a run and calls fn with each of its records (the run
// record first, the exit record last), as they come.
func (c *Client) SpawnAttach(ctx context.Context, a proto.SpawnArgs, fn func(rec json.RawMessage) error) error {
	a.Attach = true
	return c.Stream(ctx, proto.OpRunSpawn, a, fn)
}

// Attach calls fn with each record of a run, from its first, until its
// exit record.
func (c *Client) Attach(ctx context.Context, run string, fn func(rec json.RawMessage) error) error {
	return c.Stream(ctx, proto.OpRunAttach, proto.AttachArgs{Run: run}, fn)
}

// Wait calls fn with the exit record of each run as it exits.
func (c *Client) Wait(ctx context.Context, runs []string, fn func(proto.ExitRecord) error) error {
	return c.Stream(ctx, proto.OpRunWait, proto.RunsArgs{Runs: runs}, func(item json.RawMessage) error {
		var rec proto.ExitRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// Kill sends a signal to runs and returns their records.
func (c *Client) Kill(ctx context.Context, a proto.KillArgs, fn func(proto.RunRecord) error) error {
	return c.runStream(ctx, proto.OpRunKill, a, fn)
}

// Stdin writes data to the stdin of run, a run started with it open,
// then closes it when close is set.
func (c *Client) Stdin(ctx context.Context, run string, data []byte, close bool) (proto.RunRecord, error) {
	var rec proto.RunRecord
	err := c.Call(ctx, proto.OpRunStdin, proto.StdinArgs{Run: run, Data: data, Close: close}, &rec)
	return rec, err
}

// Ps calls fn with each run record.
func (c *Client) Ps(ctx context.Context, a proto.PsArgs, fn func(proto.RunRecord) error) error {
	return c.runStream(ctx, proto.OpRunPs, a, fn)
}

func (c *Client) runStream(ctx context.Context, op string, args any, fn func(proto.RunRecord) error) error {
	return c.Stream(ctx, op, args, func(item json.RawMessage) error {
		var rec proto.RunRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// Exec runs a command for an agent under its policy.
func (c *Client) Exec(ctx context.Context, a proto.ExecArgs) (proto.ExecRecord, error) {
	var rec proto.ExecRecord
	err := c.Call(ctx, proto.OpExec, a, &rec)
	return rec, err
}

// BudgetShow returns an agent's budget.
func (c *Client) BudgetShow(ctx context.Context, agent string) (proto.BudgetRecord, error) {
	return c.budget(ctx, proto.OpBudgetShow, proto.BudgetArgs{Agent: agent})
}

// BudgetSet changes an agent's limits (admin only).
func (c *Client) BudgetSet(ctx context.Context, a proto.BudgetSetArgs) (proto.BudgetRecord, error) {
	return c.budget(ctx, proto.OpBudgetSet, a)
}

// BudgetReset zeroes what an agent has used (admin only).
func (c *Client) BudgetReset(ctx context.Context, agent string) (proto.BudgetRecord, error) {
	return c.budget(ctx, proto.OpBudgetReset, proto.BudgetArgs{Agent: agent})
}

// BudgetCheck asks whether the calling run may spend about tokens more:
// a *proto.Error with code EDQUOT if not.
func (c *Client) BudgetCheck(ctx context.Context, agent string, tokens int64) (proto.BudgetRecord, error) {
	return c.budget(ctx, proto.OpBudgetCheck, proto.BudgetCheckArgs{Agent: agent, Tokens: tokens})
}

// BudgetCharge records the usage a model call reported. EDQUOT when the
// charge takes the agent or the run over its limit (it is charged all
// the same: it was spent).
func (c *Client) BudgetCharge(ctx context.Context, a proto.BudgetChargeArgs) (proto.BudgetRecord, error) {
	return c.budget(ctx, proto.OpBudgetCharge, a)
}

func (c *Client) budget(ctx context.Context, op string, args any) (proto.BudgetRecord, error) {
	var rec proto.BudgetRecord
	err := c.Call(ctx, op, args, &rec)
	return rec, err
}
