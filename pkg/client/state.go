package client

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

// StateSave stores value under key of agent and returns its record.
func (c *Client) StateSave(ctx context.Context, agent, key string, value []byte) (proto.StateRecord, error) {
	v, enc := proto.EncodeValue(value)
	var rec proto.StateRecord
	err := c.callState(ctx, proto.OpStateSave, &handArgs{agent: agent, key: key, value: v, encoding: enc, save: true}, &rec)
	return rec, err
}

// StateLoad returns the value under key of agent and its record.
func (c *Client) StateLoad(ctx context.Context, agent, key string) ([]byte, proto.StateRecord, error) {
	var rec proto.StateRecord
	if err := c.callState(ctx, proto.OpStateLoad, &handArgs{agent: agent, key: key}, &rec); err != nil {
		return nil, rec, err
	}
	return stateValue(rec)
}

// stateValue is the value a state.load's record carries.
func stateValue(rec proto.StateRecord) ([]byte, proto.StateRecord, error) {
	var v []byte
	if rec.Value != nil {
		var perr *proto.Error
		if v, perr = proto.DecodeValue(*rec.Value, rec.Encoding); perr != nil {
			return nil, rec, perr
		}
	}
	return v, rec, nil
}

// StateStat returns the record of key of agent without its value:
// whether it exists (ENOENT if not), its size and its time.
func (c *Client) StateStat(ctx context.Context, agent, key string) (proto.StateRecord, error) {
	var rec proto.StateRecord
	err := c.callState(ctx, proto.OpStateStat, &handArgs{agent: agent, key: key}, &rec)
	return rec, err
}

// StateDelete removes key of agent and returns the record it had.
func (c *Client) StateDelete(ctx context.Context, agent, key string) (proto.StateRecord, error) {
	var rec proto.StateRecord
	err := c.callState(ctx, proto.OpStateDelete, &handArgs{agent: agent, key: key}, &rec)
	return rec, err
}

// StateList calls fn with the record of each key of agent at or below
// prefix, in key order.
func (c *Client) StateList(ctx context.Context, agent, prefix string, fn func(proto.StateRecord) error) error {
	return c.Stream(ctx, proto.OpStateList, proto.StateListArgs{Agent: agent, Prefix: prefix}, func(item json.RawMessage) error {
		var rec proto.StateRecord
		if err := json.Unmarshal(item, &rec); err != nil {
			return err
		}
		return fn(rec)
	})
}
