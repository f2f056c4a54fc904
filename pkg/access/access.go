// Package access says who a caller of oxiosd is and which agents it may
// act on: a process of an agent's run acts only as that agent, the admin
// (root, the daemon's own user, the uids [access] names) as any, and
// another user as the agents it was granted; and so which audit entries
// it may read. The kernel's gate asks it
// first, before an agent's policy; the refusals it returns are the
// kernel's to audit.
package access

import (
	"fmt"
	"path"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// Cred is who is calling: the peer's credentials from SO_PEERCRED, and
// what the kernel made of them.
type Cred struct {
	UID   uint32
	GID   uint32
	PID   int32
	Admin bool
	// Agent and Run are set when the caller is a process of an agent run:
	// it may then act only as that agent.
	Agent string
	Run   string
	// Grants are the agent patterns a non-admin user was granted.
	Grants []string
	// Node is the fleet node whose signed call this is ("": a local
	// caller): the uid, agent and grants are what that node vouched for.
	Node string
	// Home, on a spawn Node placed here, is what it carries of the agent
	// it is the home of: the run runs under that policy (kernel/home.go).
	Home *proto.Home
}

// RunResolver maps a peer (uid and pid) to the agent run it belongs to.
// The supervisor provides it; until then no process is an agent's. An
// error refuses the peer: it belongs to a sandbox or run that cannot be
// named, and must never be taken for the uid it has.
type RunResolver interface {
	Attribute(uid uint32, pid int32) (agent, run string, err error)
}

// Identify turns peer credentials into a Cred: a process of a run (runs,
// when not nil, names it), the admin (uid 0, self, an admin of acc) or a
// user acc grants agents. A refused peer gets an error, and the target
// of the audit entry of its refusal.
func Identify(uid, gid uint32, pid int32, self uint32, runs RunResolver, acc *config.Access) (c *Cred, refused string, err *proto.Error) {
	c = &Cred{UID: uid, GID: gid, PID: pid}
	if runs != nil {
		a, r, aerr := runs.Attribute(uid, pid)
		if aerr != nil {
			return c, fmt.Sprintf("uid=%d pid=%d", uid, pid), proto.Errorf(proto.EACCES, "%v: refused", aerr)
		}
		if a != "" {
			c.Agent, c.Run = a, r
			return c, "", nil
		}
	}
	switch {
	case uid == 0 || uid == self || acc.IsAdmin(uid):
		c.Admin = true
	default:
		g, ok := acc.Grant(uid)
		if !ok {
			return c, fmt.Sprintf("uid=%d", uid), proto.Errorf(proto.EACCES, "uid %d is not granted access to oxiosd (see [access] in oxios.toml(5))", uid)
		}
		c.Grants = g
	}
	return c, "", nil
}

// Authorize decides whether c may act on agent, whose name is checked
// first.
func (c *Cred) Authorize(agent string) *proto.Error {
	if err := proto.CheckAgent(agent); err != nil {
		return err
	}
	return c.Allowed(agent)
}

// Allowed is Authorize for an agent name already checked.
func (c *Cred) Allowed(agent string) *proto.Error {
	switch {
	case c.Admin:
		return nil
	case c.Agent != "":
		if c.Agent == agent {
			return nil
		}
		return proto.Errorf(proto.EPERM, "run %s of agent %q may not act on agent %q", c.Run, c.Agent, agent)
	}
	for _, g := range c.Grants {
		if ok, _ := path.Match(g, agent); ok {
			return nil
		}
	}
	return proto.Errorf(proto.EPERM, "uid %d is not granted agent %q (see [access.users] in oxios.toml(5))", c.UID, agent)
}

// Lists returns which agents a listing of only's ("": every agent's)
// shows c: those of only that c may act on.
func (c *Cred) Lists(only string) func(agent string) bool {
	return func(agent string) bool {
		return (only == "" || agent == only) && c.Authorize(agent) == nil
	}
}

// Sees reports whether c sees an event of agent ("": of no agent): the
// admin every event, anyone else those of the agents it may act on.
func (c *Cred) Sees(agent string) bool {
	if c.Admin {
		return true
	}
	return agent != "" && c.Authorize(agent) == nil
}

// NotAdmin says why c is refused what is the admin's: "run R of agent
// "A" is not the admin" for a run, else "uid N is not the admin".
func (c *Cred) NotAdmin() string {
	if c.Run != "" {
		return fmt.Sprintf("run %s of agent %q is not the admin", c.Run, c.Agent)
	}
	return fmt.Sprintf("uid %d is not the admin", c.UID)
}

// Reads reports whether c may read an audit entry: the admin every
// entry, anyone else the entries about or by the agents it may act on.
func (c *Cred) Reads(in *audit.Info) bool {
	if c.Admin {
		return true
	}
	if a := in.Agent(); a != "" && c.Authorize(a) == nil {
		return true
	}
	return in.Actor.Agent != "" && c.Authorize(in.Actor.Agent) == nil
}

// Actor is c as an audit entry names who acted.
func (c *Cred) Actor() audit.Actor {
	return audit.Actor{UID: c.UID, PID: c.PID, Agent: c.Agent, Run: c.Run, Node: c.Node}
}
