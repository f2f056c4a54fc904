package kernel

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

// Recovery. The journal holds every audit entry made since the last
// checkpoint, with the changes it records. What a start replays is
// checked against the audit log: an entry the log has, made since the
// last checkpoint (whose audit seq each checkpoint leaves in
// DATA/index/journal.mark), that the journal does not hold was lost with
// the journal (deleted, replaced, damaged): the daemon refuses to start,
// naming what, unless started with --recover (cfg.Recover), which
// salvages what the journal still holds and records the loss in the
// audit log as a journal.recover entry (issue 45).

// opJournalRecover is the audit entry of a start that salvaged a damaged
// or missing journal.
const opJournalRecover = "journal.recover"

// recoverHint is what a refusal tells the admin to do.
const recoverHint = "to start with what is left, recording the loss in the audit log: oxiosd --recover (see oxiosd(8), RECOVERY)"

// markName is the file, in DATA/index, of the audit seq of the last
// checkpoint.
const markName = "journal.mark"

// replayed is what the journal's replay held of the audit log.
type replayed struct {
	runs [][2]uint64 // the seqs of its audit entries, as runs lo..hi
	// recovered is the report of a salvage, for the audit log.
	recovered string
	// refused: entries the audit log could not take back at a salvage
	// (it lacks one before them).
	refused int
	// repo is the damage of the repository a --recover start went on
	// with, for the audit log.
	repo string
}

// saw notes an audit entry of the journal.
func (r *replayed) saw(seq uint64) {
	if n := len(r.runs); n > 0 && r.runs[n-1][1]+1 == seq {
		r.runs[n-1][1] = seq
		return
	}
	r.runs = append(r.runs, [2]uint64{seq, seq})
}

// has reports whether the journal held entry seq.
func (r *replayed) has(seq uint64) bool {
	for _, run := range r.runs {
		if seq >= run[0] && seq <= run[1] {
			return true
		}
	}
	return false
}

// markPath is DATA/index/journal.mark.
func (k *Kernel) markPath() string { return filepath.Join(k.cfg.Data, "index", markName) }

// writeMark records the audit seq of a checkpoint. Inside the
// checkpoint, before its syncfs, which makes it durable.
func (k *Kernel) writeMark() error {
	seq, _ := k.audit.Last()
	p := k.markPath()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return durable.WriteFile(p, p+".tmp", []byte(strconv.FormatUint(seq, 10)+"\n"), 0o600)
}

// readMark is the audit seq of the last checkpoint; false if no
// checkpoint left one (a data dir from before the mark).
func (k *Kernel) readMark() (uint64, bool) {
	b, err := os.ReadFile(k.markPath())
	if err != nil {
		return 0, false
	}
	seq, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return seq, err == nil
}

// covers reports whether the journal held every entry lo..hi.
func (r *replayed) covers(lo, hi uint64) bool {
	for _, run := range r.runs {
		if run[0] <= lo && run[1] >= hi {
			return true
		}
	}
	return false
}

// lostEntries lists the audit entries made since mark (the last
// checkpoint) that the journal did not hold, and, after damage or such a
// loss, the saves since then whose key the state lacks though the log
// has no later delete of it: audited but absent.
func (k *Kernel) lostEntries(st *state.Store, mark uint64, damaged bool) (lost, absent []string, err error) {
	if k.auditSeq <= mark || !damaged && k.replay.covers(mark+1, k.auditSeq) {
		return nil, nil, nil
	}
	k.audit.Publish(k.auditSeq)
	last := map[string]*audit.Entry{} // a key's last save or delete
	var order []string
	err = k.audit.Scan(mark+1, func(e *audit.Entry, _ []byte) error {
		if !k.replay.has(e.Seq) {
			lost = append(lost, fmt.Sprintf("seq %d %s %s (%s)", e.Seq, e.Op, e.Target, e.Result))
		}
		if (e.Op == proto.OpStateSave || e.Op == proto.OpStateDelete) && e.Result == "ok" {
			if _, ok := last[e.Target]; !ok {
				order = append(order, e.Target)
			}
			last[e.Target] = e
		}
		return nil
	})
	for _, target := range order {
		e := last[target]
		if e.Op != proto.OpStateSave {
			continue
		}
		if agent, key, ok := strings.Cut(target, ":"); ok {
			if _, serr := st.Stat(agent, key); serr != nil {
				absent = append(absent, fmt.Sprintf("seq %d %s %s", e.Seq, e.Op, target))
			}
		}
	}
	return lost, absent, err
}

