package proto

import "time"

// The resources and status ops (issue 8).
const (
	// OpResources samples what the runs use (from /proc) and the host's
	// load, with the state of admission: one resources record.
	OpResources = "resources"
	// OpStatus describes the daemon (paths, mount, data dir check) for
	// ox-status: one daemon record.
	OpStatus = "status"
)

// Record types of resources and status.
const (
	RecordResources = "resources"
	RecordDaemon    = "daemon"
	RecordCheck     = "check"
)

// ResourcesArgs are the args of resources: the runs of Agent, or all the
// caller may see.
type ResourcesArgs struct {
	Agent string `json:"agent,omitempty"`
}

// Host is the host's load, as admission sees it.
type Host struct {
	Cores int     `json:"cores"`
	Load1 float64 `json:"load1"` // /proc/loadavg
	// MemTotal and MemAvailable are bytes (/proc/meminfo).
	MemTotal     int64 `json:"mem_total"`
	MemAvailable int64 `json:"mem_available"`
	// MemPressure is the share of the last 10 s some task stalled on
	// memory, in percent (/proc/pressure/memory "some avg10"); -1 when
	// the kernel has no PSI.
	MemPressure float64 `json:"mem_pressure"`
	// Overloaded is set while a threshold of [runs] is passed: queued runs
	// wait.
	Overloaded bool   `json:"overloaded,omitempty"`
	Why        string `json:"why,omitempty"`
}

// Admission is the state of the run queue.
type Admission struct {
	Running       int `json:"running"`
	Queued        int `json:"queued"`
	MaxConcurrent int `json:"max_concurrent"` // 0: no limit
	MaxPerAgent   int `json:"max_per_agent"`  // 0: no limit
}

// ResourcesRecord is the "resources" record: one sample.
type ResourcesRecord struct {
	Type      string      `json:"type"`           // always "resources"
	Node      string      `json:"node,omitempty"` // the fleet node sampled, in a fleet-wide view
	Time      time.Time   `json:"time"`
	Host      Host        `json:"host"`
	Admission Admission   `json:"admission"`
	Runs      []RunRecord `json:"runs"`
	Text      string      `json:"text"`
}

// DaemonRecord is the "daemon" record of status: what the daemon runs with.
type DaemonRecord struct {
	Type    string    `json:"type"` // always "daemon"
	Server  string    `json:"server"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Config  string    `json:"config,omitempty"` // "" : no file
	Data    string    `json:"data"`
	// DataWritable is whether the daemon could create a file in its data
	// dir just now; DataError says why not.
	DataWritable bool   `json:"data_writable"`
	DataError    string `json:"data_error,omitempty"`
	Socket       string `json:"socket"`
	Mount        string `json:"mount,omitempty"` // "": no mount
	Policies     string `json:"policies"`
	LLM          string `json:"llm,omitempty"` // [llm] base_url
	// LLMCircuit is the state of the daemon's circuit breaker for it
	// (closed, open, half-open).
	LLMCircuit string `json:"llm_circuit,omitempty"`
	// Models are the models LLM runs may ask for: [llm]'s model
	// (default) and each [models.NAME], with the state of its endpoint's
	// breaker.
	Models []ModelInfo `json:"models,omitempty"`
	// ConfigError is why the config file was refused when it last
	// changed (the config in force stays), "" if it was not.
	ConfigError string `json:"config_error,omitempty"`
	// Sandbox is what the machine offers for the sandbox of runs
	// ("namespaces seccomp landlock/7"); SandboxMissing, what it lacks
	// and why.
	Sandbox        string   `json:"sandbox"`
	SandboxMissing []string `json:"sandbox_missing,omitempty"`
	// Repo is what the check of the repository's objects found: every
	// object HEAD's tree reaches present ("N objects reachable from
	// HEAD's tree, all present"), or which are missing; RepoDamaged says
	// which of the two (for the admin only).
	Repo        string `json:"repo,omitempty"`
	RepoDamaged bool   `json:"repo_damaged,omitempty"`
	Text        string `json:"text"`
}

// CheckRecord is the "check" record of ox-status: one check, and what to
// do when it failed.
type CheckRecord struct {
	Type  string `json:"type"` // always "check"
	Check string `json:"check"`
	OK    bool   `json:"ok"`
	Fix   string `json:"fix,omitempty"`
	Text  string `json:"text"`
}

// ModelInfo is a model LLM runs may ask for by Name (ox-spawn -m NAME):
// the Model asked at its Endpoint (the admin's to see), its prices per
// million tokens, and the state of its endpoint's circuit breaker
// (closed, open, half-open). Default marks [llm]'s.
type ModelInfo struct {
	Name            string  `json:"name"`
	Model           string  `json:"model"`
	Endpoint        string  `json:"endpoint,omitempty"`
	PromptPrice     float64 `json:"prompt_price,omitempty"`
	CompletionPrice float64 `json:"completion_price,omitempty"`
	State           string  `json:"state"`
	Default         bool    `json:"default,omitempty"`
}
