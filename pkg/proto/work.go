package proto

import "time"

// Ops of issue 48: the pending work of runs that worked on a host folder
// through an overlay (ox-spawn --work), reviewed and applied or
// discarded by an operator (ox-work).
const (
	// OpWorkList lists the runs' work (ox-work ls).
	OpWorkList = "work.list"
	// OpWorkDiff is a run's patch, or its diffstat (ox-work diff).
	OpWorkDiff = "work.diff"
	// OpWorkApply writes a run's work to its folder (ox-work apply).
	OpWorkApply = "work.apply"
	// OpWorkDiscard throws a run's work away (ox-work discard).
	OpWorkDiscard = "work.discard"
	// OpWorkView reads a path of the view of a run's pending work: its
	// folder with the run's changes over it (the mount's runs/RUN/work/).
	OpWorkView = "work.view"
)

// RecordWork is the type of a WorkRecord.
const RecordWork = "work"

// WorkArgs are the args of the work ops: Run's work (work.list: every
// run's, of Agent when given).
type WorkArgs struct {
	Agent string `json:"agent,omitempty"`
	Run   string `json:"run,omitempty"`
	// Stat asks work.diff for the diffstat instead of the patch.
	Stat bool `json:"stat,omitempty"`
	// Force has work.apply write over conflicts.
	Force bool `json:"force,omitempty"`
	// Path is the path work.view reads ("" for the top).
	Path string `json:"path,omitempty"`
}

// RecordWorkView is the type of a WorkView.
const RecordWorkView = "work_view"

// WorkView is the "work_view" record (work.view): a folder of the view
// of a run's pending work, with its entries, or a file, with its content.
type WorkView struct {
	Type    string      `json:"type"` // always "work_view"
	Run     string      `json:"run"`
	Path    string      `json:"path"`
	Dir     bool        `json:"dir,omitempty"`
	Entries []WorkEntry `json:"entries,omitempty"`
	Data    []byte      `json:"data,omitempty"`
}

// WorkEntry is a name in a folder of a WorkView.
type WorkEntry struct {
	Name string `json:"name"`
	Dir  bool   `json:"dir,omitempty"`
	Size int64  `json:"size"`
	Mode uint32 `json:"mode"` // permission bits
}

// WorkRecord is the "work" record: a run's work on a host folder.
type WorkRecord struct {
	Type  string `json:"type"` // always "work"
	Run   string `json:"run"`
	Agent string `json:"agent"`
	Dir   string `json:"dir"`
	// State: running, pending, applied, discarded or lost.
	State   string     `json:"state"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	Done    *time.Time `json:"done,omitempty"`
	// Changes counts the paths the run added, modified or deleted.
	Changes int `json:"changes"`
	// Digest is the BLAKE3 digest of the patch.
	Digest string `json:"digest,omitempty"`
	// Patch (work.diff) is the patch, as git diff --binary makes it;
	// Stat (work.diff with stat) its diffstat.
	Patch string `json:"patch,omitempty"`
	Stat  string `json:"stat,omitempty"`
	// Conflicts (work.apply refused) names each file that changed in the
	// folder under one the run changed, and how.
	Conflicts []string `json:"conflicts,omitempty"`
	Text      string   `json:"text"`
}

// OpRunReceipt is a run's receipt (ox-receipt): the admin's, as it holds
// audit entries of every agent.
const OpRunReceipt = "run.receipt"

// RecordReceiptLine is the type of a ReceiptLine.
const RecordReceiptLine = "receipt_line"

// ReceiptArgs name the run of run.receipt.
type ReceiptArgs struct {
	Run string `json:"run"`
}

// ReceiptLine is one line of a receipt (package receipt), streamed by
// run.receipt in order: written out one a line, they are the receipt.
type ReceiptLine struct {
	Type string `json:"type"` // always "receipt_line"
	Line string `json:"line"`
}
