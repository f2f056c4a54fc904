package agenttree

import (
	"fmt"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// Removing is how a removal commits its deletions, on the kernel's
// committer: es are their audit entries, the last one the removal's own
// (agent.remove, with no change: chs's last is nil), which publishes
// agent.removed with data; all in one batch. It returns each one's error.
type Removing func(chs []*state.Change, es []*audit.Entry, data *proto.AgentRecord) []error

// A removal goes in three steps (issue 45: removing an agent of 100k
// memories in one batch, alone on the committer, held every other
// agent's save for all of it, 8 s):
//
//  1. Before, on the committer, alone: commit what the agent holds, so
//     that the commit named in the record's Restore holds all of it.
//  2. Its state and memories deleted in groups of RemoveChunk (Changes),
//     each group durable and audited on its own, other changes between
//     them, as a forget of many memories goes.
//  3. Remove, on the committer, alone: what is left (its kernel files,
//     the last group, and whatever was saved to it meanwhile) and the
//     removal's own entry in one batch, then the removal's commit.
//
// A crash in step 2 leaves the groups deleted so far, each audited, and
// the agent with its policy and the rest: removing it again finishes.

// RemoveChunk is how many keys a group of a removal deletes.
const RemoveChunk = 512

// Before commits what agent holds (w.Commit, by uid and caller, a run's
// agent) and returns the commit, the record's Restore ("" when the agent
// was never committed).
func Before(w *version.Work, agent string, uid uint32, caller string, au version.Auditor) (string, error) {
	before, err := w.Commit(proto.CommitArgs{Agent: agent, Message: fmt.Sprintf("Agent %s as it was before its removal", agent)}, uid, caller, au)
	return before.Commit, err
}

// Changes are the deletions ds of agent's keys, each with its audit entry
// by who (args digest).
func Changes(agent string, ds []Deletion, who audit.Actor, digest string) ([]*state.Change, []*audit.Entry) {
	chs := make([]*state.Change, len(ds))
	es := make([]*audit.Entry, len(ds))
	for i, d := range ds {
		chs[i] = &state.Change{Agent: agent, Space: d.Space, Key: d.Key, Delete: true}
		es[i] = &audit.Entry{Actor: who, Op: d.Op, Target: d.Target, Args: digest}
	}
	return chs, es
}

// Remove ends the removal of agent, whose record is rec (Restore set by
// Before), on the kernel's committer, alone: it deletes every key of it
// still there (Removal), each with its audit entry by who (args digest),
// and records the removal (target "NAME:", which names the agent the same
// way to a live subscriber and to one replaying the log), through
// removing; then commits the removal. A failure is audited
// (agent.remove) through au, as w's commits are.
func Remove(w *version.Work, st Store, rec proto.AgentRecord, who audit.Actor, uid uint32, caller, digest string, removing Removing, au version.Auditor) (proto.AgentRecord, error) {
	agent := rec.Agent
	rec.Removed = true
	fail := func(err error) (proto.AgentRecord, error) {
		au(proto.OpAgentRemove, agent, proto.Result(err), "", nil)
		return proto.AgentRecord{}, err
	}
	chs, es := Changes(agent, Removal(st, agent), who, digest)
	ev := rec // the event's own: rec is completed below
	chs = append(chs, nil)
	es = append(es, &audit.Entry{Actor: who, Op: proto.OpAgentRemove, Target: agent + ":", Args: digest})
	for _, err := range removing(chs, es, &ev) {
		if err != nil {
			return fail(fmt.Errorf("removing %s: %w", agent, err))
		}
	}
	after, err := w.Commit(proto.CommitArgs{Agent: agent, Message: fmt.Sprintf("Remove agent %s (restore: ox-commit restore %.12s -a %s)", agent, rec.Restore, agent)}, uid, caller, au)
	if err != nil {
		return rec, err
	}
	rec.Commit = after.Commit
	rec.Runs = 0
	rec.Describe()
	return rec, nil
}

// Creation is the change that creates agent, by who, with the default
// policy, and its audit entry (agent.create, target "NAME:policy.toml"):
// what a spawn of an agent that has no policy yet commits first.
func Creation(agent string, who audit.Actor) (*state.Change, *audit.Entry) {
	text := policy.DefaultText()
	return &state.Change{Agent: agent, Space: state.SpaceSys, Key: Policy, Value: text},
		&audit.Entry{Actor: who, Op: proto.OpAgentCreate, Target: agent + ":" + Policy, Args: audit.ArgsDigest(text)}
}
