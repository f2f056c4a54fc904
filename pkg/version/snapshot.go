package version

import (
	"fmt"
	"strconv"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Commits of the live state and restores of an agent to a commit, as
// the kernel's commit and restore syscalls make them on the committer
// goroutine: which paths to stage and what a restore changes come from
// here, the audit entries and the journal from the kernel.

// AuditTrailers are the trailers naming the audit log's head at seq.
func AuditTrailers(seq uint64, hash string) []Trailer {
	return []Trailer{
		{Key: TrailerAuditSeq, Value: strconv.FormatUint(seq, 10)},
		{Key: TrailerAuditHash, Value: hash},
	}
}

// Daemon is the committer of every commit oxiosd makes.
func Daemon(when time.Time) Signature {
	return Signature{Name: "oxiosd", Email: "oxiosd@localhost", When: when}
}

// SaveOptions is a commit of the live state.
type SaveOptions struct {
	Agent    string // whose paths ("": every agent's)
	Message  string // "": "Commit the state of AGENT"
	Trailers []Trailer
	Author   Signature
	When     time.Time
	Tag      string
}

// Save commits paths as the live state st holds them (deleting the ones
// that are no longer a file). With nothing changed against HEAD it
// returns ErrNothingToCommit and commits nothing.
func (r *Repo) Save(st Store, paths []string, o SaveOptions) (Commit, error) {
	tx, err := r.Begin()
	if err != nil {
		return Commit{}, err
	}
	if err := Stage(tx, st, paths); err != nil {
		tx.Abort()
		return Commit{}, err
	}
	msg := o.Message
	if msg == "" {
		what := "every agent"
		if o.Agent != "" {
			what = o.Agent
		}
		msg = fmt.Sprintf("Commit the state of %s", what)
	}
	return tx.Commit(CommitOptions{
		Message:   msg,
		Trailers:  o.Trailers,
		Author:    o.Author,
		Committer: Daemon(o.When),
		Tag:       o.Tag,
	})
}

// Restore is one change of a restore: a key of an agent deleted or set
// to a committed value, audited as Op.
type Restore struct {
	Space, Key string
	Value      []byte
	Delete     bool
	Op         string // the syscall the change is audited as
}

// Change is the change of agent's state that ch makes.
func (ch Restore) Change(agent string) *state.Change {
	return &state.Change{Agent: agent, Space: ch.Space, Key: ch.Key, Value: ch.Value, Delete: ch.Delete}
}

// Entry is the audit entry of ch by who, restoring agent to commit: the
// save or delete of its key (target "agent:key"), its args the digest of
// "agent:commit", the same for every change of one restore.
func (ch Restore) Entry(who audit.Actor, agent, commit string) *audit.Entry {
	return &audit.Entry{Actor: who, Op: ch.Op, Target: agent + ":" + ch.Key, Args: audit.ArgsDigest([]byte(agent + ":" + commit))}
}

// RestorePlan is what makes the live files have (as LiveFiles lists
// them) equal to want (as Files lists them): the deletes first, then the
// saves, so that a key that becomes a folder (or the reverse) is removed
// before its replacement is written. The kernel's own files (policy,
// budget used) are not the agent's to roll back: the sys space is left
// as it is.
func (r *Repo) RestorePlan(have, want map[string]string) ([]Restore, error) {
	var dels, saves []Restore
	for _, ch := range DiffFiles(have, want) {
		space, _, key, ok := SplitSpacePath(ch.Path)
		if !ok || space == state.SpaceSys {
			continue
		}
		saveOp, delOp := proto.OpStateSave, proto.OpStateDelete
		if space == state.SpaceMem {
			saveOp, delOp = proto.OpMemRemember, proto.OpMemForget
		}
		if ch.Action == Deleted {
			dels = append(dels, Restore{Space: space, Key: key, Delete: true, Op: delOp})
			continue
		}
		val, err := r.ReadBlob(ch.To)
		if err != nil {
			return nil, err
		}
		saves = append(saves, Restore{Space: space, Key: key, Value: val, Op: saveOp})
	}
	return append(dels, saves...), nil
}

// RestoredRecord is the record of a restore that changed plan but left
// nothing to commit (it undid uncommitted changes, and the state is
// HEAD's again): what the restore changed.
func RestoredRecord(rec *proto.CommitRecord, agent, rev string, plan []Restore) {
	rec.Message = fmt.Sprintf("restored %d keys of %s to %s; the state equals HEAD, nothing to commit", len(plan), agent, rev)
	for _, ch := range plan {
		action := Modified
		if ch.Delete {
			action = Deleted
		}
		rec.Changed = append(rec.Changed, proto.PathChange{Path: SpacePath(ch.Space, agent, ch.Key), Action: action})
	}
}