// checkRecovered compares what the start recovered in st with the audit
// log (see above), after the replay and before the checkpoint that
// empties the journal: a loss refuses the start, or, with cfg.Recover,
// is logged and kept (k.replay.recovered) for the audit log.
func (k *Kernel) checkRecovered(st *state.Store) error {
	mark, ok := k.readMark()
	if !ok {
		// A data dir from before the mark, or a new one: checked from
		// here on.
		if len(st.Lost()) == 0 {
			return k.writeMark()
		}
		mark = k.auditSeq
	}
	damage := st.Lost()
	lost, absent, err := k.lostEntries(st, mark, len(damage) > 0)
	if err != nil {
		return fmt.Errorf("checking the journal against the audit log: %w", err)
	}
	if len(lost) == 0 && len(absent) == 0 && len(damage) == 0 && k.replay.refused == 0 {
		return nil
	}
	var b strings.Builder
	if len(damage) > 0 {
		fmt.Fprintf(&b, "journal damage salvaged around: %v; ", damage)
	}
	if k.replay.refused > 0 {
		fmt.Fprintf(&b, "%d audit entries of the journal could not be restored (the audit log lacks one before them); ", k.replay.refused)
	}
	list := func(what []string) {
		shown := what[:min(len(what), 20)]
		b.WriteString(strings.Join(shown, "; "))
		if len(what) > len(shown) {
			fmt.Fprintf(&b, "; and %d more", len(what)-len(shown))
		}
		b.WriteString("; ")
	}
	if len(lost) > 0 {
		fmt.Fprintf(&b, "%d audited changes since the last checkpoint are not in the journal (it was deleted, replaced or damaged), and are lost: ", len(lost))
		list(lost)
	}
	if len(absent) > 0 {
		fmt.Fprintf(&b, "%d saves audited but absent from the state: ", len(absent))
		list(absent)
	}
	report := strings.TrimSuffix(b.String(), "; ")
	if !k.cfg.Recover {
		return damaged{fmt.Errorf("journal: %s; %s", report, recoverHint)}
	}
	k.log.Error("recovered with losses", "what", report)
	k.replay.recovered = report
	// The loss is accepted: the next start checks from here on.
	return k.writeMark()
}

// replayAuxEntry restores an audit entry of the journal into the log; at
// a salvage, one the log cannot chain is counted, not fatal.
func (k *Kernel) restoreEntry(e *audit.Entry) error {
	k.replay.saw(e.Seq)
	appended, err := k.audit.Restore(e, k.auditSeq)
	if err != nil && k.cfg.Recover && e.Seq > k.auditSeq+1 {
		k.replay.refused++
		return nil
	}
	if appended && err == nil {
		k.auditSeq = e.Seq
	}
	return err
}

// auditRecovery records a salvage's report in the audit log, once the
// committer runs.
func (k *Kernel) auditRecovery(op, target, report string) error {
	e := &audit.Entry{Actor: k.daemonActor(), Op: op, Target: target, Args: audit.ArgsDigest([]byte(report))}
	return k.submit(k.record(), &tx{entry: e}, true)
}

// openError adds the recovery hint to a journal damaged in the middle.
func openError(err error) error {
	var de *state.DamageError
	if errors.As(err, &de) {
		return damaged{fmt.Errorf("%w; %s", err, recoverHint)}
	}
	return err
}

// ErrDamaged is what a start refused for damage to the data is (errors.Is):
// the journal damaged or short of audited changes, the audit log
// truncated or rewritten, objects of the repository's HEAD missing. A
// restart will not mend it: oxiosd exits with its own status (65) and
// names the damage and the recovery.
var ErrDamaged = errors.New("the data is damaged")

// damaged marks err as damage (ErrDamaged), keeping what it wraps.
type damaged struct{ err error }

func (d damaged) Error() string        { return d.err.Error() }
func (d damaged) Unwrap() error        { return d.err }
func (d damaged) Is(target error) bool { return target == ErrDamaged }

// opRepoRecover is the audit entry of a start that went on despite
// objects missing from the repository (oxiosd --recover).
const opRepoRecover = "repo.recover"

// checkRepo is version.Repo.Check as ox-status shows it: what it found,
// and whether that is damage.
func (k *Kernel) checkRepo() (string, bool) {
	d, err := k.ver.repo.Check()
	if err != nil {
		return "checking the repository: " + err.Error(), true
	}
	return d.String(), !d.OK()
}

// checkRepoAtStart refuses a start on a repository whose HEAD's objects
// are missing (later commits would build on them), unless with
// cfg.Recover, which starts anyway and records the damage in the audit
// log (k.replay.repo) for ox-status to keep naming until it is mended.
func (k *Kernel) checkRepoAtStart() error {
	what, bad := k.checkRepo()
	if !bad {
		return nil
	}
	if !k.cfg.Recover {
		return damaged{fmt.Errorf("repository %s: %s; restore its .git from a backup or a pushed remote, or %s", filepath.Join(k.cfg.Data, "repo"), what, recoverHint)}
	}
	k.log.Error("the repository is damaged; starting anyway (--recover)", "what", what)
	k.replay.repo = what
	return nil
}
