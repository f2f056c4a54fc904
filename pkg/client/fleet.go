package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// FleetStatus lists the nodes of the daemon's fleet (ENOTCONN alone).
func (c *Client) FleetStatus(ctx context.Context, fn func(proto.NodeRecord) error) error {
	return c.Stream(ctx, proto.OpFleetStatus, struct{}{}, func(item json.RawMessage) error {
		var rec proto.NodeRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// FleetCall runs op with args on node (a name, proto.FleetAll or
// proto.FleetAny): fn gets each record, with its "node"; a unary op's
// record on one node comes back as the result.
func (c *Client) FleetCall(ctx context.Context, node, op string, args any, fn func(rec json.RawMessage) error) (json.RawMessage, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var res json.RawMessage
	err = c.StreamResult(ctx, proto.OpFleetCall, proto.FleetCallArgs{Node: node, Op: op, Args: raw}, fn, &res)
	return res, err
}

// FleetWitness checks the daemon's audit chain against the heads its
// peers hold: one record per peer.
func (c *Client) FleetWitness(ctx context.Context, fn func(proto.WitnessRecord) error) error {
	return c.Stream(ctx, proto.OpFleetWitness, struct{}{}, func(item json.RawMessage) error {
		var rec proto.WitnessRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}

// VersionPush pushes the versioned tree to the git remote (admin).
func (c *Client) VersionPush(ctx context.Context, remote string) (proto.PushRecord, error) {
	var rec proto.PushRecord
	err := c.Call(ctx, proto.OpVersionPush, proto.PushArgs{Remote: remote}, &rec)
	return rec, err
}
