package proto

// Ops of the audit log and of versioning.
const (
	OpAuditLog    = "audit.log"
	OpAuditShow   = "audit.show"
	OpAuditHead   = "audit.head"
	OpAuditVerify = "audit.verify"
	OpAuditExport = "audit.export"

	OpCommit        = "version.commit"
	OpCommitLog     = "version.log"
	OpCommitShow    = "version.show"
	OpCommitDiff    = "version.diff"
	OpCommitTag     = "version.tag"
	OpCommitRestore = "version.restore"
)

// Record types of the audit and version ops.
const (
	RecordAudit       = "audit" // an entry line, as stored
	RecordAuditHead   = "audit_head"
	RecordAuditVerify = "audit_verify"
	RecordCommit      = "commit"
	RecordDiff        = "diff"
)

// AuditLogArgs select entries of the audit log (audit.log). Each filter
// narrows the selection; the zero value is every entry the caller may see.
type AuditLogArgs struct {
	Agent string `json:"agent,omitempty"` // entries about or by this agent
	// Op is an op name or a glob of them ("state.*").
	Op string `json:"op,omitempty"`
	// SinceSeq and SinceTime start the selection (inclusive); SinceTime is
	// RFC 3339.
	SinceSeq  uint64 `json:"since_seq,omitempty"`
	SinceTime string `json:"since_time,omitempty"`
	// N keeps the last N selected entries (0: all).
	N int `json:"n,omitempty"`
	// Follow goes on streaming new entries as they are committed, until
	// the client cancels or closes its side of the connection.
	Follow bool `json:"follow,omitempty"`
	// OnlyNew skips the entries already in the log (with Follow: only
	// what comes from now on).
	OnlyNew bool `json:"only_new,omitempty"`
}

// AuditShowArgs name one entry (audit.show).
type AuditShowArgs struct {
	Seq uint64 `json:"seq"`
}

// AuditHead is the "audit_head" record: the last entry's seq and hash. It
// ends every export, and commit trailers carry it.
type AuditHead struct {
	Type string `json:"type"` // always "audit_head"
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// AuditVerify is the "audit_verify" record: the outcome of recomputing
// the chain.
type AuditVerify struct {
	Type     string `json:"type"` // always "audit_verify"
	Source   string `json:"source"`
	OK       bool   `json:"ok"`
	Entries  uint64 `json:"entries"`
	HeadSeq  uint64 `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	// FirstBad is the seq of the first entry that does not verify (0 when
	// OK, or when the damage is not in an entry, like a missing head).
	FirstBad uint64 `json:"first_bad,omitempty"`
	Problem  string `json:"problem,omitempty"`
	Note     string `json:"note,omitempty"`
}

// CommitArgs are the args of version.commit. An empty Agent commits every
// agent the caller may act on (the admin: all).
type CommitArgs struct {
	Agent   string `json:"agent,omitempty"`
	Message string `json:"message,omitempty"`
	Tag     string `json:"tag,omitempty"`
}

// CommitLogArgs are the args of version.log.
type CommitLogArgs struct {
	Agent string `json:"agent,omitempty"`
	Rev   string `json:"rev,omitempty"` // where to start (default HEAD)
	N     int    `json:"n,omitempty"`
}

// CommitShowArgs are the args of version.show; Agent limits the changed
// paths shown (and is what a non-admin must give).
type CommitShowArgs struct {
	Rev   string `json:"rev"`
	Agent string `json:"agent,omitempty"`
}

// CommitDiffArgs are the args of version.diff: From to To (To empty: the
// current, possibly uncommitted, state), limited to Agent when set.
type CommitDiffArgs struct {
	Agent string `json:"agent,omitempty"`
	From  string `json:"from"`
	To    string `json:"to,omitempty"`
	Patch bool   `json:"patch,omitempty"`
}

// CommitTagArgs are the args of version.tag.
type CommitTagArgs struct {
	Name string `json:"name"`
	Rev  string `json:"rev,omitempty"` // default HEAD
}

// CommitRestoreArgs are the args of version.restore.
type CommitRestoreArgs struct {
	Agent string `json:"agent"`
	Rev   string `json:"rev"`
}

// PathChange is one changed path of a commit or a diff.
type PathChange struct {
	Path   string `json:"path"`
	Action string `json:"action"` // "added", "modified" or "deleted"
}

// CommitRecord is the "commit" record: the result of version.commit,
// version.show, version.tag and version.restore, and each item of
// version.log.
type CommitRecord struct {
	Type    string       `json:"type"` // always "commit"
	Commit  string       `json:"commit"`
	Parent  string       `json:"parent,omitempty"`
	Time    string       `json:"time"`
	Author  string       `json:"author,omitempty"`
	Message string       `json:"message"`
	Tags    []string     `json:"tags,omitempty"`
	Changed []PathChange `json:"changed"`
	// AuditHead is the audit head at commit time, from the trailer.
	AuditHead *AuditHead `json:"audit_head,omitempty"`
	// AuditSeq is the entry that recorded the commit (or the restore),
	// when this call made it.
	AuditSeq uint64 `json:"audit_seq,omitempty"`
}

// DiffRecord is the "diff" record: one item of version.diff.
type DiffRecord struct {
	Type   string `json:"type"` // always "diff"
	Path   string `json:"path"`
	Action string `json:"action"`
	// Patch is the unified diff of the path, with CommitDiffArgs.Patch.
	Patch string `json:"patch,omitempty"`
}
