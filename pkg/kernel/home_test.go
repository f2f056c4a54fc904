package kernel

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
)

// TestHomeCharge: a home takes a charge only for a run it placed, from
// the node it placed it on, and once: a charge sent again, even after the
// home restarted, is answered as applied before and not counted; one
// from another node, or for a run never placed, is refused and audited.
func TestHomeCharge(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	k := queueKernel(t, data)
	ctx := context.Background()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "lim", Key: "k", Value: "v"}, nil); err != nil {
		t.Fatal(err)
	}
	e := &audit.Entry{Actor: admin.Actor(), Op: proto.OpBudgetSet, Target: "lim:budget.json run rplaced234 [placed on b]"}
	if err := k.budgets.Place(ctx, "lim", "b", "rplaced234", e); err != nil {
		t.Fatal(err)
	}
	charge := proto.HomeCharge{Agent: "lim", Run: "rplaced234", Used: proto.Budget{Wall: 2, Execs: 3}}
	wall := func(k *Kernel) float64 {
		p, err := k.policyOf("lim")
		if err != nil {
			t.Fatal(err)
		}
		_, _, used := k.budgets.Limits("lim", p)
		return used.Wall
	}
	if got, err := k.HomeCharge(ctx, "c", charge); code(err) != proto.EPERM || got.Already {
		t.Fatalf("a charge from c of a run placed on b: %+v %v", got, err)
	}
	other := charge
	other.Run = "rnotplaced"
	if _, err := k.HomeCharge(ctx, "b", other); code(err) != proto.EPERM {
		t.Fatalf("a charge of a run never placed: %v", err)
	}
	if got, err := k.HomeCharge(ctx, "b", charge); err != nil || got.Already {
		t.Fatalf("the charge from b: %+v %v", got, err)
	}
	if w := wall(k); w != 2 {
		t.Fatalf("wall used after the charge: %v, want 2", w)
	}
	if got, err := k.HomeCharge(ctx, "b", charge); err != nil || !got.Already {
		t.Fatalf("the charge sent again: %+v %v", got, err)
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	// The home restarted: the charge sent again is still the one it had.
	k = queueKernel(t, data)
	defer k.Close()
	if got, err := k.HomeCharge(ctx, "b", charge); err != nil || !got.Already {
		t.Fatalf("the charge sent again after a restart: %+v %v", got, err)
	}
	if w := wall(k); w != 2 {
		t.Fatalf("wall used after the charge sent again: %v, want 2", w)
	}
	var ok, refused int
	k.audit.Scan(1, func(e *audit.Entry, _ []byte) error {
		if e.Op != proto.OpBudgetCharge {
			return nil
		}
		switch {
		case e.Result == "ok" && e.Actor.Node == "b" && strings.Contains(e.Target, "rplaced234"):
			ok++
		case e.Result == proto.EPERM:
			refused++
		}
		return nil
	})
	if ok != 1 || refused != 2 {
		t.Fatalf("audit: %d charges (want 1), %d refusals (want 2)", ok, refused)
	}
}
