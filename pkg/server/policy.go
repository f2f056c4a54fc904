package server

import (
	"context"

	"github.com/oxios/oxios/pkg/proto"
)

func init() {
	handlers[proto.OpPolicyShow] = handler{serve: servePolicyShow}
	handlers[proto.OpPolicySet] = handler{serve: servePolicySet}
	handlers[proto.OpPolicyCheck] = handler{serve: servePolicyCheck}
	handlers[proto.OpPolicyTest] = handler{serve: servePolicyTest}
}

func servePolicyShow(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.BudgetArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.PolicyShow(ctx, c.cred, a.Agent, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func servePolicySet(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.PolicySetArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.PolicySet(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

func servePolicyCheck(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.PolicyCheckArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	rec, err := c.s.k.PolicyCheck(ctx, c.cred, a, req.Args)
	if err != nil {
		return nil, err
	}
	return marshal(&rec)
}

// servePolicyTest streams the actions judged otherwise; the reply counts.
func servePolicyTest(ctx context.Context, c *conn, req *proto.Request) ([]byte, error) {
	var a proto.PolicyTestArgs
	if err := decodeArgs(req, &a); err != nil {
		return nil, err
	}
	res, err := c.s.k.PolicyTest(ctx, c.cred, a, req.Args, func(rec *proto.PolicyTestRecord) error {
		b, err := marshal(rec)
		if err != nil {
			return err
		}
		return c.sendItem(req.ID, b)
	})
	if err != nil {
		return nil, err
	}
	return marshal(&res)
}
