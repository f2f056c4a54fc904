package server

import (
	"context"
	"encoding/json"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpAgentList] = handler{serve: serveAgentList}
	handlers[proto.OpAgentShow] = handler{serve: serveAgentShow}
	handlers[proto.OpAgentRemove] = handler{serve: serveAgentRemove}
}

func serveAgentList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	return nil, c.s.k.AgentList(ctx, c.cred, func(rec *proto.AgentRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
}

func serveAgentShow(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.AgentArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.AgentShow(ctx, c.cred, a.Agent, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveAgentRemove(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.AgentArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.AgentRemove(ctx, c.cred, a.Agent, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

// agentReads are the ops that read an agent: asked of an agent that does
// not exist, each answers the same ENOENT (proto.NoAgent). Writes
// (state.save, mem.remember) and run.spawn create an agent; version.* and
// audit.log still read a removed agent's history; events.subscribe may wait
// for one. exec and tool.run are not here: their policy check, and the
// audit entry of a refusal, must come first (an attack on an agent that
// does not exist yet is still on the log); the kernel's gate should order
// them.
var agentReads = map[string]bool{
	proto.OpStateList:    true,
	proto.OpMemRecall:    true,
	proto.OpMemList:      true,
	proto.OpMemForget:    true,
	proto.OpRunPs:        true,
	proto.OpScheduleList: true,
	proto.OpBudgetShow:   true,
	proto.OpPolicyShow:   true,
}

// agentExists answers ENOENT for a request of agentReads naming an agent
// that does not exist; args that do not decode are left to the handler.
func (c *conn) agentExists(req *proto.Request) error {
	if !agentReads[req.Op] || len(req.Args) == 0 {
		return nil
	}
	var a struct {
		Agent string `json:"agent"`
	}
	if json.Unmarshal(req.Args, &a) != nil || a.Agent == "" {
		return nil
	}
	return c.s.k.RequireAgent(c.cred, a.Agent)
}
