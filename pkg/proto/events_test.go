package proto

import "testing"

func TestEventsArgsSelect(t *testing.T) {
	a := EventsArgs{Agent: "ops", Types: []string{"state.*", "run.exited"}}
	if err := a.CheckTypes(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, agent string
		want        bool
	}{
		{"state.changed", "ops", true},
		{"run.exited", "ops", true},
		{"run.started", "ops", false},
		{"state.changed", "other", false},
	} {
		if got := a.Selects(c.name, c.agent); got != c.want {
			t.Errorf("%s of %s: %v", c.name, c.agent, got)
		}
	}
	if all := (EventsArgs{}); !all.Selects("anything", "") {
		t.Fatal("the zero value selects every event")
	}
	for _, bad := range [][]string{{""}, {"["}} {
		a := EventsArgs{Types: bad}
		if err := a.CheckTypes(); err == nil || err.Code != EINVAL || err.Message != `event type "`+bad[0]+`" is not a name or a glob` {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
