package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Keeper keeps the pending requests of a registry on disk, DIR/ID.json,
// from the ask until the decision. A request still there at start was
// pending when the daemon died (kill -9, a crash): the call that waited
// for it died with the daemon's connections, so nothing would go on if
// someone approved it now. Keep resolves it into the policy's default, as
// its timeout would have, decided by "oxiosd restart", and returns it
// for the kernel to audit (approve.decide) before it calls Write, which
// removes its file: a request left pending would invite an operator to
// approve what nothing will do, and no request ends without a decision on
// the log. A clean stop cancels the waiting calls (CancelAll) instead.
type Keeper struct {
	dir string
	g   *Registry
	log *slog.Logger
	mu  sync.Mutex
}

// Keep reads the requests a crash left pending in dir, restores them
// into g as decided, and makes g keep its pending requests there.
func Keep(g *Registry, dir string, log *slog.Logger) (*Keeper, []Request, error) {
	if err := durable.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("approvals: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("approvals: %w", err)
	}
	now := time.Now().UTC()
	var left []Request
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		var r Request
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil || r.ID+".json" != e.Name() {
			log.Warn("approvals: a pending request's file does not read; left alone", "file", e.Name(), "err", err)
			continue
		}
		r.State, r.DecidedBy, r.Decided = r.Default, "oxiosd restart", now
		r.Reason = "oxiosd stopped before a decision (the call that asked ended with it); the policy's ask.default decides"
		g.Restore(r)
		left = append(left, r)
	}
	kp := &Keeper{dir: dir, g: g, log: log}
	g.OnChange = kp.Write
	return kp, left, nil
}

// Write writes a new pending request to disk and removes a decided
// one's file.
func (kp *Keeper) Write(r Request) {
	path := filepath.Join(kp.dir, r.ID+".json")
	// A decision may overtake the write of its request: under the lock, a
	// request decided meanwhile is not written.
	kp.mu.Lock()
	defer kp.mu.Unlock()
	var err error
	if r.State == Pending {
		if cur, gerr := kp.g.Get(r.ID); gerr == nil && cur.State != Pending {
			return
		}
		var b []byte
		if b, err = json.Marshal(r); err == nil {
			err = durable.WriteFile(path, path+".tmp", b, 0o600)
		}
	} else if err = durable.Remove(path); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		kp.log.Warn("approvals: keeping a request on disk", "id", r.ID, "err", err)
	}
}

// Record is r's record.
func Record(r Request) proto.ApprovalRecord {
	rec := proto.ApprovalRecord{Type: proto.RecordApproval, ID: r.ID, Agent: r.Agent, Run: r.Run, Op: r.Op, What: r.What,
		Rule: r.Rule, Why: r.Why, Time: r.Time, Expire: r.Expire, Default: r.Default, State: r.State,
		DecidedBy: r.DecidedBy, Reason: r.Reason, Decided: r.Decided}
	switch r.State {
	case Pending:
		rec.Text = fmt.Sprintf("%s: %s waits for approval: %s %s (%s: %s); ox-approve yes %s, or no; %s at %s", r.ID, r.Agent, r.Op, r.What, r.Rule, r.Why, r.ID, r.Default, r.Expire.Format(time.RFC3339))
	default:
		rec.Text = fmt.Sprintf("%s: %s %s %s by %s", r.ID, r.Op, r.What, r.State, r.DecidedBy)
		if r.Reason != "" {
			rec.Text += ": " + r.Reason
		}
	}
	return rec
}

// By is who decided r as its audit entry names them: "oxiosd" when no
// one did (the call that asked went away).
func (r *Request) By() string {
	if r.DecidedBy == "" {
		return "oxiosd"
	}
	return r.DecidedBy
}

// Target is the audit target of r's decision: "AGENT:ID STATE by WHO".
func (r *Request) Target() string {
	return fmt.Sprintf("%s:%s %s by %s", r.Agent, r.ID, r.State, r.By())
}

// Records are the records of the requests of agent ("": every agent's)
// that visible allows, the pending ones only if pending, as List.
func (g *Registry) Records(agent string, pending bool, visible func(agent string) bool) []proto.ApprovalRecord {
	var recs []proto.ApprovalRecord
	for _, r := range g.List(agent, pending) {
		if visible(r.Agent) {
			recs = append(recs, Record(r))
		}
	}
	return recs
}

// FromAsk is the request of ask rule a of p, which holds back op of
// agent, a call that would do what (whole: an operator decides on all of
// it; see MaxWhat); run is the asking run, "" if the caller is not a run
// of agent. It waits for p's ask.timeout, and then takes p's ask.default.
func FromAsk(agent, run, op, what string, p *policy.Policy, a *policy.Asked) (Request, time.Duration) {
	def := Denied
	if p.AskAllows() {
		def = Approved
	}
	r := Request{Agent: agent, Run: run, Op: op, What: shown(what), Rule: a.Rule, Why: a.Reason, Default: def}
	if len(r.What) > MaxWhat {
		r.long = len(r.What)
		r.What = audit.Clip(r.What, MaxWhat)
	}
	return r, p.AskTimeout()
}

// shown is what as an operator is shown it: as it is when it is valid
// UTF-8 of printable runes and ASCII spaces, else Go-quoted (an escape
// sequence, a bidirectional override or a zero-width character would make
// a terminal show other text than the request holds). Commands come
// quoted already (policy.Quote).
func shown(what string) string {
	if proto.Printable(what) {
		return what
	}
	return strconv.Quote(what)
}

// AskTarget is the audit target of the ask that registered r (its what
// clipped: the entry's args digest covers all of it).
func (r *Request) AskTarget() string {
	return fmt.Sprintf("%s:%s %s %s [%s]", r.Agent, r.ID, r.Op, audit.Clip(r.What, audit.MaxTarget), r.Rule)
}

// DecideTarget is the audit target of an operator's decision of r: as
// Target, and the reason given (clipped).
func (r *Request) DecideTarget() string {
	if r.Reason == "" {
		return r.Target()
	}
	return r.Target() + ": " + audit.Clip(r.Reason, 200)
}

// Refusal is the error of the call that asked for r once r was not
// approved: who decided, why, and the ask rule that asked.
func (r *Request) Refusal() *proto.Error {
	why := r.State + " by " + r.By()
	if r.Reason != "" {
		why += ": " + r.Reason
	}
	return proto.Errorf(proto.EPERM, "%s: %s was not approved (%s; approval %s, policy rule %s)", r.Agent, r.Why, why, r.ID, r.Rule)
}
