package mcpbridge

import (
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/oxios/oxios/pkg/proto"
)

// The tools an agent's model has both through this bridge and as an
// LLM run's tools (pkg/agent): defined once here, their name, the
// syscall each makes, what it does and its input, which both decode
// into the same type. Each front end adds its own (this bridge:
// state_delete, forget, runs, versions, the audit; the runner: exec,
// fetch, finish, the WASM tools and messages).

// KeyIn is the input of state_read and state_delete.
type KeyIn struct {
	Key string `json:"key" jsonschema:"the state key, a relative path such as notes/today.md"`
}

// WriteIn is the input of state_write.
type WriteIn struct {
	Key   string `json:"key" jsonschema:"the state key, a relative path such as notes/today.md"`
	Value string `json:"value" jsonschema:"the value: UTF-8 text, or base64 with encoding base64"`
	// Encoding lets a client save bytes that are not text.
	Encoding string `json:"encoding,omitempty" jsonschema:"empty for text, or base64"`
}

// ListIn is the input of state_list.
type ListIn struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"only keys at or below this prefix, e.g. notes/"`
}

// RememberIn is the input of remember.
type RememberIn struct {
	Text       string   `json:"text" jsonschema:"what to remember"`
	Kind       string   `json:"kind,omitempty" jsonschema:"working, episodic (the default) or semantic"`
	Tags       []string `json:"tags,omitempty"`
	TTL        string   `json:"ttl,omitempty" jsonschema:"a Go duration after which it is forgotten, e.g. 24h"`
	Importance float64  `json:"importance,omitempty"`
}

// RecallIn is the input of recall.
type RecallIn struct {
	Query string   `json:"query" jsonschema:"what to search for"`
	K     int      `json:"k,omitempty" jsonschema:"at most this many memories (default 10)"`
	Kind  string   `json:"kind,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// Spec is one shared tool.
type Spec struct {
	Name        string
	Op          string // the syscall it makes
	Description string
	// Input is the JSON schema of its arguments, inferred from its input
	// type (schemaFor).
	Input *jsonschema.Schema
}

// Params is the schema of the tool's arguments as JSON.
func (s Spec) Params() json.RawMessage {
	b, err := json.Marshal(s.Input)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", s.Name, err)) // a type of this file
	}
	return b
}

var shared = []Spec{
	{"state_read", proto.OpStateLoad, "Read the value of a key of the agent's state.", schemaFor[KeyIn]("state_read")},
	{"state_write", proto.OpStateSave, "Save a value under a key of the agent's state, replacing what was there. Durable once it returns.", schemaFor[WriteIn]("state_write")},
	{"state_list", proto.OpStateList, "List the keys of the agent's state (with size and modification time), optionally under a prefix.", schemaFor[ListIn]("state_list")},
	{"remember", proto.OpMemRemember, "Keep a memory (working, episodic or semantic) for later runs.", schemaFor[RememberIn]("remember")},
	{"recall", proto.OpMemRecall, "Search the agent's memories, best match first.", schemaFor[RecallIn]("recall")},
}

// Shared lists the shared tools.
func Shared() []Spec { return shared }

// SharedTool returns the shared tool name; it panics on another name,
// which is a mistake of this package's.
func SharedTool(name string) Spec {
	for _, s := range shared {
		if s.Name == name {
			return s
		}
	}
	panic("mcpbridge: no shared tool " + name)
}

// schemaFor is the schema of the input type In of tool name, inferred as
// mcp.AddTool does, but with each list argument declared "type":
// "array" (optional, as it is not required) instead of ["null",
// "array"]: the MCP Inspector's CLI cannot fill the latter, and sends
// the list as a string.
func schemaFor[In any](name string) *jsonschema.Schema {
	in, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("tool %s: %v", name, err)) // a type of this package
	}
	for _, p := range in.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" && p.Types[1] == "array" {
			p.Type, p.Types = "array", nil
		}
	}
	return in
}
