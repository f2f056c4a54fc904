package serve

import (
	"testing"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// TestHandlersCoverSyscalls holds the kernel's table and the adapters
// here in step: every op a front end may call (one with a definition)
// is served, through an adapter here exactly when its definition says
// its wire shape is its own, and every adapter serves such an op.
func TestHandlersCoverSyscalls(t *testing.T) {
	served := 0
	for _, sc := range kernel.Syscalls() {
		d := kernel.DefOf(sc.Op)
		_, has := handlers[sc.Op]
		h, ok := Lookup(sc.Op)
		switch {
		case sc.Recorded && (d != nil || has || ok):
			t.Errorf("%s is recorded by the kernel only, yet is defined or served", sc.Op)
		case !sc.Recorded && d == nil:
			t.Errorf("%s is declared callable but has no definition", sc.Op)
		case d != nil && (d.Shape() == "own") != has:
			t.Errorf("%s: its wire shape is %s, and an adapter here: %v", sc.Op, d.Shape(), has)
		case d != nil:
			served++
			if !ok || h.Syscall != sc || h.Serve == nil {
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
