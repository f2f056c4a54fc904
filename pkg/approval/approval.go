// Package approval keeps the requests for an operator's decision that a
// policy's ask rules raise: who wants to do what and why, until someone
// approves or denies it (with a reason) or its time runs out and the
// policy's default decides. The syscall that asked waits in Wait; the
// kernel audits each request and each decision and publishes them.
//
// Requests live in memory, and a Keeper keeps a copy of each pending one
// on disk (OnChange) so that one left pending by a crash is resolved at the
// next start (Restore); Record is a request as the wire has it, FromAsk
// the request of a policy's ask rule, AskTarget and DecideTarget how the
// audit log names its ask and its decision, Stream what approve.list
// shows. Decided requests are kept for listing, the most recent
// MaxDecided of them. A Desk is where the kernel's calls wait: it audits
// each ask, and each decision no operator made, through the kernel's
// group commit (an audit.Recorder), and asks for a budget threshold once.
package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// States of a request.
const (
	Pending  = "pending"
	Approved = "approved"
	Denied   = "denied"
	// Cancelled: the call that asked went away before a decision.
	Cancelled = "cancelled"
)

// MaxDecided is how many decided requests are kept for listing.
const MaxDecided = 1000

// MaxWhat is the most an operator is shown of what a request would do
// (a command line, a URL): a request is shown whole or not at all. One
// whose what is longer is denied at once, by oxiosd, unseen: an operator
// asked to approve a command cut short would approve what follows the
// cut without having seen it.
const MaxWhat = 4096

// MaxPending is how many requests of one agent wait at once. One more is
// denied at once, by oxiosd: a run that could raise requests without end
// (each exec it starts in the background asks) would bury an operator's
// list, and the one request that matters in it.
const MaxPending = 32

// ByDaemon is who decided a request no operator could be shown (see
// MaxWhat) or that came past MaxPending.
const ByDaemon = "oxiosd"

// Errors of Decide.
var (
	ErrNotFound = errors.New("no such approval request")
	ErrDecided  = errors.New("approval request already decided")
)

