package audit

import (
	"encoding/json"
	"fmt"
)

// Entries staged in another journal before the log. oxiosd's group
// commit gives each entry its seq and writes it to the state journal,
// which is synced first; only then is the entry appended here. So the log
// must give it that seq (AppendAt), and after a crash the journal puts
// back what the log lost (Restore).

// AppendAt appends entries whose seqs were given already (the next ones
// of the log) and checks that the log gave them those seqs.
func (l *Log) AppendAt(entries []*Entry) error {
	if len(entries) == 0 {
		return nil
	}
	want := make([]uint64, len(entries))
	for i, e := range entries {
		want[i] = e.Seq
	}
	if err := l.Append(entries); err != nil {
		return fmt.Errorf("audit append: %w", err)
	}
	for i, e := range entries {
		if e.Seq != want[i] {
			return fmt.Errorf("audit log gave entry seq %d, the journal has %d", e.Seq, want[i])
		}
	}
	return nil
}

// AppendStaged appends e as the journal holds it to b: the JSON of its
// line, without its place in the chain (prev is zeros and hash absent:
// Restore gives both again). It is the line's own writer, not reflection:
// a bulk remember stages one entry per memory, and encoding/json was 9%
// of the daemon's CPU there. e.Time must be UTC. ParseStaged reads it
// back field for field.
func AppendStaged(b []byte, e *Entry) []byte {
	if b == nil {
		// Room for the line of a plain entry: one allocation, not three.
		b = make([]byte, 0, 256+len(e.Op)+len(e.Target)+len(e.Args)+len(e.Result)+len(e.Actor.Agent)+len(e.Actor.Run))
	}
	return append(appendBody(b, e, &zeroPrev), '}')
}

var zeroPrev [32]byte

// ParseStaged decodes an entry as the journal holds it.
func ParseStaged(payload []byte) (*Entry, error) {
	var e Entry
	if err := json.Unmarshal(payload, &e); err != nil {
		return nil, fmt.Errorf("journal audit record: %w", err)
	}
	return &e, nil
}

// Restore puts back, at start, e, an entry the journal holds, on a log
// whose last entry is head: appended again if the log lost it (it was
// durable only in the journal), skipped if the log has it. Appending the
// same fields after the same predecessor gives the same hash, so the
// chain is the one acknowledged. It reports whether e was appended.
func (l *Log) Restore(e *Entry, head uint64) (bool, error) {
	switch {
	case e.Seq <= head:
		return false, nil
	case e.Seq > head+1:
		return false, fmt.Errorf("audit log ends at seq %d but the journal continues at %d: entries are missing", head, e.Seq)
	}
	e.Prev, e.Hash = "", ""
	return true, l.AppendAt([]*Entry{e})
}
