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
	var res proto.PolicyTestResult
	if err := k.gate(call{op: proto.OpPolicyTest, c: c, agent: a.Agent, raw: raw}); err != nil {
		return res, err
	}
	p, err := judge.Proposed(a.Policy)
	if err != nil {
		return res, err
	}
	return judge.Replay(ctx, p, k.dryRun, a.Agent, a.Entries, emit)
}
