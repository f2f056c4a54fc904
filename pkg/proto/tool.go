package proto

import "encoding/json"

// Ops of the WASM tools (issue 7).
const (
	// OpToolRun runs a WASM tool for an agent under its policy.
	OpToolRun = "tool.run"
	// OpToolList streams the tools there are, and whether the agent may
	// run each.
	OpToolList = "tool.list"
)

// Records of the WASM tools.
const (
	RecordTool     = "tool"
	RecordToolInfo = "tool_info"
)

// ToolRunArgs are the args of tool.run: the tool gets Input on stdin and
// Args after its name. Timeout is a Go duration, capped by the policy's.
type ToolRunArgs struct {
	Agent   string   `json:"agent"`
	Tool    string   `json:"tool"`
	Args    []string `json:"args,omitempty"`
	Input   string   `json:"input,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
}

// ToolRecord is the "tool" record: the result of a tool.run.
type ToolRecord struct {
	Type      string  `json:"type"` // always "tool"
	Agent     string  `json:"agent"`
	Run       string  `json:"run,omitempty"`
	Tool      string  `json:"tool"`
	Status    int     `json:"status"`
	TimedOut  bool    `json:"timed_out,omitempty"`
	Trap      string  `json:"trap,omitempty"` // why the module trapped
	Stdout    string  `json:"stdout"`
	Stderr    string  `json:"stderr"`
	Truncated bool    `json:"truncated,omitempty"`
	Duration  float64 `json:"duration"` // seconds
	// Compile is the seconds this call spent compiling the module: 0
	// when it was cached.
	Compile float64 `json:"compile,omitempty"`
	// Digest is the blake3 of stdout then stderr, as the audit log has it.
	Digest string `json:"digest"`
	Text   string `json:"text"`
}

// ToolListArgs are the args of tool.list.
type ToolListArgs struct {
	Agent string `json:"agent"`
}

// ToolInfoRecord is the "tool_info" record: a tool's manifest, and
// whether the agent's policy lets it run the tool.
type ToolInfoRecord struct {
	Type        string          `json:"type"` // always "tool_info"
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Allowed     bool            `json:"allowed"`
}
