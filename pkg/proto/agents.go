package proto

import "fmt"

// Agent ops (ox-agents(1)): list the agents, show one, remove one.
const (
	OpAgentList   = "agent.list"
	OpAgentShow   = "agent.show"
	OpAgentRemove = "agent.remove"
)

// RecordAgent is the record type of an agent.
const RecordAgent = "agent"

// EventAgentRemoved is the event of an agent's removal.
const EventAgentRemoved = "agent.removed"

// AgentArgs are the args of agent.show and agent.remove.
type AgentArgs struct {
	Agent string `json:"agent"`
}

// AgentRecord describes an agent: what it holds, and (from agent.remove)
// what was removed and where it can be restored from.
type AgentRecord struct {
	Type  string `json:"type"`
	Agent string `json:"agent"`
	// Keys and Size are its state: the number of keys and their bytes.
	Keys int   `json:"keys"`
	Size int64 `json:"size"`
	// Memories is the number of its memories.
	Memories int `json:"memories"`
	// Jobs names its scheduled jobs.
	Jobs []string `json:"jobs,omitempty"`
	// Policy is "own" when it has a policy file of its own, "default" when
	// it is held to the default policy.
	Policy string `json:"policy"`
	// Budget is true when it has a budget file (limits set or usage
	// charged).
	Budget bool `json:"budget,omitempty"`
	// Runs is the number of its runs that are live (running, stopped or
	// queued).
	Runs int `json:"runs"`
	// Removed, from agent.remove: the agent is gone. Commit is the commit
	// that recorded its removal, Restore the commit that still holds it
	// (ox-commit restore Restore -a AGENT brings its state and memories
	// back), empty when it was never committed.
	Removed bool   `json:"removed,omitempty"`
	Commit  string `json:"commit,omitempty"`
	Restore string `json:"restore,omitempty"`
	Text    string `json:"text,omitempty"`
}

// NoAgent is the error of a request about an agent that does not exist:
// the same words from every command.
func NoAgent(agent string) *Error {
	return Errorf(ENOENT, "no agent %q (ox-agents ls lists them; ox-spawn -a %s creates it)", agent, agent)
}

// Describe fills r.Text.
func (r *AgentRecord) Describe() {
	if r.Removed {
		r.Text = fmt.Sprintf("%s removed: %d keys (%d bytes), %d memories, %d jobs, %s policy", r.Agent, r.Keys, r.Size, r.Memories, len(r.Jobs), r.Policy)
		if r.Budget {
			r.Text += ", budget"
		}
		if r.Restore != "" {
			r.Text += fmt.Sprintf("; restore with ox-commit restore %.12s -a %s", r.Restore, r.Agent)
		}
		return
	}
	r.Text = fmt.Sprintf("%s: %d keys (%d bytes), %d memories, %d jobs, %s policy, %d live runs", r.Agent, r.Keys, r.Size, r.Memories, len(r.Jobs), r.Policy, r.Runs)
}
