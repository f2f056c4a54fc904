package proto

import (
	"strings"
	"testing"
)

func TestFleetCallCheck(t *testing.T) {
	a := FleetCallArgs{Node: "n1", Op: OpRunPs}
	if err, refused := a.Check(); err != nil || refused {
		t.Fatal(err, refused)
	}
	a.Op = OpStateSave
	if err, refused := a.Check(); err == nil || !refused || err.Code != EINVAL || !strings.Contains(err.Message, `op "state.save" does not go to other nodes`) {
		t.Fatal(err, refused)
	}
	a.Op, a.Node = OpRunPs, ""
	if err, refused := a.Check(); err == nil || refused || err.Code != EINVAL {
		t.Fatal(err, refused)
	}
	if err := NoFleet(OpFleetStatus); err.Code != ENOTCONN || !strings.HasPrefix(err.Message, "fleet.status: this oxiosd is not in a fleet") {
		t.Fatal(err)
	}
}
