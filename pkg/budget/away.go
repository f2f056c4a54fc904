package budget

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// Runs away from home (issue 44). An agent's home places runs of it on
// other nodes, and each such run's use is charged back to the home when
// it ends. Both sides keep what they must in the agent's budget file,
// so that what is charged and what is owed change in the same durable
// write as the use they concern:
//
//   - the home keeps each run it placed (Away, by "NODE/RUN"), written
//     before the placement goes out; a charge is taken only for a run it
//     names, from the node it names, and only once: the entry is marked
//     charged in the write that adds the charge, and kept a while after
//     (KeepCharged) to answer a charge sent again as already applied;
//   - the node that ran it keeps the run's use owed to the home (Owed, by
//     run), written with the run's end, until the home answers.

// Away is a run its agent's home placed on another node.
type Away struct {
	Placed  time.Time  `json:"placed"`
	Charged *time.Time `json:"charged,omitempty"`
}

// Owed is the use of a run that ended here, owed to the agent's home.
type Owed struct {
	Home  string       `json:"home"`
	Used  proto.Budget `json:"used"`
	Ended time.Time    `json:"ended"`
}

// How long the home keeps what it placed: a charged run's entry (to
// answer a charge sent again as applied, not as a new one) for
// KeepCharged, at most MaxCharged of them; a run never charged for
// KeepPlaced. A charge that comes after its entry went is refused, never
// counted twice.
const (
	KeepCharged = 7 * 24 * time.Hour
	MaxCharged  = 256
	KeepPlaced  = 30 * 24 * time.Hour
)

// AwayKey is the key of a run placed on node in File.Away.
func AwayKey(node, run string) string { return node + "/" + run }

// pruneAway drops the entries of b.Away past keeping at now.
func pruneAway(b *File, now time.Time) {
	var charged []string
	for k, a := range b.Away {
		switch {
		case a.Charged == nil && now.Sub(a.Placed) > KeepPlaced,
			a.Charged != nil && now.Sub(*a.Charged) > KeepCharged:
			delete(b.Away, k)
		case a.Charged != nil:
			charged = append(charged, k)
		}
	}
	if len(charged) > MaxCharged {
		sort.Slice(charged, func(i, j int) bool { return b.Away[charged[i]].Charged.Before(*b.Away[charged[j]].Charged) })
		for _, k := range charged[:len(charged)-MaxCharged] {
			delete(b.Away, k)
		}
	}
	if len(b.Away) == 0 {
		b.Away = nil
	}
}

// Place notes, durably with e, that agent's home placed run on node.
func (l *Ledger) Place(ctx context.Context, agent, node, run string, e *audit.Entry) error {
	return l.Audited(ctx, agent, func(b *File) {
		now := time.Now().UTC()
		pruneAway(b, now)
		if b.Away == nil {
			b.Away = map[string]*Away{}
		}
		b.Away[AwayKey(node, run)] = &Away{Placed: now}
	}, e, nil)
}

// Unplace forgets, durably with e, a placement of run on node that did
// not start (the node refused it).
func (l *Ledger) Unplace(ctx context.Context, agent, node, run string, e *audit.Entry) error {
	return l.Audited(ctx, agent, func(b *File) {
		delete(b.Away, AwayKey(node, run))
		if len(b.Away) == 0 {
			b.Away = nil
		}
	}, e, nil)
}

// Placement is what the home knows of a run it placed: never (no entry),
// placed and not yet charged, or charged.
type Placement int

const (
	NotPlaced Placement = iota
	Placed
	Charged
)

// ChargeAway charges d to agent for run on node, a run its home (this
// node) placed there, durably with e, and marks it charged in the same
// write. Only a Placed run is charged; for any other the file is left
// as it is and what the home knows of it is returned.
func (l *Ledger) ChargeAway(ctx context.Context, agent, node, run string, d proto.Budget, e *audit.Entry) (Placement, error) {
	var wait func() error
	state := NotPlaced
	l.mu.Lock()
	b := l.fileLocked(agent)
	a := b.Away[AwayKey(node, run)]
	switch {
	case a == nil:
	case a.Charged != nil:
		state = Charged
	default:
		state = Placed
	}
	if state != Placed {
		l.mu.Unlock()
		return state, nil
	}
	now := time.Now().UTC()
	a.Charged = &now
	b.Used.Tokens += d.Tokens
	b.Used.Cost = proto.AddCost(b.Used.Cost, d.Cost)
	b.Used.Wall += d.Wall
	b.Used.Execs += d.Execs
	pruneAway(b, now)
	v, _ := json.Marshal(b)
	var err error
	wait, err = l.Queue(ctx, agent, append(v, '\n'), e, nil)
	l.mu.Unlock()
	if err != nil {
		return Placed, err
	}
	return Placed, wait()
}

// Owe is Update, which also notes, in the same write, run's use d owed
// to home when home is not "" (zero: the run was this node's own agent's,
// and the home only learns that it ended).
func (l *Ledger) Owe(agent string, d, owed proto.Budget, run, home string, commit func(value []byte) error) error {
	return l.Update(agent, func(b *File) {
		b.Used.Tokens += d.Tokens
		b.Used.Cost = proto.AddCost(b.Used.Cost, d.Cost)
		b.Used.Wall += d.Wall
		b.Used.Execs += d.Execs
		if home != "" {
			if b.Owed == nil {
				b.Owed = map[string]*Owed{}
			}
			b.Owed[run] = &Owed{Home: home, Used: owed, Ended: time.Now().UTC()}
		}
	}, commit)
}

// Paid removes, durably with e, what agent owed for run (its home
// answered).
func (l *Ledger) Paid(ctx context.Context, agent, run string, e *audit.Entry) error {
	return l.Audited(ctx, agent, func(b *File) {
		delete(b.Owed, run)
		if len(b.Owed) == 0 {
			b.Owed = nil
		}
	}, e, nil)
}

// OwedBy is what agent owes, by run (a copy).
func (l *Ledger) OwedBy(agent string) map[string]Owed {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.fileLocked(agent)
	if len(b.Owed) == 0 {
		return nil
	}
	out := make(map[string]Owed, len(b.Owed))
	for r, o := range b.Owed {
		out[r] = *o
	}
	return out
}
