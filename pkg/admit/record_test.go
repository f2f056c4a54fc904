package admit

import (
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestAgentLimit(t *testing.T) {
	for _, c := range []struct{ max, pol, want int }{{0, 0, 0}, {4, 0, 4}, {0, 2, 2}, {4, 2, 2}, {2, 4, 2}} {
		if got := AgentLimit(c.max, c.pol); got != c.want {
			t.Errorf("AgentLimit(%d, %d) = %d, want %d", c.max, c.pol, got, c.want)
		}
	}
}

func TestResources(t *testing.T) {
	runs := []proto.RunRecord{{CPU: 1.25, RSS: 3 << 20}, {CPU: 0.5, RSS: 2 << 20}}
	rec := Resources(proto.Host{Cores: 2, Load1: 9, MemPressure: -1}, proto.Admission{Running: 2, Queued: 1}, runs, 2, 0)
	if rec.Type != proto.RecordResources || len(rec.Runs) != 2 || rec.Time.IsZero() {
		t.Fatalf("record: %+v", rec)
	}
	if !rec.Host.Overloaded || rec.Host.Why == "" {
		t.Fatalf("a load of 9 on 2 cores past 2 per core is not judged overloaded: %+v", rec.Host)
	}
	if want := "2 running, 1 queued; load 9.00 on 2 cores; runs: 1.8s CPU, 5 MiB RSS"; rec.Text != want {
		t.Fatalf("text %q, want %q", rec.Text, want)
	}
}
