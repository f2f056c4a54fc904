package audit

import (
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

func TestFilter(t *testing.T) {
	in := func(op, target, actor, tm string) *Info {
		return &Info{Op: op, Target: target, Actor: Actor{Agent: actor}, Time: tm}
	}
	m, err := Filter(&proto.AuditLogArgs{Agent: "ops", Op: "state.*", SinceTime: "2026-11-25T03:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   *Info
		want bool
	}{
		{in("state.save", "ops:k", "", "2026-11-25T03:00:00.000000000Z"), true},
		{in("state.save", "web:k", "ops", "2026-11-25T04:00:00.000000000Z"), true}, // by ops
		{in("state.save", "web:k", "", "2026-11-25T04:00:00.000000000Z"), false},
		{in("mem.remember", "ops:k", "", "2026-11-25T04:00:00.000000000Z"), false},
		{in("state.save", "ops:k", "", "2026-11-25T02:59:59.999999999Z"), false},
	} {
		if got := m(c.in); got != c.want {
			t.Errorf("%+v: %v, want %v", c.in, got, c.want)
		}
	}
	for _, bad := range []proto.AuditLogArgs{{Agent: "../x"}, {Op: "["}, {SinceTime: "yesterday"}, {N: -1}} {
		if _, err := Filter(&bad); err == nil || (err.Code != proto.EINVAL && bad.Agent == "") {
			t.Errorf("%+v: %v, want EINVAL", bad, err)
		}
	}
}
