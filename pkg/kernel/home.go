package kernel

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/supervisor"
)

// An agent's home (issue 44). An agent lives on the node where it was
// made: its policy is set there and its budget spent there. A run of it
// placed on another node (ox-spawn --node) carries its home's policy and
// what it may still spend (proto.Home, signed with the fleet call), so
// moving work never widens what an agent may do or spend:
//
//   - the node placed on keeps that policy as the agent's there, a
//     guest's (policy.WithHome names the home and the text's version, so
//     it is refreshed when the home's changes), and every call of the run
//     is checked against it like any run's;
//   - the guest may spend there only what its home had left (its
//     limits there are what it used there plus that);
//   - when the run ends, its use is charged to the home (HomeCharge), once;
//   - a guest's policy and budget are not set where it is a guest, and an
//     agent at home on a node is never taken over by another node's.

// homeOf returns the node agent is a guest of ("" when it lives here).
func (k *Kernel) homeOf(agent string) string {
	b, _, err := k.state.Load(state.Ref(state.SpaceSys, agent), sysPolicy)
	if err != nil {
		return ""
	}
	node, _ := policy.Home(b)
	return node
}

// notHere refuses an operator's change of a guest's policy or budget.
func (k *Kernel) notHere(c *Cred, op, agent string, raw []byte) *proto.Error {
	home := k.homeOf(agent)
	if home == "" {
		return nil
	}
	k.auditDenied(c, op, agent+" [home "+home+"]", raw, proto.EPERM)
	return proto.Errorf(proto.EPERM, "agent %q is a guest here: its home is node %s, where its policy and budget are set (ox-policy and ox-budget there)", agent, home)
}

// homeFor is what a spawn this node places on node (a fleet call) carries
// of its agent: nil when the agent does not live here (the node placed on
// makes it, with its own policy, or it is already a guest there of its
// home). A spawn of an agent over its budget is refused here, as a local
// one would be.
func (k *Kernel) homeFor(c *Cred, a proto.FleetCallArgs, raw []byte) (*proto.Home, *proto.Error) {
	var sa struct {
		Agent string `json:"agent"`
	}
	if json.Unmarshal(a.Args, &sa) != nil || proto.CheckAgent(sa.Agent) != nil || !k.AgentExists(sa.Agent) {
		return nil, nil // the node placed on answers for args it cannot take
	}
	_, text, err := k.loadPolicy(sa.Agent)
	if err != nil {
		return nil, proto.AsError(err)
	}
	if home, _ := policy.Home(text); home != "" {
		if a.Node == home {
			return nil, nil // home again: it runs under its own policy
		}
		k.auditDenied(c, proto.OpFleetCall, "fleet:"+a.Op+" "+sa.Agent+" [home "+home+"]", raw, proto.EPERM)
		return nil, proto.Errorf(proto.EPERM, "agent %q is a guest here: place its runs from its home, node %s (ox-spawn --node %s there, or here)", sa.Agent, home, home)
	}
	p, err := k.policyOf(sa.Agent)
	if err != nil {
		return nil, proto.AsError(err)
	}
	if _, qerr := k.budgets.SpawnCheck(sa.Agent, p); qerr != nil {
		k.auditDenied(c, proto.OpFleetCall, "fleet:"+a.Op+" "+sa.Agent, raw, qerr.Code)
		return nil, qerr
	}
	if text == nil {
		text = policy.DefaultText()
	}
	lim, _, used := k.budgets.Limits(sa.Agent, p)
	h := &proto.Home{Agent: sa.Agent, Policy: string(text)}
	if lim.Tokens > 0 {
		h.Left.Tokens = max(lim.Tokens-used.Tokens, 1)
	}
	if lim.Cost > 0 {
		h.Left.Cost = max(lim.Cost-used.Cost, math.SmallestNonzeroFloat64)
	}
	if lim.Wall > 0 {
		h.Left.Wall = max(lim.Wall-used.Wall, 0.001)
	}
	if lim.Execs > 0 {
		h.Left.Execs = max(lim.Execs-used.Execs, 1)
	}
	return h, nil
}

