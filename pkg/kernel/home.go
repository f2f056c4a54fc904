package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/state"
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
//   - the home chooses the run's id and notes the placement (node, run)
//     durably before the call (place); when the run ends, its use is
//     owed to the home in the write that records the end, sent until the
//     home answers, across restarts of either (owe, resendOwed), and the
//     home charges it once, only from the node it placed it on
//     (HomeCharge; budget/away.go);
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

// place chooses the id of a run of home.Agent placed on node (FleetAll:
// every live node but this one) and notes it durably, before the call
// goes out: the home takes a charge only for a run it placed, from the
// node it placed it on (HomeCharge). A run placed on this node itself
// is not away and charges nothing here.
func (k *Kernel) place(ctx context.Context, c *Cred, node string, home *proto.Home, raw []byte) ([]string, error) {
	nodes := []string{node}
	if node == proto.FleetAll {
		all, err := k.fleet.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		nodes = nodes[:0]
		for _, n := range all {
			if n.Alive {
				nodes = append(nodes, n.Node)
			}
		}
	}
	home.Run = runspec.NewID(func(string) bool { return false })
	var placed []string
	for _, n := range nodes {
		if n == k.fleet.Name() {
			continue
		}
		e := &audit.Entry{Actor: c.Actor(), Op: proto.OpBudgetSet, Target: home.Agent + ":" + sysBudget + " run " + home.Run + " [placed on " + n + "]", Args: audit.ArgsDigest(raw)}
		if err := k.budgets.Place(ctx, home.Agent, n, home.Run, e); err != nil {
			return nil, err
		}
		placed = append(placed, n)
	}
	return placed, nil
}

// unplace forgets the placements of a spawn that nodes refused before
// any record of it came back (a refusal: nothing ran there).
func (k *Kernel) unplace(c *Cred, nodes []string, home *proto.Home, err error) {
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code == proto.EHOSTUNREACH || pe.Code == proto.ESHUTDOWN {
		return // not known not to run: the placement stays until charged or old
	}
	for _, n := range nodes {
		e := &audit.Entry{Actor: c.Actor(), Op: proto.OpBudgetSet, Target: home.Agent + ":" + sysBudget + " run " + home.Run + " [refused by " + n + ": " + pe.Code + "]"}
		if err := k.budgets.Unplace(k.record(), home.Agent, n, home.Run, e); err != nil {
			k.log.Warn("a refused placement not forgotten", "agent", home.Agent, "run", home.Run, "node", n, "err", err)
		}
	}
}

// placedID is the id of a run its home placed here (c.Home.Run), checked.
func (k *Kernel) placedID(c *Cred) (string, *proto.Error) {
	id := c.Home.Run
	if !runspec.IsID(id) {
		return "", proto.Errorf(proto.EINVAL, "fleet: node %s placed a run with the id %q, which is no run id", c.Node, id)
	}
	if k.sup.Has(id) {
		return "", proto.Errorf(proto.EEXIST, "fleet: node %s placed run %s here, and a run of that id is here already", c.Node, id)
	}
	return id, nil
}

// owed runs the charges of what this node owes to agents' homes, one
// goroutine each, by run.
type owed struct {
	mu   sync.Mutex
	runs map[string]bool
}

