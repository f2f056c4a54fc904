package memindex

import (
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Reading the memory files, the files of the agents' mem spaces, from
// the state store.

// Store is the state store, as the indexes read it.
type Store interface {
	Refs() []string
	List(ref, prefix string) ([]proto.StateRecord, error)
	Load(ref, key string) ([]byte, proto.StateRecord, error)
}

// StoreAgents are the agents of st with a mem space.
func StoreAgents(st Store) []string {
	var agents []string
	for _, ref := range st.Refs() {
		if sp, a := state.SplitRef(ref); sp == state.SpaceMem {
			agents = append(agents, a)
		}
	}
	return agents
}

// StoreReader reads agent's memory files from st.
func StoreReader(st Store) Reader {
	return func(agent, key string) ([]byte, error) {
		v, _, err := st.Load(state.Ref(state.SpaceMem, agent), key)
		return v, err
	}
}

// StoreSource is a Source of the memory files of st, its Agents (see
// StoreAgents), Head and Scan left to the caller.
func StoreSource(st Store) Source {
	return Source{
		Keys: func(agent string) []string {
			recs, _ := st.List(state.Ref(state.SpaceMem, agent), "") // an error: no memories
			keys := make([]string, len(recs))
			for i, r := range recs {
				keys[i] = r.Key
			}
			return keys
		},
		Read: StoreReader(st),
	}
}
