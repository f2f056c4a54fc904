package proto

import (
	"encoding/json"
	"math"
	"time"
)

// Run, exec and budget ops (issue 6).
const (
	// OpRunSpawn starts a run. With Attach it is a stream: the run record,
	// then the run's records until its exit record; without, one reply
	// with the run record.
	OpRunSpawn = "run.spawn"
	// OpRunAttach streams a run's records from its first (or only the
	// new ones with Follow and Tail 0) until its exit record.
	OpRunAttach = "run.attach"
	// OpRunWait streams the exit record of each run, as each exits.
	OpRunWait = "run.wait"
	// OpRunKill sends a signal to each run's process group.
	OpRunKill = "run.kill"
	// OpRunStdin writes a run's stdin, or closes it, when the run was
	// started with it open (SpawnArgs.OpenStdin).
	OpRunStdin = "run.stdin"
	// OpRunPs streams the run records, oldest first.
	OpRunPs = "run.ps"

	// OpExec runs a command for an agent under its policy.
	OpExec = "exec"

	// OpAgentCreate is the audit op of an agent's creation (its policy
	// written from the default) by its first spawn; not a request.
	OpAgentCreate = "agent.create"
	// OpRunExit is the audit op of a run's end; not a request.
	OpRunExit = "run.exit"
	// OpRunLimit is the audit op of a run's refusals by its cgroup's
	// limits (forks at the process limit, memory), entered before its
	// run.exit; not a request.
	OpRunLimit = "run.limit"
	// OpRunQueue is the audit op of a spawn that waits for admission (the
	// limits of [runs] in oxios.toml, or an overloaded host); its run.spawn
	// entry follows when it starts. Not a request.
	OpRunQueue = "run.queue"
	// OpRunWall is the audit op (result EDQUOT) of a run its wall time
	// budget ended, the budget.exceeded event; not a request.
	OpRunWall = "run.wall"

	OpBudgetShow   = "budget.show"
	OpBudgetSet    = "budget.set"
	OpBudgetReset  = "budget.reset"
	OpBudgetCheck  = "budget.check"
	OpBudgetCharge = "budget.charge"
)

// Record types of runs.
const (
	RecordRun        = "run"
	RecordOutput     = "output"
	RecordMessage    = "message"
	RecordDelta      = "delta"
	RecordToolCall   = "tool_call"
	RecordToolResult = "tool_result"
	RecordUsage      = "usage"
	RecordEndpoint   = "endpoint"
	RecordError      = "error"
	RecordExit       = "exit"
	RecordExec       = "exec"
	RecordBudget     = "budget"
	RecordResult     = "result" // an LLM run's answer that matched its schema
	RecordReplay     = "replay" // how a replay compared with its recording (ox-replay)
	RecordTurn       = "turn"   // a chat run waits for its next message
	RecordContext    = "context"
)

// Run states.
const (
	RunQueued  = "queued" // waiting for admission
	RunRunning = "running"
	RunStopped = "stopped" // SIGSTOP'd
	RunExited  = "exited"
	RunLost    = "lost" // oxiosd restarted while it ran
)

// SpawnArgs are the args of run.spawn. Command set: a process run of that
// command (Command[0] an absolute path or a name looked up in oxiosd's
// PATH). Command empty: an LLM run of the runner ox-agent with Task.
type SpawnArgs struct {
	Agent   string   `json:"agent"`
	Command []string `json:"command,omitempty"`
	Task    string   `json:"task,omitempty"`
	Model   string   `json:"model,omitempty"`
	// Input becomes the run's stdin (records or text: the context of an
	// LLM run); empty: /dev/null.
	Input string `json:"input,omitempty"`
	// Env adds KEY=VALUE pairs to the run's environment.
	Env    []string `json:"env,omitempty"`
	Attach bool     `json:"attach,omitempty"`
	// Priority orders the runs that wait for admission: higher first,
	// then first come first served. Default 0.
	Priority int `json:"priority,omitempty"`
	// LLM holds the options of an LLM run (ox-spawn --system, --persona,
	// --continue...), handed to the runner as its options.
	LLM *LLMArgs `json:"llm,omitempty"`
	// Work is a host folder the run works on at /work, through an
	// overlay: its changes wait for ox-work apply (issue 48).
	Work string `json:"work,omitempty"`
	// OpenStdin keeps a command's stdin open after Input: run.stdin
	// writes it, and closes it (the mount's runs/RUN/stdin).
	OpenStdin bool `json:"open_stdin,omitempty"`
}

