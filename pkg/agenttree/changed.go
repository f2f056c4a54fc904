package agenttree

import (
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// What an audit entry changed in an agent's tree: the path of the
// versioned tree that replaying the entry from the journal after a crash
// marks uncommitted again, as the committer did when the change was made
// (the syscall table's Dirties). "" is nothing.

// ChangedKey is the path of the key an entry names in space
// ("agent:key"), if the entry succeeded.
func ChangedKey(space string) func(e *audit.Entry) string {
	return func(e *audit.Entry) string {
		agent, key, ok := strings.Cut(e.Target, ":")
		if e.Result != "ok" || !ok {
			return ""
		}
		return version.SpacePath(space, agent, key)
	}
}

// ChangedFile is the path of the kernel's file of the agent an entry
// names (an extra path for a refused entry is harmless).
func ChangedFile(file string) func(e *audit.Entry) string {
	return func(e *audit.Entry) string {
		agent, _, _ := strings.Cut(e.Target, ":")
		return version.SpacePath(state.SpaceSys, agent, file)
	}
}

// RemovedFile is the path of the kernel's file of a removed agent that
// an entry of its removal names ("agent:sys/KEY"); the entry naming the
// agent itself ("agent:") changed nothing more.
func RemovedFile(e *audit.Entry) string {
	agent, rest, ok := strings.Cut(e.Target, ":")
	if !ok {
		return ""
	}
	key, ok := strings.CutPrefix(rest, state.SpaceSys+"/")
	if !ok {
		return ""
	}
	return version.SpacePath(state.SpaceSys, agent, key)
}

// ChangedJob is the path of the file of the job an entry names
// ("agent:name ...").
func ChangedJob(e *audit.Entry) string {
	agent, rest, ok := strings.Cut(e.Target, ":")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, " ")
	return version.SpacePath(state.SpaceSys, agent, jobs.Key(name))
}
