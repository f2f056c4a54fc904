package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// Ask lists what an agent may do only once an operator says yes: a third
// decision beside allow and deny. A call that matches waits for the
// decision (ox-approve); what a wait past Timeout decides is Default.
// Ask rules take precedence over the allow lists (a program both on
// exec.allow and ask.exec asks) and grant what they name once approved
// (a program only on ask.exec runs when approved). Refusals the allow
// lists make for other reasons (shell metacharacters, quotas) stay
// refusals: asking never widens those.
type Ask struct {
	// Exec: programs (names or absolute paths, as exec.allow).
	Exec []string `toml:"exec"`
	// State: key globs whose writes and deletes ask.
	State []string `toml:"state"`
	// Tools: WASM tools that ask.
	Tools []string `toml:"tools"`
	// Net: hosts (as net.allow) whose fetches ask.
	Net []string `toml:"net"`
	// Tokens and Cost: once the agent has spent this much (budget used),
	// each further budgeted call asks; 0 = never.
	Tokens int64   `toml:"tokens"`
	Cost   float64 `toml:"cost"`
	// Timeout is how long a request waits for a decision (default 5m).
	Timeout Duration `toml:"timeout"`
	// Default is what a timed-out request becomes: "deny" (the default)
	// or "allow".
	Default string `toml:"default"`

	hosts []hostRule
}

// Msg says who an agent may send messages to and whom it accepts them
// from: agent-name globs (path.Match: "*", "review-?"). A message needs
// both: the sender's send and the recipient's accept. The admin (an
// operator's shell) may always send.
type Msg struct {
	Send   []string `toml:"send"`
	Accept []string `toml:"accept"`
	// Quota is the most bytes the agent's inbox holds, received messages
	// and not (see pkg/inbox); 0: DefaultInboxQuota.
	Quota config.Size `toml:"quota"`
}

// DefaultInboxQuota is an inbox's quota when the policy gives none. There
// is no unlimited inbox: the daemon holds each inbox in memory.
const DefaultInboxQuota = 64 << 20

// InboxQuota is the most bytes p's agent's inbox holds.
func (p *Policy) InboxQuota() int64 {
	if p.Msg.Quota > 0 {
		return int64(p.Msg.Quota)
	}
	return DefaultInboxQuota
}

// Decisions of a request that timed out (Ask.Default).
const (
	AskDeny  = "deny"
	AskAllow = "allow"
)

// DefaultAskTimeout is how long a request waits when the policy does not
// say.
const DefaultAskTimeout = 5 * time.Minute

// Asked is the answer "ask an operator first": the rule that asks and
// what the request is about. It is an error so that a caller that cannot
// wait refuses, as for a *Denied.
type Asked struct {
	Rule   string
	Reason string
}

func (a *Asked) Error() string { return a.Reason + " needs approval (policy rule " + a.Rule + ")" }

// AskTimeout is how long a request of this policy waits.
func (p *Policy) AskTimeout() time.Duration {
	if d := p.Ask.Timeout.D(); d > 0 {
		return d
	}
	return DefaultAskTimeout
}

// AskAllows reports whether a timed-out request is allowed.
func (p *Policy) AskAllows() bool { return p.Ask.Default == AskAllow }

func (p *Policy) parseAsk(b []byte) error {
	for _, a := range p.Ask.Exec {
		if a == "" || strings.ContainsAny(a, " \t\n") || (strings.Contains(a, "/") && !strings.HasPrefix(a, "/")) {
			return &Error{Line: lineOf(b, "exec"), Reason: fmt.Sprintf("ask.exec: %q is not a command name or an absolute path", a)}
		}
	}
	for _, pat := range p.Ask.State {
		if err := CheckPattern(pat); err != nil {
			return &Error{Line: lineOf(b, "state"), Reason: fmt.Sprintf("ask.state: %v", err)}
		}
	}
	for _, t := range p.Ask.Tools {
		if t == "" || strings.ContainsAny(t, "/ \t\n") {
			return &Error{Line: lineOf(b, "tools"), Reason: fmt.Sprintf("ask.tools: %q is not a tool name", t)}
		}
	}
	p.Ask.hosts = p.Ask.hosts[:0]
	for _, h := range p.Ask.Net {
		r, err := parseHost(h)
		if err != nil {
			return &Error{Line: lineOf(b, "net"), Reason: "ask.net: " + err.Error()}
		}
		p.Ask.hosts = append(p.Ask.hosts, r)
	}
	if p.Ask.Tokens < 0 || p.Ask.Cost < 0 {
		return &Error{Line: lineOf(b, "tokens", "cost"), Reason: "ask.tokens and ask.cost may not be negative"}
	}
	switch p.Ask.Default {
	case "":
		p.Ask.Default = AskDeny
	case AskDeny, AskAllow:
	default:
		return &Error{Line: lineOf(b, "default"), Reason: fmt.Sprintf("ask.default: %q: want \"deny\" or \"allow\"", p.Ask.Default)}
	}
	if p.Msg.Quota < 0 {
		return &Error{Line: lineOf(b, "quota"), Reason: "msg.quota may not be negative"}
	}
	for _, list := range []struct {
		name string
		pats []string
	}{{"msg.send", p.Msg.Send}, {"msg.accept", p.Msg.Accept}} {
		for _, pat := range list.pats {
			if _, err := path.Match(pat, ""); err != nil || pat == "" || strings.Contains(pat, "/") {
				return &Error{Line: lineOf(b, list.name[len("msg."):]), Reason: fmt.Sprintf("%s: %q is not an agent-name glob", list.name, pat)}
			}
		}
	}
	return nil
}