// LLMArgs are the options of an LLM run beyond its task and model.
type LLMArgs struct {
	System  string `json:"system,omitempty"`
	Persona string `json:"persona,omitempty"`
	// Continue continues the agent's latest conversation; Conversation
	// the one of that run.
	Continue     bool     `json:"continue,omitempty"`
	Conversation string   `json:"conversation,omitempty"`
	Temperature  *float64 `json:"temperature,omitempty"`
	MaxTokens    int      `json:"max_tokens,omitempty"`
	NoRecall     bool     `json:"no_recall,omitempty"`
	NoSummary    bool     `json:"no_summary,omitempty"`
	NoKeep       bool     `json:"no_keep,omitempty"`
	// WaitEndpoint: a model call that finds the endpoint's breaker open
	// waits for it instead of failing at once.
	WaitEndpoint bool `json:"wait_endpoint,omitempty"`
	// Schema is a JSON Schema the run's final answer must match: its
	// result record holds the value (ox-spawn --schema).
	Schema json.RawMessage `json:"schema,omitempty"`
	// Vars fill the persona's {{NAME}}s (ox-spawn -v NAME=VALUE).
	Vars map[string]string `json:"vars,omitempty"`
	// Fragments are added to the prompt, each a file's text (ox-spawn
	// read it) or a URL the runner fetches through net.fetch.
	Fragments []Fragment `json:"fragments,omitempty"`
	// Chat keeps the run going turn after turn (ox-spawn -i): its stdin
	// stays open (run.stdin), each line a message of the user, answered
	// in one conversation until the stdin is closed. Task, if given, is
	// the first message.
	Chat bool `json:"chat,omitempty"`
}

// Chatting reports whether a is a chat run (LLMArgs.Chat).
func (a SpawnArgs) Chatting() bool { return len(a.Command) == 0 && a.LLM != nil && a.LLM.Chat }

// ContextRecord is the first line of a chat run's stdin, written by
// oxiosd: the run's input and the text of its fragments (ox-spawn -f),
// which the runner says before the first message. The lines after it are
// the user's messages, each a MessageRecord (or a line of text).
type ContextRecord struct {
	Type string `json:"type"` // always "context"
	Text string `json:"text"`
}

// TurnRecord says a chat run answered its messages so far and waits for
// the next: a front end on a terminal prompts for it then.
type TurnRecord struct {
	Type  string    `json:"type"` // always "turn"
	Run   string    `json:"run"`
	Agent string    `json:"agent"`
	Time  time.Time `json:"time"`
	// Turn is how many messages of the user were answered.
	Turn int `json:"turn"`
	// Tokens is what the run used so far.
	Tokens int64  `json:"tokens"`
	Text   string `json:"text"`
}

// Fragment is a piece of text added to an LLM run's prompt (ox-spawn -f):
// Name is the file or URL it came from; Text, for a URL, is fetched by the
// run under its agent's [net] policy.
type Fragment struct {
	Name string `json:"name"`
	Text string `json:"text,omitempty"`
	URL  bool   `json:"url,omitempty"`
}

// VarName reports whether name may name a persona's variable ({{name}}).
func VarName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// ResultRecord is the "result" record of an LLM run asked for a schema:
// its final answer, the JSON value that matched (ox-spawn --schema).
type ResultRecord struct {
	Type  string          `json:"type"` // always "result"
	Value json.RawMessage `json:"value"`
	Text  string          `json:"text"`
}

