package bus

import (
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

func TestSplitTarget(t *testing.T) {
	for _, c := range []struct{ target, agent, key string }{
		{"a:k/x", "a", "k/x"}, {"a:", "a", ""}, {"*:main", "", "*:main"}, {"uid=5", "", "uid=5"},
	} {
		if a, k := SplitTarget(c.target); a != c.agent || k != c.key {
			t.Errorf("SplitTarget(%q) = %q, %q; want %q, %q", c.target, a, k, c.agent, c.key)
		}
	}
}

func TestReplayedAndLiveRecordsAgree(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	in := audit.Info{Seq: 7, Time: audit.FormatTime(now), Actor: audit.Actor{Agent: "b"}, Op: proto.OpStateDelete, Target: "a:k", Result: "ok"}
	rec := Replayed(&in, "state.changed")
	live := (&Event{Name: "state.changed", Seq: 7, Time: now, Agent: "a", Key: "k", Op: proto.OpStateDelete, Result: "ok", Deleted: true}).Record()
	if !rec.Replay || live.Replay {
		t.Fatal("only a replayed record says so")
	}
	rec.Replay = false
	if rec != live {
		t.Fatalf("replayed %+v, live %+v", rec, live)
	}
	in.Target, in.Op = "*:x", proto.OpCommit
	if rec = Replayed(&in, "commit.created"); rec.Agent != "b" || rec.Key != "*:x" || rec.Deleted {
		t.Fatalf("a target of no agent is the actor's: %+v", rec)
	}
}
