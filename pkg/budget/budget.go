// Package budget is the ledger of what agents may spend and have spent
// (tokens, cost, wall time, execs). An agent's limits come from its
// policy unless the admin set others; its use is kept in its
// sys/budget.json, whose every change the kernel commits with the audit
// entry of the charge (Audited, ChargeAudited, through the kernel's
// Queue), in the order the ledger made the changes.
package budget

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// File is an agent's sys/budget.json.
type File struct {
	Limit    *proto.Budget `json:"limit,omitempty"`
	RunLimit *proto.Budget `json:"run_limit,omitempty"`
	Used     proto.Budget  `json:"used"`
	Since    time.Time     `json:"since"`
	// Away, on the agent's home: the runs it placed on other nodes, by
	// AwayKey (away.go).
	Away map[string]*Away `json:"away,omitempty"`
	// Owed, on a node where the agent ran away from home: the use of its
	// runs that ended here, by run, until its home has it (away.go).
	Owed map[string]*Owed `json:"owed,omitempty"`
}

// Ledger holds the budget file of each agent once read.
type Ledger struct {
	// Queue commits a change of the ledger's (Audited, ChargeAudited).
	Queue Queue
	mu    sync.Mutex // orders changes, held until each is submitted
	files map[string]*File
	load  func(agent string) ([]byte, error)
	log   *slog.Logger
}

// Queue submits agent's budget file value with e, the audit entry of the
// change (data: its bus event's), to the kernel's group commit, under the
// ledger's lock so that the changes commit in the order they were made,
// without waiting: wait, called once the lock is let go, waits until the
// change is durable or failed.
type Queue func(ctx context.Context, agent string, value []byte, e *audit.Entry, data any) (wait func() error, err error)

// NewLedger returns a ledger that reads an agent's file with load on
// first use (an error: the agent has none yet).
func NewLedger(load func(agent string) ([]byte, error), log *slog.Logger) *Ledger {
	return &Ledger{files: map[string]*File{}, load: load, log: log}
}

// fileLocked returns agent's file, read on first use. l.mu is held.
func (l *Ledger) fileLocked(agent string) *File {
	if b, ok := l.files[agent]; ok {
		return b
	}
	b := &File{}
	if v, err := l.load(agent); err == nil {
		if err := json.Unmarshal(v, b); err != nil {
			l.log.Warn("budget file unreadable: starting from zero", "agent", agent, "err", err)
			*b = File{}
		}
	}
	l.files[agent] = b
	return b
}