// RunRecord is the "run" record: a run as ox-ps shows it.
type RunRecord struct {
	Type     string `json:"type"` // always "run"
	ID       string `json:"id"`
	Node     string `json:"node,omitempty"` // the fleet node of the run, in a fleet-wide view
	Agent    string `json:"agent"`
	PID      int    `json:"pid,omitempty"`
	State    string `json:"state"`
	Priority int    `json:"priority,omitempty"`
	// Queued is when a run that waited for admission was spawned.
	Queued    *time.Time `json:"queued,omitempty"`
	Started   time.Time  `json:"started"`
	Ended     *time.Time `json:"ended,omitempty"`
	Command   []string   `json:"command,omitempty"`
	Task      string     `json:"task,omitempty"`
	Model     string     `json:"model,omitempty"`
	Workspace string     `json:"workspace,omitempty"`
	// Work is the host folder the run works on through an overlay.
	Work string `json:"work,omitempty"`
	// OpenStdin: the run's stdin stays open for run.stdin.
	OpenStdin bool `json:"open_stdin,omitempty"`
	// Policy is the digest of the agent's policy file the run started
	// under, as ox-policy show names it (the policy's version).
	Policy string `json:"policy,omitempty"`
	// Home is the node that placed the run from its agent's home, and is
	// charged its use when it ends (a fleet; "" for a run of this node).
	Home string `json:"home,omitempty"`
	// Status is the exit status as a shell reports it (128+N for signal
	// N), once exited.
	Status *int   `json:"status,omitempty"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
	// Limits: as in the exit record.
	Limits string `json:"limits,omitempty"`
	// Resources, sampled from /proc when asked for (ox-ps, ox-top): the
	// sums over the run's processes (its process group and descendants).
	CPU   float64 `json:"cpu,omitempty"`   // seconds, user+system, with reaped children's
	RSS   int64   `json:"rss,omitempty"`   // bytes
	FDs   int     `json:"fds,omitempty"`   // open file descriptors
	Procs int     `json:"procs,omitempty"` // processes
	// CPUPercent is the CPU use between two samples (ox-top), 100 = a core.
	CPUPercent *float64 `json:"cpu_percent,omitempty"`
	Tokens     int64    `json:"tokens,omitempty"`
	Cost       float64  `json:"cost,omitempty"`
	Execs      int64    `json:"execs,omitempty"`
	Text       string   `json:"text"`
}

// OutputRecord is the "output" record: one line a process run wrote.
type OutputRecord struct {
	Type   string    `json:"type"` // always "output"
	Run    string    `json:"run"`
	Agent  string    `json:"agent"`
	Stream string    `json:"stream"` // stdout or stderr
	Time   time.Time `json:"time"`
	Text   string    `json:"text"`
}

// ExitRecord is the "exit" record: how a run ended.
type ExitRecord struct {
	Type   string `json:"type"` // always "exit"
	Run    string `json:"run"`
	Agent  string `json:"agent"`
	Status int    `json:"status"`
	Signal string `json:"signal,omitempty"`
	Error  string `json:"error,omitempty"`
	// Limits says which limits of its cgroup the run ran into, if any
	// ("12 forks refused at the process limit").
	Limits string    `json:"limits,omitempty"`
	Time   time.Time `json:"time"`
	Text   string    `json:"text"`
}

// AttachArgs are the args of run.attach.
type AttachArgs struct {
	Run string `json:"run"`
}

// StdinArgs are the args of run.stdin: Data written to Run's stdin, then
// the stdin closed when Close.
type StdinArgs struct {
	Run   string `json:"run"`
	Data  []byte `json:"data,omitempty"`
	Close bool   `json:"close,omitempty"`
}

// RunsArgs name runs (run.wait).
type RunsArgs struct {
	Runs []string `json:"runs"`
}

// KillArgs are the args of run.kill. Signal is a name (TERM, SIGTERM) or a
// number; empty means TERM.
type KillArgs struct {
	Runs   []string `json:"runs"`
	Signal string   `json:"signal,omitempty"`
}

// PsArgs are the args of run.ps: the live runs (of Agent, if given), and
// with All the exited ones kept too.
type PsArgs struct {
	Agent string `json:"agent,omitempty"`
	All   bool   `json:"all,omitempty"`
}

// ExecArgs are the args of exec: Argv, or Command split into words (no
// shell unless the agent's policy allows one). Timeout is a Go duration,
// capped by the policy's.
type ExecArgs struct {
	Agent   string   `json:"agent"`
	Argv    []string `json:"argv,omitempty"`
	Command string   `json:"command,omitempty"`
	Stdin   string   `json:"stdin,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
	// Work is a host folder the command works on at /work through an
	// overlay (ox-exec --work): its changes wait as the exec's work.
	Work string `json:"work,omitempty"`
}

