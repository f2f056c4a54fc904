package agenttree

import (
	"testing"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/state"
)

func TestChanged(t *testing.T) {
	ok := func(target string) *audit.Entry { return &audit.Entry{Target: target, Result: "ok"} }
	for _, tc := range []struct {
		fn   func(*audit.Entry) string
		e    *audit.Entry
		want string
	}{
		{ChangedKey(state.SpaceState), ok("ops:notes/a.md"), "agents/ops/state/notes/a.md"},
		{ChangedKey(state.SpaceMem), ok("ops:fact/1.md"), "agents/ops/mem/fact/1.md"},
		{ChangedKey(state.SpaceState), &audit.Entry{Target: "ops:k", Result: proto.EPERM}, ""},
		{ChangedKey(state.SpaceState), ok("ops"), ""},
		{ChangedFile(Budget), ok("ops:r1 exit 0"), "agents/ops/sys/" + Budget},
		{ChangedFile(Policy), ok("ops"), "agents/ops/sys/" + Policy},
		{RemovedFile, ok("ops:sys/" + Budget), "agents/ops/sys/" + Budget},
		{RemovedFile, ok("ops:"), ""},
		{RemovedFile, ok("ops:notes"), ""},
		{ChangedJob, ok("ops:nightly run r1"), "agents/ops/sys/schedules/nightly.json"},
		{ChangedJob, ok("ops"), ""},
	} {
		if got := tc.fn(tc.e); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.e.Target, got, tc.want)
		}
	}
}