// Limits returns agent's limits (the admin's, else those of its policy
// p) and what it used.
func (l *Ledger) Limits(agent string, p *policy.Policy) (lim, run, used proto.Budget) {
	lim, run = FromPolicy(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.fileLocked(agent)
	if b.Limit != nil {
		lim = *b.Limit
	}
	if b.RunLimit != nil {
		run = *b.RunLimit
	}
	return lim, run, b.Used
}

// Since is when agent's use began to count.
func (l *Ledger) Since(agent string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fileLocked(agent).Since
}

// Update applies fn to agent's file and hands its new contents to
// commit, both under the ledger's lock, so that changes are committed in
// the order they were made. commit's error is returned.
func (l *Ledger) Update(agent string, fn func(*File), commit func(value []byte) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.fileLocked(agent)
	fn(b)
	if b.Since.IsZero() {
		b.Since = time.Now().UTC()
	}
	v, _ := json.Marshal(b)
	return commit(append(v, '\n'))
}

// Charge adds d to agent's use (Update).
func (l *Ledger) Charge(agent string, d proto.Budget, commit func(value []byte) error) error {
	return l.Update(agent, func(b *File) {
		b.Used.Tokens += d.Tokens
		b.Used.Cost = proto.AddCost(b.Used.Cost, d.Cost)
		b.Used.Wall += d.Wall
		b.Used.Execs += d.Execs
	}, commit)
}

// ChargeRun is Charge, which also charges d to run r (nil: none) as the
// change is committed, under the ledger's lock: the run's use and the
// agent's move together.
func (l *Ledger) ChargeRun(agent string, d proto.Budget, r Run, commit func(value []byte) error) error {
	return l.Charge(agent, d, func(value []byte) error {
		if r != nil {
			r.Charge(d.Tokens, d.Cost, d.Execs)
		}
		return commit(value)
	})
}

// Audited is Update committed through l.Queue with e, the audit entry of
// the change (data: its event's), waiting until it is durable.
func (l *Ledger) Audited(ctx context.Context, agent string, fn func(*File), e *audit.Entry, data any) error {
	var wait func() error
	err := l.Update(agent, fn, func(value []byte) (err error) {
		wait, err = l.Queue(ctx, agent, value, e, data)
		return err
	})
	if err != nil {
		return err
	}
	return wait()
}

// ChargeAudited is ChargeRun committed through l.Queue with e, as
// Audited.
func (l *Ledger) ChargeAudited(ctx context.Context, agent string, d proto.Budget, r Run, e *audit.Entry, data any) error {
	var wait func() error
	err := l.ChargeRun(agent, d, r, func(value []byte) (err error) {
		wait, err = l.Queue(ctx, agent, value, e, data)
		return err
	})
	if err != nil {
		return err
	}
	return wait()
}

// Forget drops agent's file (the agent was removed).
func (l *Ledger) Forget(agent string) {
	l.mu.Lock()
	delete(l.files, agent)
	l.mu.Unlock()
}

// FromPolicy returns the agent and run limits p sets.
func FromPolicy(p *policy.Policy) (lim, run proto.Budget) {
	b := p.Budget
	return proto.Budget{Tokens: b.Tokens, Cost: b.Cost, Wall: b.Wall.D().Seconds(), Execs: b.Execs},
		proto.Budget{Tokens: b.RunTokens, Cost: b.RunCost, Wall: b.RunWall.D().Seconds(), Execs: b.RunExecs}
}

// Over says which limit used plus more passes ("" if none). With spent,
// a limit reached counts as passed (nothing more may be spent), else only
// one exceeded.
func Over(used, more, lim proto.Budget, spent bool) string {
	var why []string
	check := func(name string, u, m, l float64, unit string) {
		if l <= 0 {
			return
		}
		if u+m > l || (spent && u >= l) {
			why = append(why, fmt.Sprintf("%s: %s used%s of %s", name, num(u, unit), plus(m, unit), num(l, unit)))
		}
	}
	check("tokens", float64(used.Tokens), float64(more.Tokens), float64(lim.Tokens), "")
	check("cost", used.Cost, more.Cost, lim.Cost, "")
	check("wall time", used.Wall, more.Wall, lim.Wall, "s")
	check("execs", float64(used.Execs), float64(more.Execs), float64(lim.Execs), "")
	return strings.Join(why, "; ")
}

func num(v float64, unit string) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d%s", int64(v), unit)
	}
	return fmt.Sprintf("%.4g%s", v, unit)
}

func plus(m float64, unit string) string {
	if m == 0 {
		return ""
	}
	return " + " + num(m, unit) + " asked"
}

// ForkFile is val, a budget file, for a fork: its limits kept, its use
// starting again at zero at now, with no runs away or charges owed (the
// source's). ok is false when val does not read (the
// fork then starts with val as it is).
func ForkFile(val []byte, now time.Time) (nv []byte, ok bool) {
	var b File
	if json.Unmarshal(val, &b) != nil {
		return val, false
	}
	b.Used, b.Since, b.Away, b.Owed = proto.Budget{}, now, nil, nil
	nv, err := json.Marshal(&b)
	if err != nil {
		return val, false
	}
	return nv, true
}

// Asked is the agents whose spending past a threshold of their policy's
// ask rules an operator approved: asked once per daemon life, not at
// each call past it. The zero Asked is empty.
type Asked struct {
	mu sync.Mutex
	m  map[string]bool
}

// Done reports whether agent's threshold was approved.
func (a *Asked) Done(agent string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.m[agent]
}

// Approve notes that agent's threshold was approved.
func (a *Asked) Approve(agent string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]bool{}
	}
	a.m[agent] = true
}