// Request is one request for a decision.
type Request struct {
	ID     string    `json:"id"`
	Agent  string    `json:"agent"`
	Run    string    `json:"run,omitempty"`
	Op     string    `json:"op"`     // the syscall that asks (exec, state.save ...)
	What   string    `json:"what"`   // what it would do: the command, the key
	Rule   string    `json:"rule"`   // the ask rule (ask.exec ...)
	Why    string    `json:"why"`    // the rule's reason
	Time   time.Time `json:"time"`   // when it was asked
	Expire time.Time `json:"expire"` // when the default decides
	// Default is what a timeout decides: Approved or Denied.
	Default string `json:"default"`
	State   string `json:"state"`
	// DecidedBy is who decided: an operator ("uid=1000 (alice)"), or
	// "timeout" when the default did.
	DecidedBy string    `json:"decided_by,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Decided   time.Time `json:"decided,omitzero"`

	// long is the length of a what longer than MaxWhat (What then holds
	// its start): Ask denies such a request at once.
	long int
}

// Allowed reports whether the request ended approved.
func (r *Request) Allowed() bool { return r.State == Approved }

// Undecided reports whether no operator decided the request: its time
// ran out (the policy's default decided), it was cancelled, or oxiosd
// denied it unseen (see MaxWhat). Nobody's decision then audits its end:
// the kernel records it.
func (r *Request) Undecided() bool {
	return r.DecidedBy == "timeout" || r.DecidedBy == ByDaemon || r.State == Cancelled
}

// Registry holds the requests.
type Registry struct {
	mu      sync.Mutex
	seq     uint64
	reqs    map[string]*entry
	decided []string // ids, oldest first
	// OnChange, if set, is called (without the lock) with each new
	// request and each decision.
	OnChange func(Request)
	now      func() time.Time
}

type entry struct {
	req   Request
	done  chan struct{}
	timer *time.Timer
}

// New returns an empty registry. Ids start after first (ids of an earlier
// daemon, so a restart does not reuse them in the audit log).
func New(first uint64) *Registry {
	return &Registry{seq: first, reqs: map[string]*entry{}, now: time.Now}
}

// Ask registers req (Agent, Run, Op, What, Rule, Why; Default Approved
// or Denied) as pending for timeout and returns it with its id. Call Wait
// to wait for the decision. A request whose what is longer than MaxWhat
// (see FromAsk), or past its agent's MaxPending, is denied at once.
func (g *Registry) Ask(req Request, timeout time.Duration) Request {
	if req.Default != Approved {
		req.Default = Denied
	}
	g.mu.Lock()
	waiting := 0
	for _, e := range g.reqs {
		if e.req.Agent == req.Agent && e.req.State == Pending {
			waiting++
		}
	}
	g.seq++
	req.ID = fmt.Sprintf("a%d", g.seq)
	req.Time = g.now().UTC()
	req.Expire = req.Time.Add(timeout)
	req.State = Pending
	e := &entry{req: req, done: make(chan struct{})}
	g.reqs[req.ID] = e
	e.timer = time.AfterFunc(timeout, func() {
		g.decide(req.ID, req.Default, "timeout", "no decision within "+timeout.String()+"; the policy's ask.default decides")
	})
	g.mu.Unlock()
	g.changed(req)
	switch {
	case req.long > 0:
		g.decide(req.ID, Denied, ByDaemon, fmt.Sprintf("what it would do is %d bytes, more than an operator is shown (%d): denied unseen", req.long, MaxWhat))
	case waiting >= MaxPending:
		g.decide(req.ID, Denied, ByDaemon, fmt.Sprintf("%s has %d requests waiting for an operator already (at most %d): denied without asking", req.Agent, waiting, MaxPending))
	}
	return req
}

func (g *Registry) changed(r Request) {
	if g.OnChange != nil {
		g.OnChange(r)
	}
}

// Wait blocks until request id is decided and returns it. If ctx ends
// first the request is cancelled (and counts as denied).
func (g *Registry) Wait(ctx context.Context, id string) (Request, error) {
	g.mu.Lock()
	e := g.reqs[id]
	g.mu.Unlock()
	if e == nil {
		return Request{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		g.decide(id, Cancelled, "", "the call that asked ended before a decision")
		<-e.done
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return e.req, nil
}

// Decide approves or denies request id on behalf of by, with a reason.
func (g *Registry) Decide(id string, approve bool, by, reason string) (Request, error) {
	state := Denied
	if approve {
		state = Approved
	}
	return g.decide(id, state, by, reason)
}

func (g *Registry) decide(id, state, by, reason string) (Request, error) {
	g.mu.Lock()
	e := g.reqs[id]
	if e == nil {
		g.mu.Unlock()
		return Request{}, fmt.Errorf("%w: %s (ox-approve ls lists them)", ErrNotFound, id)
	}
	if e.req.State != Pending {
		r := e.req
		g.mu.Unlock()
		return r, fmt.Errorf("%w: %s was %s by %s", ErrDecided, id, r.State, r.DecidedBy)
	}
	e.timer.Stop()
	e.req.State, e.req.DecidedBy, e.req.Reason, e.req.Decided = state, by, strings.TrimSpace(reason), g.now().UTC()
	close(e.done)
	g.decided = append(g.decided, id)
	if len(g.decided) > MaxDecided {
		delete(g.reqs, g.decided[0])
		g.decided = g.decided[1:]
	}
	r := e.req
	g.mu.Unlock()
	g.changed(r)
	return r, nil
}

// Get returns request id.
func (g *Registry) Get(id string) (Request, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e := g.reqs[id]; e != nil {
		return e.req, nil
	}
	return Request{}, fmt.Errorf("%w: %s", ErrNotFound, id)
}

// List returns the requests, oldest first: only the pending ones if
// pending, only agent's if agent is set.
func (g *Registry) List(agent string, pending bool) []Request {
	g.mu.Lock()
	var out []Request
	for _, e := range g.reqs {
		if (agent == "" || e.req.Agent == agent) && (!pending || e.req.State == Pending) {
			out = append(out, e.req)
		}
	}
	g.mu.Unlock()
	// Ids are "a" and a number: order by the number.
	slices.SortFunc(out, func(a, b Request) int {
		if c := len(a.ID) - len(b.ID); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// IDs are the ids of the pending requests of the agents visible
// allows.
func (g *Registry) IDs(visible func(agent string) bool) []string {
	var ids []string
	for _, r := range g.List("", true) {
		if visible(r.Agent) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// Restore adds a request decided while no registry held it (one left
// pending by an earlier daemon), for listing; ids given later come after
// its.
func (g *Registry) Restore(r Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n, ok := idSeq(r.ID); ok && n > g.seq {
		g.seq = n
	}
	if g.reqs[r.ID] != nil {
		return
	}
	done := make(chan struct{})
	close(done)
	g.reqs[r.ID] = &entry{req: r, done: done}
	g.decided = append(g.decided, r.ID)
	if len(g.decided) > MaxDecided {
		delete(g.reqs, g.decided[0])
		g.decided = g.decided[1:]
	}
}

// CancelAll cancels every pending request (the daemon stops: the calls
// that wait end).
func (g *Registry) CancelAll(reason string) {
	for _, r := range g.List("", true) {
		g.decide(r.ID, Cancelled, "", reason)
	}
}

func idSeq(id string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "a"), 10, 64)
	return n, err == nil && strings.HasPrefix(id, "a")
}

// Seq is the last id number given.
func (g *Registry) Seq() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seq
}
