package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/runspec"
)

// Hooks ([hooks] in oxios-policy(5)): a policy may name, per class of
// question, a program that answers the question after the static rules
// allowed the call. The gate asks it (hooked) wherever it asks the
// question, and the dry run replays it, so ox-policy check and ox-policy
// test answer what the call would. It runs as an exec of the agent does
// (runspec.RunExec: its sandbox, its workspace, a uid of the pool, the
// policy's limits), with the hook's timeout, the syscall's record
// (hookRecord) as JSON on stdin. A refusal is audited under the op
// called, as a rule's is, its rule hooks.CLASS; an allow, under
// policy.hook, so that a reader of the log sees every verdict a hook
// gave.

// opHook records a hook's allow of a call.
const opHook = "policy.hook"

// hookClass is the class of hooks that answers a question (policy.Hook*).
func (a policyAsk) hookClass() string {
	switch a {
	case askRead, askWrite, askList:
		return policy.HookState
	case askRemember, askRecall:
		return policy.HookMemory
	case askExec:
		return policy.HookExec
	case askTool:
		return policy.HookTools
	case askHost:
		return policy.HookNet
	case askMCP:
		return policy.HookMCP
	case askSend:
		return policy.HookMsg
	}
	return ""
}

// hookRecord is what a hook reads on stdin: one JSON object.
type hookRecord struct {
	Type  string `json:"type"` // always "hook"
	Op    string `json:"op"`
	Class string `json:"class"`
	Agent string `json:"agent"`
	// Key is what the call names: a key or prefix, a memory kind, a
	// tool, a host, an MCP server, a message's recipient.
	Key  string   `json:"key,omitempty"`
	Tool string   `json:"tool,omitempty"` // an MCP server's tool
	Argv []string `json:"argv,omitempty"` // an exec's command
	// Size is the bytes the agent's state would hold after a write.
	Size   int64      `json:"size,omitempty"`
	Caller hookCaller `json:"caller"`
	// DryRun: ox-policy check or ox-policy test asks, nothing is done.
	DryRun bool `json:"dry_run,omitempty"`
}

// hookCaller is who calls, as a hook is told.
type hookCaller struct {
	UID   uint32 `json:"uid"`
	Admin bool   `json:"admin,omitempty"`
	Agent string `json:"agent,omitempty"`
	Run   string `json:"run,omitempty"`
}

// hooked is answer, then, if the rules allow, p's hook of the question:
// the question as enforcement asks it for a call of op on agent by c.
func (k *Kernel) hooked(ctx context.Context, p *policy.Policy, c *Cred, op, agent string, q asking) error {
	if err := answer(p, q); err != nil {
		return err
	}
	return k.hook(ctx, p, c, op, agent, q, false)
}

// hook runs p's hook of q's class, if p names one, for a call of op on
// agent by c: nil allows, a *policy.Denied (rule hooks.CLASS) refuses.
// It fails closed: a hook that exits with another status than 0 or 77,
// is killed, runs past its timeout or cannot be run refuses, saying
// so. dry: the dry run's, which the record says and the log does not
// keep.
func (k *Kernel) hook(ctx context.Context, p *policy.Policy, c *Cred, op, agent string, q asking, dry bool) error {
	class := q.ask.hookClass()
	argv := p.Hooks.For(class)
	if len(argv) == 0 {
		return nil
	}
	rec := hookRecord{Type: "hook", Op: op, Class: class, Agent: agent, Key: q.key, Tool: q.tool, Argv: q.argv, DryRun: dry,
		Caller: hookCaller{UID: c.UID, Admin: c.Admin, Agent: c.Agent, Run: c.Run}}
	switch q.ask {
	case askExec:
		if rec.Argv == nil {
			cmd, _ := p.CheckExec(nil, q.line)
			rec.Argv = cmd.Argv
		}
	case askWrite:
		rec.Size = q.total
	}
	in, err := json.Marshal(&rec)
	if err != nil {
		return err
	}
	rule := "hooks." + class
	timeout := p.Hooks.TimeoutOr()
	res, err := runspec.RunExec(ctx, k.box, k.sup, k.cfg.Data, p, runspec.Execution{Agent: agent, Argv: argv, Stdin: string(in), Timeout: timeout})
	refuse := func(format string, a ...any) error {
		return &policy.Denied{Rule: rule, Reason: "hook " + argv[0] + " " + fmt.Sprintf(format, a...)}
	}
	switch {
	case err != nil:
		return refuse("could not run: %v", err)
	case res.TimedOut:
		return refuse("gave no answer within %s", timeout)
	case res.Signal != "":
		return refuse("was killed by %s", res.Signal)
	case res.Status == policy.HookRefuse:
		why := policy.HookReason(res.Stdout)
		if why == "" {
			why = "(it gave no reason)"
		}
		return refuse("refused: %s", why)
	case res.Status != policy.HookAllow:
		return refuse("exited %d (%d allows, %d refuses)", res.Status, policy.HookAllow, policy.HookRefuse)
	}
	if !dry {
		what := q.key
		if rec.Argv != nil {
			what = policy.Quote(rec.Argv)
		}
		tgt := strings.ToValidUTF8(fmt.Sprintf("%s:%s %s [%s]", agent, op, what, rule), "?")
		k.submit(k.record(), &tx{entry: &audit.Entry{Actor: c.Actor(), Op: opHook, Target: tgt, Result: "ok"}}, false)
	}
	return nil
}