// askExec is the rule that asks before argv[0] runs, if any.
func (p *Policy) askExec(prog string) bool { return slices.Contains(p.Ask.Exec, prog) }

// CheckStateAsk: does a write or delete of key need approval? Call it
// once CheckStateWrite allowed the write.
func (p *Policy) CheckStateAsk(key string) error {
	if matchAny(p.Ask.State, key) {
		return &Asked{Rule: "ask.state", Reason: fmt.Sprintf("a write of key %q", key)}
	}
	return nil
}

// CheckToolAsk: does tool name need approval? A tool on ask.tools needs
// no place on tools.allow.
func (p *Policy) CheckToolAsk(name string) error {
	if slices.Contains(p.Ask.Tools, name) {
		return &Asked{Rule: "ask.tools", Reason: fmt.Sprintf("tool %q", name)}
	}
	return nil
}

// CheckHostAsk: does a fetch from host need approval? A host on ask.net
// needs no place on net.allow (its addresses are still checked as those
// of net.allow are).
func (p *Policy) CheckHostAsk(host string) error {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range p.Ask.hosts {
		if r.name != "" && (r.name == h || r.suffix && strings.HasSuffix(h, r.name)) {
			return &Asked{Rule: "ask.net", Reason: fmt.Sprintf("a fetch from host %q", host)}
		}
	}
	return nil
}

// CheckBudgetAsk: having spent tokens and cost, does a further budgeted
// call need approval?
func (p *Policy) CheckBudgetAsk(tokens int64, cost float64) error {
	switch {
	case p.Ask.Tokens > 0 && tokens >= p.Ask.Tokens:
		return &Asked{Rule: "ask.tokens", Reason: fmt.Sprintf("spending past %d tokens (used %d)", p.Ask.Tokens, tokens)}
	case p.Ask.Cost > 0 && cost >= p.Ask.Cost:
		return &Asked{Rule: "ask.cost", Reason: fmt.Sprintf("spending past a cost of %g (used %g)", p.Ask.Cost, cost)}
	}
	return nil
}

// CheckSend: may this policy's agent send to agent to?
func (p *Policy) CheckSend(to string) error {
	for _, pat := range p.Msg.Send {
		if ok, _ := path.Match(pat, to); ok {
			return nil
		}
	}
	return &Denied{Rule: "msg.send", Reason: fmt.Sprintf("sending to agent %q is not on the policy's msg.send list", to)}
}

// CheckAccept: does this policy's agent accept messages from agent from
// ("" for an operator, always accepted)?
func (p *Policy) CheckAccept(from string) error {
	if from == "" {
		return nil
	}
	for _, pat := range p.Msg.Accept {
		if ok, _ := path.Match(pat, from); ok {
			return nil
		}
	}
	return &Denied{Rule: "msg.accept", Reason: fmt.Sprintf("messages from agent %q are not on the recipient's msg.accept list", from)}
}

// CheckMessage: may agent from send to agent to? The sender's policy
// says first (msg.send), then the recipient's (msg.accept), each read
// with policyOf when it is needed. A refusal is EPERM naming the agent
// whose policy refused, with the rule that did; an error of policyOf is
// returned as it is, with no rule.
func CheckMessage(from, to string, policyOf func(agent string) (*Policy, error)) (rule string, err error) {
	sp, err := policyOf(from)
	if err != nil {
		return "", err
	}
	if d := AsDenied(sp.CheckSend(to)); d != nil {
		return d.Rule, proto.Errorf(proto.EPERM, "%s: %v", from, d)
	}
	rp, err := policyOf(to)
	if err != nil {
		return "", err
	}
	if d := AsDenied(rp.CheckAccept(from)); d != nil {
		return d.Rule, proto.Errorf(proto.EPERM, "%s: %v", to, d)
	}
	return "", nil
}

// asksFor returns the program of argv that ask.exec names: argv[0], or
// the command env runs.
func (p *Policy) asksFor(argv []string) string {
	if p.askExec(argv[0]) {
		return argv[0]
	}
	if path.Base(argv[0]) == "env" {
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") {
				if p.askExec(a) {
					return a
				}
				break
			}
		}
	}
	return ""
}

// Granting returns a copy of p in which what the ask rules name is
// allowed without asking: the policy a call runs under once an operator
// approved it (a fetch's redirects and connections are checked again
// under it).
func (p *Policy) Granting() *Policy {
	c := *p
	c.Exec.Allow = append(slices.Clone(p.Exec.Allow), p.Ask.Exec...)
	c.State.Write = append(slices.Clone(p.State.Write), p.Ask.State...)
	c.Tools.Allow = append(slices.Clone(p.Tools.Allow), p.Ask.Tools...)
	c.Net.Allow = append(slices.Clone(p.Net.Allow), p.Ask.Net...)
	c.Ask = Ask{Timeout: p.Ask.Timeout, Default: p.Ask.Default, Tokens: p.Ask.Tokens, Cost: p.Ask.Cost}
	c.hosts = nil
	c.compile()
	return &c
}

// AsAsked returns err as an *Asked, or nil.
func AsAsked(err error) *Asked {
	var a *Asked
	if errors.As(err, &a) {
		return a
	}
	return nil
}
