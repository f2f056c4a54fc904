package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/policy/judge"
	"github.com/oxios/oxios/pkg/proto"
)

// PolicyTest replays audit entries of a.Agent against a proposed policy
// and emits each past action it judges otherwise than what happened: an
// action that was done and would now be refused, one a policy refused
// that would now be allowed, and one that would now wait for an
// operator's approval (an ask rule). It changes nothing and, like any
// read, is audited only when refused. The replay is judge.Replay's.
func (k *Kernel) PolicyTest(ctx context.Context, c *Cred, a proto.PolicyTestArgs, raw []byte, emit func(*proto.PolicyTestRecord) error) (proto.PolicyTestResult, error) {
	return sysPolicyTest.Call(k, ctx, c, policyTesting{a, emit}, raw)
}

// policyTesting is what policy.test takes: its args, and where the
// actions judged otherwise go.
type policyTesting struct {
	proto.PolicyTestArgs
	emit func(*proto.PolicyTestRecord) error
}

func (k *Kernel) policyTest(ctx context.Context, _ *Cred, a policyTesting, _ []byte) (proto.PolicyTestResult, error) {
	p, err := judge.Proposed(a.Policy)
	if err != nil {
		return proto.PolicyTestResult{}, err
	}
	return judge.Replay(ctx, p, k.dryRun, a.Agent, a.Entries, a.emit)
}
