package kernel

import (
	"errors"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/policy/judge"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// The policy question of a syscall (Syscall.Asks) is the one value both
// the gate and the dry run ask: enforcement answers it for a call
// (answer), and ox-policy check and ox-policy test (dryRun) for an op
// named with words, through the same answer and the same hook (hook.go),
// after the same authorize step (gate.go). What an op asks is declared
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
	askSend               // send a message to agent key
	askWork               // take host folder key as a run's work ("": none)
	askModel              // ask the model of oxios.toml named key (llm.chat)
)

// asking is one policy question with what it is about.
type asking struct {
	ask   policyAsk
	key   string   // the key, memory kind, tool, host or MCP server
	tool  string   // an MCP server's tool
	argv  []string // exec: the argv, or
	line  string   // its command line
	total int64    // a write: the bytes the agent's state would hold
	// A message: its sender, and the recipient's policy, which must
	// accept it (nil: not asked).
	from    string
	accepts *policy.Policy
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
	case askWork:
		if q.key == "" {
			return nil
		}
		return p.CheckWork(q.key)
	case askModel:
		return p.CheckModel(q.key)
	case askSend: // policy.CheckMessage's two questions
		if err := p.CheckSend(q.key); err != nil || q.accepts == nil {
			return err
		}
		return q.accepts.CheckAccept(q.from)
	}
	return nil
}

// binds reports whether the question binds c: what acts as the agent
// (an exec, a tool, a fetch, an MCP call, a message it sends) binds
// everyone, the admin too; the agent's state and memory are the admin's
// to use as it likes.
func (a policyAsk) binds(c *Cred) bool {
	switch a {
	case askExec, askTool, askHost, askMCP, askSend, askWork, askModel:
		return true
	}
	return !c.Admin
}

// dryOps are the words ox-policy check takes for an op besides its name.
var dryOps = map[string]string{"read": proto.OpStateLoad, "write": proto.OpStateSave, "memory": proto.OpMemRemember, "tool": proto.OpToolRun, "fetch": proto.OpNetFetch, "model": proto.OpLLMChat}

// dryRun is the gate, its Do skipped, for op called with args (the
// words of ox-policy check, or what an audit entry says) by c on agent
// under policy p: the gate's authorize step (authorize), then the op's
// declared question if it binds c, answered by answer and, if the rules
// allow, by the policy's hook (env's, when env is not nil; hook.go). It returns ""
// when the call would pass, else the refusal's code and what refused
// it: a policy rule (EPERM), "admin" for what is the admin's (EACCES),
// "access" for an agent c may not act on (EPERM). An ask rule's verdict
// is "" with a Denied whose rule is named ask.* (judge.Asks); an error
// means the op or its args are not understood.
func dryRun(p *policy.Policy, usage judge.Usage, env *dryEnv, c *Cred, agent, op string, args []string) (string, *policy.Denied, error) {
	if alias, ok := dryOps[op]; ok {
		op = alias
	}
	sc := syscalls[op]
	if sc == nil || sc.Recorded {
		return "", nil, proto.Errorf(proto.EINVAL, "op %q: no such syscall (oxios(7) lists them)", op)
	}
	// An op that names its agent, called with none, is about every
	// agent: the admin's, as the gate has it.
	every := agent == "" && sc.Agent == agentNamed
	perr := authorize(c, op, sc, sc.Admin || every, !every && (sc.Agent == agentNamed || agent != ""), agent, every)
	if perr == nil && sc.Names && len(args) > 0 {
		perr = authorize(c, op, sc, false, true, args[0], false)
		args = args[1:]
	}
	if perr != nil {
		rule := "access"
		if perr.Code == proto.EACCES {
			rule = "admin"
		}
		return perr.Code, &policy.Denied{Rule: rule, Reason: perr.Message}, nil
	}
	if sc.Asks == askNone || !sc.Asks.binds(c) {
		return "", nil, nil
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
		// As the gate counts a write of an empty value: the key's own
		// overhead (state.KeyOverhead) included.
		total, size := usage(agent, q.key)
		q.total = total - size + state.Cost(0)
	case askExec:
		if len(args) == 0 {
			return "", nil, proto.Errorf(proto.EINVAL, "exec: give the command")
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
	case askModel:
		if q.key == "" {
			return "", nil, proto.Errorf(proto.EINVAL, "%s: give the model's name, as a run asks for it (ox-agent --models lists them)", op)
		}
	case askMCP:
		q.tool = arg(1)
	case askSend:
		q.from, q.accepts = agent, p
		if q.key != agent && env != nil {
			rp, err := env.policyOf(q.key)
			if err != nil {
				return "", nil, err
			}
			q.accepts = rp
		}
	}
	err := answer(p, q)
	if err == nil && env != nil {
		err = env.hook(p, c, op, agent, q)
	}
	var d *policy.Denied
	if errors.As(err, &d) {
		return proto.EPERM, d, nil
	}
	if a := policy.AsAsked(err); a != nil {
		// An ask rule: reported as a rule of its own (ask.*), which
		// callers tell from a refusal by its name.
		return "", &policy.Denied{Rule: a.Rule, Reason: a.Reason}, nil
	}
	if err != nil {
		return "", nil, proto.Errorf(proto.EINVAL, "%s %s: %v", op, strings.Join(args, " "), err)
	}
	return "", nil, nil
}

// dryEnv is what a dry run asks of the kernel besides the policy it
// judges by: a hook's verdict (hook, told it is a dry run), the policy
// in force of another agent (a message's recipient).
type dryEnv struct {
	hook     func(p *policy.Policy, c *Cred, op, agent string, q asking) error
	policyOf func(agent string) (*policy.Policy, error)
}

// dryEnv is the kernel's.
func (k *Kernel) dryEnv() *dryEnv {
	return &dryEnv{
		hook: func(p *policy.Policy, c *Cred, op, agent string, q asking) error {
			return k.hook(k.root, p, c, op, agent, q, true)
		},
		policyOf: k.policyOf,
	}
}

// dryRun is the dry run of ox-policy check and ox-policy test
// (judge.Func): a call by a run of agent, on the kernel's state (a write
// is judged against the agent's quota).
func (k *Kernel) dryRun(p *policy.Policy, agent, op string, args []string) (*policy.Denied, error) {
	_, d, err := dryRun(p, k.state.Usage, k.dryEnv(), &Cred{Agent: agent, Run: "-"}, agent, op, args)
	return d, err
}

// Verdict is the dry run of a call by c: what the gate answers c's call
// of op on agent with args (the words of ox-policy check), under the
// agent's policy in force, its work skipped. It returns "" for a call
// that passes, else the refusal's code (EACCES, EPERM) and what refused
// it (a policy rule, "admin", "access"); an ask rule is "" with its
// rule. TestEveryCallAgrees (pkg/serve) holds every served op's real
// call to it, for every kind of caller.
func (k *Kernel) Verdict(c *Cred, agent, op string, args []string) (code, rule string, err error) {
	var p *policy.Policy
	if agent != "" { // an op on no agent asks no policy
		if p, err = k.policyOf(agent); err != nil {
			return "", "", err
		}
	}
	code, d, err := dryRun(p, k.state.Usage, k.dryEnv(), c, agent, op, args)
	if d != nil {
		rule = d.Rule
	}
	return code, rule, err
}
