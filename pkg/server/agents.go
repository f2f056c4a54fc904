package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

// The ops of forks, messages and approvals (issue 22).
func init() {
	handlers[proto.OpAgentFork] = handler{serve: serveAgentFork}
	handlers[proto.OpAgentRemove] = handler{serve: serveAgentRemove}
	handlers[proto.OpAgentDiff] = handler{serve: serveAgentDiff}
	handlers[proto.OpMsgSend] = handler{serve: serveMsgSend}
	handlers[proto.OpMsgList] = handler{serve: serveMsgList}
	handlers[proto.OpMsgRecv] = handler{serve: serveMsgRecv}
	handlers[proto.OpApproveList] = handler{serve: serveApproveList}
	handlers[proto.OpApproveDecide] = handler{serve: serveApproveDecide}
}

// itemSender returns an emit function that sends each record as an item.
func itemSender[T any](c *conn, id uint64) func(*T) error {
	return func(rec *T) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(id, b)
	}
}

func serveAgentFork(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ForkArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.Fork(ctx, c.cred, a, req.Args)
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
	rec, err := c.s.k.RemoveAgent(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveAgentDiff(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.AgentDiffArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.AgentDiff(ctx, c.cred, a, req.Args, itemSender[proto.DiffRecord](c, req.ID))
}

func serveMsgSend(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MsgSendArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.MsgSend(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func serveMsgList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MsgListArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.MsgList(ctx, c.cred, a, req.Args, itemSender[proto.MsgRecord](c, req.ID))
}

func serveMsgRecv(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.MsgListArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.MsgRecv(ctx, c.cred, a, req.Args, itemSender[proto.MsgRecord](c, req.ID))
}

func serveApproveList(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ApproveListArgs
	if err := optionalArgs(req, &a); err != nil {
		return nil, err
	}
	return nil, c.s.k.ApproveList(ctx, c.cred, a, req.Args, itemSender[proto.ApprovalRecord](c, req.ID))
}

func serveApproveDecide(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.ApproveDecideArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.ApproveDecide(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}
