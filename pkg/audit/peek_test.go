package audit

import (
	"encoding/json"
	"testing"
	"time"
)

func checkPeek(t *testing.T, e *Entry) {
	t.Helper()
	var prev [32]byte
	line := appendBody(nil, e, &prev)
	line = append(line, hashKey...)
	line = append(line, zeroHex...)
	line = append(line, '"', '}')
	var want Entry
	if err := json.Unmarshal(line, &want); err != nil {
		t.Fatalf("line is not JSON: %v\n%s", err, line)
	}
	got, ok := Peek(line)
	if !ok {
		t.Fatalf("Peek refused %s", line)
	}
	if got.Seq != want.Seq || got.Actor != want.Actor || got.Op != want.Op || got.Target != want.Target || got.Result != want.Result {
		t.Fatalf("Peek = %+v, want %+v", got, want)
	}
	if tm, err := time.Parse(time.RFC3339Nano, got.Time); err != nil || !tm.Equal(want.Time) {
		t.Fatalf("Peek time %q, want %v (%v)", got.Time, want.Time, err)
	}
}

func TestPeekMatchesJSON(t *testing.T) {
	when := time.Date(2026, 11, 22, 10, 0, 0, 5, time.UTC)
	for _, e := range []*Entry{
		{Seq: 1, Time: when, Op: "state.save", Target: "ops:notes/a.md", Result: "ok"},
		{Seq: 99, Time: when, Actor: Actor{UID: 1000, PID: -1, Agent: "ops", Run: "r-1"}, Op: "connect", Target: "uid=7", Result: "EACCES"},
		{Seq: 1 << 40, Time: when, Actor: Actor{PID: 42}, Op: `we"ird\op`, Target: "ops:\"q\"\u00e9\u2028\x01", Result: "ok"},
		{Seq: 3, Time: when, Actor: Actor{Agent: `a"},"op":"x`}, Op: "", Target: "", Result: ""},
	} {
		checkPeek(t, e)
	}
}

func FuzzPeek(f *testing.F) {
	f.Add("ops", "state.save", "ops:a/b", "ok", int32(5))
	f.Add(`"`, `\`, "\x00", "\u2028", int32(-9))
	f.Fuzz(func(t *testing.T, agent, op, target, result string, pid int32) {
		checkPeek(t, &Entry{Seq: 7, Time: time.Unix(1, 0).UTC(), Actor: Actor{UID: 3, PID: pid, Agent: agent}, Op: op, Target: target, Result: result})
	})
}

func TestInfoAgent(t *testing.T) {
	for _, c := range []struct{ target, actor, want string }{
		{"ops:notes/a", "", "ops"},
		{"ops", "dev", "ops"},
		{"uid=7", "", ""},
		{"", "dev", "dev"},
	} {
		i := Info{Target: c.target, Actor: Actor{Agent: c.actor}}
		if got := i.Agent(); got != c.want {
			t.Errorf("Agent of target %q actor %q = %q, want %q", c.target, c.actor, got, c.want)
		}
	}
}