// owe sends the charge of run (of agent, whose use o is) to its home
// until the home answers: retried with backoff, across restarts (the
// charge is in the agent's budget file, resendOwed). The home's answer
// removes it, in a durable write.
func (k *Kernel) owe(agent, run string, o budget.Owed) {
	if k.fleet == nil {
		return // sent once this node joins its fleet (resendOwed)
	}
	k.owing.mu.Lock()
	if k.owing.runs == nil {
		k.owing.runs = map[string]bool{}
	}
	if k.owing.runs[run] {
		k.owing.mu.Unlock()
		return
	}
	k.owing.runs[run] = true
	k.owing.mu.Unlock()
	go func() {
		defer func() {
			k.owing.mu.Lock()
			delete(k.owing.runs, run)
			k.owing.mu.Unlock()
		}()
		a := proto.HomeCharge{Agent: agent, Run: run, Used: o.Used}
		tgt := agent + ":" + sysBudget + " run " + run
		for wait := time.Second; ; wait = min(2*wait, 5*time.Minute) {
			ctx, cancel := context.WithTimeout(k.root, time.Minute)
			got, err := k.fleet.Charge(ctx, o.Home, a)
			cancel()
			if k.root.Err() != nil {
				return // sent again at the next start
			}
			var pe *proto.Error
			e := &audit.Entry{Actor: k.daemonActor(), Op: proto.OpBudgetCharge, Args: audit.ArgsDigest(mustJSON(a))}
			switch {
			case err == nil && got.Already:
				e.Target = tgt + " [charged on home " + o.Home + " before]"
			case err == nil:
				e.Target = tgt + " [charged on home " + o.Home + "]"
			case errors.As(err, &pe) && (pe.Code == proto.EPERM || pe.Code == proto.EINVAL || pe.Code == proto.EBADMSG):
				// The home refused it for good: said here, not sent again.
				k.log.Error("a guest's run's charge refused by its home", "agent", agent, "run", run, "home", o.Home, "err", err)
				e.Target = tgt + " [refused by home " + o.Home + ": " + pe.Code + " " + pe.Message + "]"
			default:
				k.log.Warn("a guest's run not charged to its home yet; sent again later", "agent", agent, "run", run, "home", o.Home, "in", wait, "err", err)
				select {
				case <-k.root.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
			if !k.AgentExists(agent) {
				return // removed here meanwhile: nothing to remove
			}
			if err := k.budgets.Paid(k.record(), agent, run, e); err != nil {
				k.log.Warn("a charge answered, not yet removed", "agent", agent, "run", run, "err", err)
			}
			return
		}
	}()
}

// resendOwed sends again, once this node is in its fleet, the charges it
// owes to agents' homes: those of runs whose answer had not come when
// the daemon stopped.
func (k *Kernel) resendOwed() {
	for _, agent := range k.state.Agents() {
		if k.root.Err() != nil {
			return
		}
		if _, err := k.state.Stat(state.Ref(state.SpaceSys, agent), sysBudget); err != nil {
			continue
		}
		for run, o := range k.budgets.OwedBy(agent) {
			k.owe(agent, run, o)
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// HomeCharge charges to agent, which lives here, the use of its run on
// node from (a peer whose signature the fleet checked): audited with the
// node as its actor. It takes a charge only for a run this node placed
// on that node, once: a charge sent again is answered as applied before
// and not counted (budget.ChargeAway); one for a run it did not place
// there is refused (EPERM).
func (k *Kernel) HomeCharge(ctx context.Context, from string, a proto.HomeCharge) (proto.HomeCharged, error) {
	var none proto.HomeCharged
	if err := proto.CheckAgent(a.Agent); err != nil {
		return none, err
	}
	u := a.Used
	if u.Tokens < 0 || u.Cost < 0 || u.Wall < 0 || u.Execs < 0 || math.IsNaN(u.Cost) || math.IsNaN(u.Wall) {
		return none, proto.Errorf(proto.EINVAL, "fleet: a charge of %q with a negative use", a.Agent)
	}
	c := &Cred{UID: k.uid, Node: from}
	b, _ := json.Marshal(a)
	tgt := a.Agent + ":" + sysBudget + " run " + a.Run
	if !k.AgentExists(a.Agent) || k.homeOf(a.Agent) != "" {
		k.auditDenied(c, proto.OpBudgetCharge, tgt, b, proto.EPERM)
		return none, proto.Errorf(proto.EPERM, "fleet: agent %q does not live on this node", a.Agent)
	}
	e := &audit.Entry{Actor: c.Actor(), Op: proto.OpBudgetCharge, Target: tgt, Args: audit.ArgsDigest(b)}
	was, err := k.budgets.ChargeAway(ctx, a.Agent, from, a.Run, u, e)
	switch {
	case err != nil:
		return none, err
	case was == budget.Charged:
		return proto.HomeCharged{Already: true}, nil
	case was == budget.NotPlaced:
		k.auditDenied(c, proto.OpBudgetCharge, tgt+" [not placed on "+from+"]", b, proto.EPERM)
		return none, proto.Errorf(proto.EPERM, "fleet: this node placed no run %s of %q on node %s, or has had its charge long ago", a.Run, a.Agent, from)
	}
	return none, nil
}