// ExecRecord is the "exec" record: the result of an exec.
type ExecRecord struct {
	Type      string   `json:"type"` // always "exec"
	Agent     string   `json:"agent"`
	Run       string   `json:"run,omitempty"`
	Argv      []string `json:"argv"`
	Status    int      `json:"status"`
	Signal    string   `json:"signal,omitempty"`
	TimedOut  bool     `json:"timed_out,omitempty"`
	Stdout    string   `json:"stdout"`
	Stderr    string   `json:"stderr"`
	Truncated bool     `json:"truncated,omitempty"`
	// Limits: as in the exit record of a run.
	Limits string `json:"limits,omitempty"`
	// Digest is the blake3 of stdout then stderr, as the audit log has it.
	Digest   string  `json:"digest"`
	Duration float64 `json:"duration"` // seconds
	// Work is the host folder of an exec with one, ID the id its work
	// goes by (ox-work diff ID) and Changes how many paths it changed
	// (none: nothing waits).
	Work    string `json:"work,omitempty"`
	ID      string `json:"id,omitempty"`
	Changes int    `json:"changes,omitempty"`
	Text    string `json:"text"`
}

// AddCost adds two costs, rounded to a billionth: a sum of prices such as
// 0.0000025 per token would otherwise print as 0.00043259999999999994.
func AddCost(a, b float64) float64 { return math.Round((a+b)*1e9) / 1e9 }

// Budget is an amount of each thing a budget bounds. In limits, 0 means
// no limit.
type Budget struct {
	Tokens int64   `json:"tokens"`
	Cost   float64 `json:"cost"`
	Wall   float64 `json:"wall"` // seconds
	Execs  int64   `json:"execs"`
}

// BudgetRecord is the "budget" record: an agent's limits (whole agent and
// per run) and what it has used since Since.
type BudgetRecord struct {
	Type     string    `json:"type"` // always "budget"
	Agent    string    `json:"agent"`
	Limit    Budget    `json:"limit"`
	RunLimit Budget    `json:"run_limit"`
	Used     Budget    `json:"used"`
	Since    time.Time `json:"since"`
	// Run and RunUsed are the calling run's, for check and charge.
	Run     string  `json:"run,omitempty"`
	RunUsed *Budget `json:"run_used,omitempty"`
	Text    string  `json:"text"`
}

// BudgetArgs name an agent (budget.show, budget.reset).
type BudgetArgs struct {
	Agent string `json:"agent"`
}

// BudgetSetArgs are the args of budget.set: the limits given replace the
// agent's; a nil one is left as it is.
type BudgetSetArgs struct {
	Agent    string  `json:"agent"`
	Limit    *Budget `json:"limit,omitempty"`
	RunLimit *Budget `json:"run_limit,omitempty"`
}

// BudgetCheckArgs are the args of budget.check: may the calling run spend
// about Tokens more? EDQUOT if not.
type BudgetCheckArgs struct {
	Agent  string `json:"agent"`
	Tokens int64  `json:"tokens"`
}

