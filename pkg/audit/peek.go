package audit

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/oxios/oxios/pkg/proto"
)

// Info is what a reader filters entries by, taken from a line without a
// full JSON decode.
type Info struct {
	Seq uint64
	// Time is the entry's time as written: fixed width, UTC, so times
	// compare as strings.
	Time   string
	Actor  Actor
	Op     string
	Target string
	Result string
}

// Agent is the agent an entry is about: the target's agent for targets of
// the form "agent:key" or "agent", else the acting agent ("" if none).
func (i *Info) Agent() string {
	if a, _, ok := cutTarget(i.Target); ok {
		return a
	}
	return i.Actor.Agent
}

// cutTarget splits an agent-scoped target "agent:rest" or "agent".
func cutTarget(t string) (agent, rest string, ok bool) {
	if k := strings.IndexByte(t, ':'); k >= 0 {
		agent, rest = t[:k], t[k+1:]
	} else {
		agent = t
	}
	return agent, rest, agent != "" && validAgent(agent)
}

func validAgent(s string) bool {
	return proto.CheckAgent(s) == nil
}

// Peek reads the filter fields of an entry line (as written by this
// package; as returned by Scan). ok is false for a line of another shape.
func Peek(line []byte) (info Info, ok bool) {
	p := peeker{b: line}
	if !p.lit(linePrefix) {
		return info, false
	}
	info.Seq, ok = p.uint()
	if !ok || !p.lit(`,"time":"`) || len(p.b) < len(timeLayout)-5 {
		return info, false
	}
	// "...000000000Z": the layout's zone is written as Z for UTC.
	n := len(timeLayout) - len("Z07:00") + 1
	info.Time, p.b = string(p.b[:n]), p.b[n:]
	if !p.lit(`","actor":{"uid":`) {
		return info, false
	}
	uid, ok := p.uint()
	if !ok {
		return info, false
	}
	info.Actor.UID = uint32(uid)
	if p.lit(`,"pid":`) {
		neg := p.lit("-")
		pid, ok := p.uint()
		if !ok {
			return info, false
		}
		info.Actor.PID = int32(pid)
		if neg {
			info.Actor.PID = -info.Actor.PID
		}
	}
	if p.lit(`,"agent":`) {
		if info.Actor.Agent, ok = p.str(); !ok {
			return info, false
		}
	}
	if p.lit(`,"run":`) {
		if info.Actor.Run, ok = p.str(); !ok {
			return info, false
		}
	}
	if p.lit(`,"node":`) {
		if info.Actor.Node, ok = p.str(); !ok {
			return info, false
		}
	}
	if !p.lit(`},"op":`) {
		return info, false
	}
	if info.Op, ok = p.str(); !ok || !p.lit(`,"target":`) {
		return info, false
	}
	if info.Target, ok = p.str(); !ok || !p.lit(`,"args":`) {
		return info, false
	}
	if _, ok = p.str(); !ok || !p.lit(`,"result":`) {
		return info, false
	}
	if info.Result, ok = p.str(); !ok {
		return info, false
	}
	return info, true
}

type peeker struct{ b []byte }

func (p *peeker) lit(s string) bool {
	if len(p.b) < len(s) || string(p.b[:len(s)]) != s {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

func (p *peeker) uint() (uint64, bool) {
	i := 0
	for i < len(p.b) && p.b[i] >= '0' && p.b[i] <= '9' {
		i++
	}
	v, err := strconv.ParseUint(string(p.b[:i]), 10, 64)
	p.b = p.b[i:]
	return v, err == nil
}

// str reads a JSON string; escapes (rare in targets) go through
// encoding/json.
func (p *peeker) str() (string, bool) {
	if len(p.b) == 0 || p.b[0] != '"' {
		return "", false
	}
	esc := false
	for i := 1; i < len(p.b); i++ {
		switch p.b[i] {
		case '\\':
			esc = true
			i++
		case '"':
			raw := p.b[:i+1]
			p.b = p.b[i+1:]
			if !esc {
				return string(raw[1 : len(raw)-1]), true
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return "", false
			}
			return s, true
		}
	}
	return "", false
}

// LineSeq is the seq of an entry line (0 if it is not one).
func LineSeq(line []byte) uint64 { return parseSeq(line) }
