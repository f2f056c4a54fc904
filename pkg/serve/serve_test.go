package serve

import (
	"testing"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// TestHandlersCoverSyscalls holds the two lists equal: every op of the
// kernel's table that a front end may call has its adapter here, and
// every adapter serves a declared op that is not the kernel's own record.
func TestHandlersCoverSyscalls(t *testing.T) {
	served := 0
	for _, sc := range kernel.Syscalls() {
		_, has := handlers[sc.Op]
		switch {
		case sc.Recorded && has:
			t.Errorf("%s is recorded by the kernel only, yet has an adapter", sc.Op)
		case !sc.Recorded && !has:
			t.Errorf("%s is declared callable but has no adapter: add it to handlers", sc.Op)
		case has:
			served++
			if h, ok := Lookup(sc.Op); !ok || h.Syscall != sc || h.Serve == nil {
				t.Errorf("Lookup(%s) = %+v, %v", sc.Op, h, ok)
			}
		}
	}
	for op := range handlers {
		if kernel.Lookup(op) == nil {
			t.Errorf("adapter for %s, which the kernel does not declare", op)
		}
	}
	if served < 50 {
		t.Fatalf("only %d ops served: the table is broken", served)
	}
	for _, op := range []string{proto.OpRunExit, proto.OpScheduleFire, "no.such.op"} {
		if _, ok := Lookup(op); ok {
			t.Errorf("Lookup found %s, which no front end may call", op)
		}
	}
}

// A fleet peer may carry only the ops proto.FleetCallable names.
func TestFleetRefusesOpsItMayNotCarry(t *testing.T) {
	for _, op := range []string{proto.OpPolicySet, proto.OpRunExit, "no.such.op"} {
		if proto.FleetCallable[op] {
			t.Fatalf("%s is fleet-callable: pick another op for this test", op)
		}
		_, err := Fleet{}.ServeFleet(t.Context(), &kernel.Cred{}, op, nil, nil)
		if perr, ok := err.(*proto.Error); !ok || perr.Code != proto.EINVAL {
			t.Errorf("fleet call of %s: %v, want EINVAL", op, err)
		}
	}
}
