package kernel

import (
	"errors"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/policy/judge"
	"github.com/oxios/oxios/pkg/proto"
)

// The policy question of a syscall (Syscall.Asks) is the one value both
// the gate and the dry run ask: enforcement answers it for a call
// (answer), and ox-policy check and ox-policy test (dryRun) for an op
// named with words, through the same answer. What an op asks is declared
// once, in the syscall table; an op that asks nothing is allowed by any
// policy, and one that is the admin's is refused to a run.

// policyAsk is what a call asks of the agent's policy.
type policyAsk uint8

const (
	askNone     policyAsk = iota
	askRead               // read key
	askWrite              // write key at size (< 0: delete it)
	askList               // list keys
	askRemember           // store a memory of kind key
	askRecall             // use memories of kind key ("": of the kinds it is given)
	askExec               // run a command (argv, or a command line)
	askTool               // run the WASM tool key
	askHost               // fetch from host key
	askMCP                // call tool of MCP server key
)

// asking is one policy question with what it is about.
type asking struct {
	ask   policyAsk
	key   string   // the key, memory kind, tool, host or MCP server
	tool  string   // an MCP server's tool
	argv  []string // exec: the argv, or
	line  string   // its command line
	total int64    // a write: the bytes the agent's state would hold
}

// answer is p's answer to q: nil allows, a *policy.Denied refuses, a
// policy.Asked holds the call for an operator.
func answer(p *policy.Policy, q asking) error {
	switch q.ask {
	case askRead:
		return p.CheckStateRead(q.key)
	case askWrite:
		return p.CheckStateWrite(q.key, q.total)
	case askList:
		return p.CheckStateList()
	case askRemember:
		return p.CheckMemory(q.key, 0)
	case askRecall:
		return p.CheckRecall(q.key)
	case askExec:
		_, err := p.CheckExec(q.argv, q.line)
		return err
	case askTool:
		return p.CheckTool(q.key)
	case askHost:
		return p.CheckHost(q.key)
	case askMCP:
		_, err := p.CheckMCP(q.key, q.tool)
		return err
	}
	return nil
}

// dryOps are the words ox-policy check takes for an op besides its name.
var dryOps = map[string]string{"read": proto.OpStateLoad, "write": proto.OpStateSave, "memory": proto.OpMemRemember, "tool": proto.OpToolRun, "fetch": proto.OpNetFetch}

// dryRun is the gate, its Do skipped, for op called with args (the
// words of ox-policy check, or what an audit entry says) by a run of
// agent under policy p: the op's declared question, answered by answer.
// A nil *Denied is allowed; an ask rule's verdict is a Denied whose rule
// is named ask.* (judge.Asks); an error means the op or its args are not
// understood.
func dryRun(p *policy.Policy, usage judge.Usage, agent, op string, args []string) (*policy.Denied, error) {
	if alias, ok := dryOps[op]; ok {
		op = alias
	}
	sc := syscalls[op]
	if sc == nil || sc.Recorded {
		return nil, proto.Errorf(proto.EINVAL, "op %q: no such syscall (oxios(7) lists them)", op)
	}
	if sc.Admin {
		return &policy.Denied{Rule: "admin", Reason: op + " is for the admin, not a run of " + agent}, nil
	}
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	q := asking{ask: sc.Asks, key: arg(0)}
	switch sc.Asks {
	case askWrite:
		total, size := usage(agent, q.key)
		q.total = total - size
	case askExec:
		if len(args) == 0 {
			return nil, proto.Errorf(proto.EINVAL, "exec: give the command")
		}
		switch {
		case args[0] == "--": // an argv, even of one word
			q.argv = args[1:]
		case len(args) == 1:
			q.line = args[0]
		default:
			q.argv = args
		}
	case askHost:
		q.key = judge.HostOf(q.key)
	case askMCP:
		q.tool = arg(1)
	}
	err := answer(p, q)
	var d *policy.Denied
	if errors.As(err, &d) {
		return d, nil
	}
	if a := policy.AsAsked(err); a != nil {
		// An ask rule: reported as a rule of its own (ask.*), which
		// callers tell from a refusal by its name.
		return &policy.Denied{Rule: a.Rule, Reason: a.Reason}, nil
	}
	if err != nil {
		return nil, proto.Errorf(proto.EINVAL, "%s %s: %v", op, strings.Join(args, " "), err)
	}
	return nil, nil
}

// dryRun is dryRun on the kernel's state (a write is judged against the
// agent's quota).
func (k *Kernel) dryRun(p *policy.Policy, agent, op string, args []string) (*policy.Denied, error) {
	return dryRun(p, k.state.Usage, agent, op, args)
}
