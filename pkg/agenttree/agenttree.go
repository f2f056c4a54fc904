// Package agenttree is an agent as the state store holds it: its trees
// (what it holds, its memories, and the kernel's files of it: policy,
// budget, jobs), whether it exists, the record that describes it, the
// change that creates it, the deletions that remove it and the removal
// itself with its commits (Remove), and its forks (Forker: the graft in
// git beside the live copy, and what a fork starts with).
// The kernel gates them and commits their changes.
package agenttree

import (
	"sort"
	"strings"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
)

// Spaces are the trees of an agent, in the order a removal deletes them:
// what it holds, then the kernel's own files of it.
var Spaces = []string{state.SpaceState, state.SpaceMem, state.SpaceSys}

// The kernel's files of an agent, in its sys space.
const (
	Policy = "policy.toml"
	Budget = "budget.json"
)

// Store is the state store as read here.
type Store interface {
	Keys(ref string) (n int, bytes int64)
	List(ref, prefix string) ([]proto.StateRecord, error)
}

// Exists reports whether agent exists: some tree of it holds a key. A
// removed agent's trees are empty.
func Exists(st Store, agent string) bool {
	for _, sp := range Spaces {
		if n, _ := st.Keys(state.Ref(sp, agent)); n > 0 {
			return true
		}
	}
	return false
}

// Listed is, sorted, the agents of all (the store's, sorted) that exist
// in st and that may allows.
func Listed(st Store, all []string, may func(agent string) bool) []string {
	out := all[:0:0]
	for _, a := range all {
		if may(a) && Exists(st, a) {
			out = append(out, a)
		}
	}
	return out
}

// Record describes agent as st holds it, with runs, its runs that have
// not ended.
func Record(st Store, agent string, runs int) proto.AgentRecord {
	rec := proto.AgentRecord{Type: proto.RecordAgent, Agent: agent, Policy: "default"}
	rec.Keys, rec.Size = st.Keys(state.Ref(state.SpaceState, agent))
	rec.Memories, _ = st.Keys(state.Ref(state.SpaceMem, agent))
	if sys, err := st.List(state.Ref(state.SpaceSys, agent), ""); err == nil {
		for _, r := range sys {
			switch {
			case r.Key == Policy:
				rec.Policy = "own"
			case r.Key == Budget:
				rec.Budget = true
			case strings.HasPrefix(r.Key, jobs.Dir+"/"):
				rec.Jobs = append(rec.Jobs, strings.TrimSuffix(strings.TrimPrefix(r.Key, jobs.Dir+"/"), ".json"))
			}
		}
	}
	rec.Runs = runs
	return rec
}

// Deletion is a key that removing an agent deletes, with the op and the
// target of its audit entry.
type Deletion struct {
	Space, Key string
	Op, Target string
}

// Removal is every key of agent, tree by tree in the order of Spaces and
// sorted within each, under the op that deletes such a key, so that the
// log (and crash replay) names every path that went: state.delete of a
// key, mem.forget of a memory, agent.remove of a kernel file (its target
// naming the sys tree).
func Removal(st Store, agent string) []Deletion {
	var out []Deletion
	for _, sp := range Spaces {
		keys, err := st.List(state.Ref(sp, agent), "")
		if err != nil {
			continue // no tree of this space
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
		for _, r := range keys {
			d := Deletion{Space: sp, Key: r.Key, Op: proto.OpStateDelete, Target: agent + ":" + r.Key}
			switch sp {
			case state.SpaceMem:
				d.Op = proto.OpMemForget
			case state.SpaceSys:
				d.Op, d.Target = proto.OpAgentRemove, agent+":"+sp+"/"+r.Key
			}
			out = append(out, d)
		}
	}
	return out
}
