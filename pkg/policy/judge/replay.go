package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
)

// Replay judges the audit entries of agent (lines as ox-audit prints
// them) against p and emits each past action p judges otherwise than
// what happened: an action that was done and would now be refused, one
// a policy refused that would now be allowed, and one that would now
// wait for an operator's approval (an ask rule).
func Replay(ctx context.Context, p *policy.Policy, judge Func, agent string, entries []string, emit func(*proto.PolicyTestRecord) error) (proto.PolicyTestResult, error) {
	var res proto.PolicyTestResult
	for i, line := range entries {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var e struct {
			Type   string `json:"type"`
			Seq    uint64 `json:"seq"`
			Op     string `json:"op"`
			Target string `json:"target"`
			Result string `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return res, proto.Errorf(proto.EINVAL, "line %d is not a JSON record as ox-audit prints them", i+1)
		}
		if e.Type != "audit" {
			res.Skipped++ // a checkpoint or a head: not an action
			continue
		}
		who, rest, ok := strings.Cut(e.Target, ":")
		if !ok || who != agent {
			res.Skipped++
			continue
		}
		// A refusal by a policy names its rule at the end of the target.
		byPolicy := false
		if e.Result == proto.EPERM && strings.HasSuffix(rest, "]") {
			if i := strings.LastIndex(rest, " ["); i >= 0 {
				rest, byPolicy = rest[:i], true
			}
		}
		if e.Result != "ok" && !byPolicy {
			res.Skipped++
			continue
		}
		d, judged := Entry(p, judge, agent, e.Op, rest)
		if !judged {
			res.Skipped++
			continue
		}
		res.Judged++
		rec := proto.PolicyTestRecord{Type: proto.RecordPolicyTest, Agent: agent, Seq: e.Seq, Op: e.Op, Target: e.Target, Was: e.Result}
		switch {
		case Asks(d):
			res.Asked++
			rec.Change, rec.Rule, rec.Reason = "ask", d.Rule, d.Reason
			rec.Text = fmt.Sprintf("#%d %s %s: would wait for an operator's approval (%s): %s", e.Seq, e.Op, e.Target, d.Rule, d.Reason)
		case e.Result == "ok" && d != nil:
			res.Refused++
			rec.Change, rec.Rule, rec.Reason = "refuse", d.Rule, d.Reason
			rec.Text = fmt.Sprintf("#%d %s %s: done then, refused now by %s: %s", e.Seq, e.Op, e.Target, d.Rule, d.Reason)
		case byPolicy && d == nil:
			res.Allowed++
			rec.Change = "allow"
			rec.Text = fmt.Sprintf("#%d %s %s: refused then, allowed now", e.Seq, e.Op, e.Target)
		default:
			continue
		}
		if err := emit(&rec); err != nil {
			return res, err
		}
	}
	return res, nil
}

// Entry judges one audited action (op and what its target says after
// "agent:"); judged is false for ops a policy does not decide.
func Entry(p *policy.Policy, judge Func, agent, op, what string) (*policy.Denied, bool) {
	var args []string
	switch op {
	case proto.OpStateSave, proto.OpStateDelete, proto.OpStateLoad, proto.OpStateList:
		args = []string{what}
	case proto.OpMemRemember, proto.OpMemForget:
		kind, _, _ := strings.Cut(what, "/")
		args = []string{kind}
	case proto.OpExec:
		cmd, ok := strings.CutPrefix(what, "exec ")
		if !ok {
			return nil, false
		}
		cmd, _, _ = strings.Cut(cmd, " => ")
		argv, ok := unquote(cmd)
		if !ok || len(argv) == 0 {
			return nil, false
		}
		args = argv
	case proto.OpLLMChat:
		// "MODEL 100+10 tokens, ...", "MODEL [llm.models]", "MODEL Class".
		f := strings.Fields(what)
		if len(f) == 0 {
			return nil, false
		}
		args = f[:1]
	case "tool.run", "net.fetch":
		_, rest, ok := strings.Cut(what, " ")
		if !ok {
			return nil, false
		}
		rest, _, _ = strings.Cut(rest, " => ")
		args = []string{strings.Fields(rest + " x")[0]}
	default:
		return nil, false
	}
	if op == proto.OpExec {
		// Judged as the argv it ran, even one word, not as a line.
		args = append([]string{"--"}, args...)
	}
	d, err := judge(p, agent, op, args)
	if err != nil {
		return nil, false
	}
	return d, true
}

// unquote splits a command rendered by policy.Quote back into words.
func unquote(s string) ([]string, bool) {
	var out []string
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return out, true
		}
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, false
			}
			w, _ := strconv.Unquote(q)
			out = append(out, w)
			s = s[len(q):]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, w)
		s = rest
	}
}