// BudgetChargeArgs are the args of budget.charge: usage a model call
// reported. The kernel prices it with the configured rates.
type BudgetChargeArgs struct {
	Agent            string `json:"agent"`
	Model            string `json:"model,omitempty"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
}

// The records of an LLM run, printed by the runner ox-agent on its stdout
// (one JSON object a line) and kept by the supervisor as they are.

// MessageRecord is a message of the conversation: the system prompt, the
// context given on stdin, the task, and each answer of the model.
type MessageRecord struct {
	Type  string    `json:"type"` // always "message"
	Run   string    `json:"run"`
	Agent string    `json:"agent"`
	Time  time.Time `json:"time"`
	Role  string    `json:"role"` // system, user, assistant
	// Turn numbers a model answer (1, 2...; 0 for the rest), so that a
	// replay finds each answer in the records (ox-replay).
	Turn int    `json:"turn,omitempty"`
	Text string `json:"text"`
}

// DeltaRecord is a piece of the model's answer as it streams; the
// message record that follows holds the whole answer, so a consumer that
// keeps messages may skip deltas.
type DeltaRecord struct {
	Type  string    `json:"type"` // always "delta"
	Run   string    `json:"run"`
	Agent string    `json:"agent"`
	Time  time.Time `json:"time"`
	Text  string    `json:"text"`
}

// ToolCallRecord is a tool call the model made.
type ToolCallRecord struct {
	Type      string    `json:"type"` // always "tool_call"
	Run       string    `json:"run"`
	Agent     string    `json:"agent"`
	Time      time.Time `json:"time"`
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Arguments string    `json:"arguments"`
	Turn      int       `json:"turn,omitempty"` // the answer that made it
	Text      string    `json:"text"`
}

// ToolResultRecord is what a tool call returned to the model; Error marks
// a failed call (the model sees the error and may correct itself).
type ToolResultRecord struct {
	Type  string    `json:"type"` // always "tool_result"
	Run   string    `json:"run"`
	Agent string    `json:"agent"`
	Time  time.Time `json:"time"`
	ID    string    `json:"id"`
	Name  string    `json:"name"`
	Error bool      `json:"error,omitempty"`
	Code  string    `json:"code,omitempty"` // the syscall's error code
	Text  string    `json:"text"`
}

// UsageRecord is what one model call used, as the endpoint reported it,
// and the run's totals.
type UsageRecord struct {
	Type             string    `json:"type"` // always "usage"
	Run              string    `json:"run"`
	Agent            string    `json:"agent"`
	Time             time.Time `json:"time"`
	Model            string    `json:"model"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	RunTokens        int64     `json:"run_tokens"`
	// FailedTokens is what attempts of the call that failed used (charged
	// too): their reported usage, or an estimate for a stream cut short.
	FailedTokens int64   `json:"failed_tokens,omitempty"`
	Cost         float64 `json:"cost"` // the run's, as the kernel priced it
	Seconds      float64 `json:"seconds"`
	Attempts     int     `json:"attempts"`
	// Turn numbers the answer the call gave (0: a call that failed);
	// Finish is the endpoint's finish reason for it.
	Turn   int    `json:"turn,omitempty"`
	Finish string `json:"finish,omitempty"`
	Text   string `json:"text"`
}

// EndpointRecord is a retry of a model call or a change of the circuit
// breaker that guards the endpoint (open, half-open, closed).
type EndpointRecord struct {
	Type    string    `json:"type"` // always "endpoint"
	Run     string    `json:"run"`
	Agent   string    `json:"agent"`
	Time    time.Time `json:"time"`
	Event   string    `json:"event"` // retry, open, half-open, closed, discarded, config
	Attempt int       `json:"attempt"`
	Wait    float64   `json:"wait,omitempty"` // seconds before the next attempt
	Text    string    `json:"text"`
}

// ErrorRecord is why an LLM run ended unsuccessfully: the budget, the
// endpoint, a signal, the kernel gone.
type ErrorRecord struct {
	Type  string    `json:"type"` // always "error"
	Run   string    `json:"run"`
	Agent string    `json:"agent"`
	Time  time.Time `json:"time"`
	Code  string    `json:"code,omitempty"` // EDQUOT, ECANCELED, EIO...
	Text  string    `json:"text"`
}

// ReplayRecord is how a replay of a run (ox-replay, ox-agent --replay)
// compared with its recording: the recorded answers served back in
// order, each tool call and result of the replay compared with the
// recorded one. Matched says all were the same and the replay ended as
// the recording did; otherwise Turn and Step say where it first
// differed (answer Turn, its tool call Step; Step 0: the run's end),
// Want what the recording holds there and Got what the replay did.
type ReplayRecord struct {
	Type      string    `json:"type"` // always "replay"
	Run       string    `json:"run"`  // the replay's run
	Agent     string    `json:"agent"`
	Time      time.Time `json:"time"`
	Of        string    `json:"of"` // the run replayed
	Matched   bool      `json:"matched"`
	Answers   int       `json:"answers"`    // the recorded answers served
	ToolCalls int       `json:"tool_calls"` // the tool calls compared
	Turn      int       `json:"turn,omitempty"`
	Step      int       `json:"step,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Arguments string    `json:"arguments,omitempty"`
	Want      string    `json:"want,omitempty"`
	Got       string    `json:"got,omitempty"`
	Text      string    `json:"text"`
}