// adoptHome takes the home c carries for agent (a spawn c.Node placed
// here): the agent becomes a guest of c.Node with its home's policy, made
// if it does not exist, refreshed if its home's text changed; its limits
// here become what it used here plus what its home has left. An agent
// that lives here, or is a guest of another node, is not taken over.
func (k *Kernel) adoptHome(ctx context.Context, c *Cred, agent string, raw []byte) *proto.Error {
	h := c.Home
	if h.Agent != agent {
		return proto.Errorf(proto.EINVAL, "fleet: a spawn of agent %q carries the home of %q", agent, h.Agent)
	}
	ref := state.Ref(state.SpaceSys, agent)
	cur, _, _ := k.state.Load(ref, sysPolicy)
	exists := k.AgentExists(agent)
	home, version := policy.Home(cur)
	if exists && home == "" && (string(cur) == h.Policy || cur == nil && h.Policy == string(policy.DefaultText())) {
		// Two agents of one name, each made where it lives, under the
		// same policy: the run is this node's agent's, which narrows
		// nothing (ox-spawn --node any made the one, a placement the
		// other). Their budgets are each node's own.
		return nil
	}
	if exists && home != c.Node {
		k.auditDenied(c, proto.OpRunSpawn, agent+" [home "+c.Node+"]", raw, proto.EPERM)
		if home == "" {
			return proto.Errorf(proto.EPERM, "agent %q lives on this node, and another of that name on node %s: a run placed from there may not run as this one (name another agent, or remove this one here: ox-agents rm -a %s)", agent, c.Node, agent)
		}
		return proto.Errorf(proto.EPERM, "agent %q is a guest here of node %s, not of node %s", agent, home, c.Node)
	}
	text := []byte(h.Policy)
	if _, err := policy.Parse(text); err != nil {
		perr := proto.Errorf(proto.EINVAL, "agent %q: the policy its home %s sent does not parse: %v", agent, c.Node, err)
		k.auditDenied(c, proto.OpRunSpawn, agent+" [home "+c.Node+"]", raw, perr.Code)
		return perr
	}
	// The version is this node's digest of the text, not the sender's word.
	v := audit.ArgsDigest(text)[:16]
	if home == "" || version != v {
		op := proto.OpPolicySet
		if !exists {
			op = proto.OpAgentCreate
		}
		file := policy.WithHome(text, c.Node, v)
		t := &tx{
			change: &state.Change{Agent: agent, Space: state.SpaceSys, Key: sysPolicy, Value: file},
			entry:  &audit.Entry{Actor: c.Actor(), Op: op, Target: agent + ":" + sysPolicy + " [home " + c.Node + "]", Args: audit.ArgsDigest(file)},
		}
		err := k.submit(ctx, t, true)
		k.policyChanged(agent)
		if err != nil {
			return proto.AsError(err)
		}
	}
	p, err := k.policyOf(agent)
	if err != nil {
		return proto.AsError(err)
	}
	lim, _, used := k.budgets.Limits(agent, p)
	next := guestLimit(used, h.Left)
	if next == lim {
		return nil
	}
	e := &audit.Entry{Actor: c.Actor(), Op: proto.OpBudgetSet, Target: agent + ":" + sysBudget + " [home " + c.Node + "]", Args: audit.ArgsDigest(raw)}
	if err := k.budgets.Audited(ctx, agent, func(b *budget.File) { b.Limit = &next }, e, nil); err != nil {
		return proto.AsError(err)
	}
	return nil
}

// guestLimit is a guest's limits: what it used here plus what its home
// has left, for each limit its home sets.
func guestLimit(used, left proto.Budget) proto.Budget {
	var l proto.Budget
	if left.Tokens > 0 {
		l.Tokens = used.Tokens + left.Tokens
	}
	if left.Cost > 0 {
		l.Cost = proto.AddCost(used.Cost, left.Cost)
	}
	if left.Wall > 0 {
		l.Wall = used.Wall + left.Wall
	}
	if left.Execs > 0 {
		l.Execs = used.Execs + left.Execs
	}
	return l
}

// chargeHome charges the use of r, a guest's run that ended, to its home
// node: retried while the home cannot be reached, and audited here if it
// never was (the home's budget then misses it, and the log says so).
func (k *Kernel) chargeHome(home string, r *supervisor.Run) {
	if k.fleet == nil {
		return
	}
	tokens, cost, execs, wall := r.Usage()
	a := proto.HomeCharge{Agent: r.Agent(), Run: r.ID(), Used: proto.Budget{Tokens: tokens, Cost: cost, Wall: wall.Seconds(), Execs: execs}}
	go func() {
		var err error
		for wait := time.Second; wait < 5*time.Minute; wait *= 2 {
			ctx, cancel := context.WithTimeout(k.root, time.Minute)
			err = k.fleet.Charge(ctx, home, a)
			cancel()
			if err == nil || k.root.Err() != nil {
				break
			}
			select {
			case <-k.root.Done():
			case <-time.After(wait):
			}
		}
		if err != nil {
			k.log.Error("a guest's run not charged to its home", "agent", a.Agent, "run", a.Run, "home", home, "err", err)
			b, _ := json.Marshal(a)
			k.auditDenied(&Cred{UID: k.uid}, proto.OpBudgetCharge, a.Agent+":"+sysBudget+" run "+a.Run+" [home "+home+" not reached]", b, proto.Result(err))
		}
	}()
}

// HomeCharge charges to agent, which lives here, the use of its run on
// node from (a peer whose signature the fleet checked): audited with the
// node as its actor. A peer may charge only an agent at home here.
func (k *Kernel) HomeCharge(ctx context.Context, from string, a proto.HomeCharge) error {
	if err := proto.CheckAgent(a.Agent); err != nil {
		return err
	}
	u := a.Used
	if u.Tokens < 0 || u.Cost < 0 || u.Wall < 0 || u.Execs < 0 || math.IsNaN(u.Cost) || math.IsNaN(u.Wall) {
		return proto.Errorf(proto.EINVAL, "fleet: a charge of %q with a negative use", a.Agent)
	}
	c := &Cred{UID: k.uid, Node: from}
	b, _ := json.Marshal(a)
	tgt := a.Agent + ":" + sysBudget + " run " + a.Run
	if !k.AgentExists(a.Agent) || k.homeOf(a.Agent) != "" {
		k.auditDenied(c, proto.OpBudgetCharge, tgt, b, proto.EPERM)
		return proto.Errorf(proto.EPERM, "fleet: agent %q does not live on this node", a.Agent)
	}
	e := &audit.Entry{Actor: c.Actor(), Op: proto.OpBudgetCharge, Target: tgt, Args: audit.ArgsDigest(b)}
	return k.budgets.ChargeAudited(ctx, a.Agent, u, nil, e, nil)
}
