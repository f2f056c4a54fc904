package llm

import (
	"fmt"
	"testing"
	"time"
)

func TestBreakers(t *testing.T) {
	var h Breakers
	if h.State("http://a") != Closed {
		t.Fatal("an endpoint never asked about is not closed")
	}
	b := h.Get("http://a", time.Minute)
	if h.Get("http://a", time.Hour) != b || b.ProbeLease != time.Minute {
		t.Fatal("the breaker of an endpoint is not kept")
	}
	for i := 0; i < maxBreakers; i++ {
		h.Get(fmt.Sprintf("http://e%d", i), time.Minute)
	}
	if len(h.m) > maxBreakers {
		t.Fatalf("%d breakers kept, at most %d", len(h.m), maxBreakers)
	}
}

func TestBreakersSays(t *testing.T) {
	var h Breakers
	if got := h.Says(""); got != "" {
		t.Fatalf("no endpoint: %q", got)
	}
	if got := h.Says("http://a"); got != Closed.String() {
		t.Fatalf("%q", got)
	}
}
