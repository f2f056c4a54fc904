package llm

import (
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func TestGate(t *testing.T) {
	var h Breakers
	now := time.Now()
	ask := proto.LLMGateArgs{Endpoint: "http://m"}
	rec, err := h.Gate(ask, time.Minute, false, now)
	if err != nil || rec.Type != proto.RecordLLMGate || rec.State != "closed" || rec.Wait != 0 || rec.Text != "http://m: circuit closed" {
		t.Fatalf("%+v %v", rec, err)
	}
	failed := proto.LLMGateArgs{Endpoint: "http://m", Outcome: "failed"}
	if _, err := h.Gate(failed, time.Minute, false, now); err == nil || err.Code != proto.EPERM {
		t.Fatalf("a report by a caller that may not make one: %v", err)
	}
	var changed string
	for i := 0; i < 3; i++ {
		rec, err := h.Gate(failed, time.Minute, true, now)
		if err != nil {
			t.Fatal(err)
		}
		changed += rec.Changed
	}
	if changed != "open" {
		t.Fatalf("three failures changed the breaker to %q", changed)
	}
	rec, err = h.Gate(ask, time.Minute, false, now)
	if err != nil || rec.State != "open" || rec.Wait <= 0 || !strings.Contains(rec.Text, ", next call in ") {
		t.Fatalf("open: %+v %v", rec, err)
	}
	for _, bad := range []proto.LLMGateArgs{{}, {Endpoint: strings.Repeat("x", 2049)}, {Endpoint: "http://m", Outcome: "maybe"}} {
		if _, err := h.Gate(bad, time.Minute, true, now); err == nil || err.Code != proto.EINVAL {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func TestLease(t *testing.T) {
	for in, want := range map[string]time.Duration{"": DefaultLease, "5m": 5 * time.Minute, "bad": DefaultLease, "-1s": DefaultLease, "0s": DefaultLease} {
		if got := Lease(in); got != want {
			t.Errorf("Lease(%q) = %v, want %v", in, got, want)
		}
	}
}
