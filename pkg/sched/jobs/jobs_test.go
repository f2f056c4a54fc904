package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched"
	"github.com/oxios/oxios/pkg/state"
)

func code(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func TestNewChecksTheArgs(t *testing.T) {
	ok := func([]string) error { return nil }
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	for _, c := range []struct {
		name string
		a    proto.ScheduleAddArgs
		code string
	}{
		{"no name", proto.ScheduleAddArgs{Agent: "a", Schedule: "@daily", Task: "x"}, proto.EINVAL},
		{"bad overlap", proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: "@daily", Task: "x", Overlap: "often"}, proto.EINVAL},
		{"bad schedule", proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: "61 * * * *", Task: "x"}, proto.EINVAL},
		{"message with tz", proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: "@message", TZ: "UTC", Task: "x"}, proto.EINVAL},
		{"nothing to run", proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: "@daily"}, proto.EINVAL},
		{"both", proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: "@daily", Task: "x", Command: []string{"true"}}, proto.EINVAL},
	} {
		if _, err := New(c.a, 0, now, ok); code(err) != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	refuse := func([]string) error { return proto.Errorf(proto.ENOEXEC, "no") }
	if _, err := New(proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: "@daily", Task: "x"}, 0, now, refuse); code(err) != proto.ENOEXEC {
		t.Errorf("runnable's refusal: got %v", err)
	}
	j, err := New(proto.ScheduleAddArgs{Name: "j", Agent: "a", Schedule: " @daily ", Task: "x"}, 7, now, ok)
	if err != nil {
		t.Fatal(err)
	}
	if j.Overlap != "skip" || j.CreatedBy != 7 || !j.Created.Equal(now.Truncate(time.Second)) || j.OnMsg() {
		t.Errorf("job: %+v", j)
	}
	ch := j.Change()
	if ch.Space != state.SpaceSys || ch.Key != "schedules/j.json" || ch.Agent != "a" || !strings.HasSuffix(string(ch.Value), "}\n") {
		t.Errorf("change: %+v", ch)
	}
	var back File
	if err := json.Unmarshal(ch.Value, &back); err != nil || back.Name != "j" {
		t.Errorf("file does not read back: %v %+v", err, back)
	}
}

func TestCheckNameSaysJob(t *testing.T) {
	err := CheckName("no/slash")
	if err == nil || !strings.Contains(err.Message, "job name") {
		t.Errorf("got %v", err)
	}
}

func TestForkCopyIsDisabledAndRenamed(t *testing.T) {
	now := time.Now().UTC()
	j := &File{proto.Job{Name: "daily", Agent: "a", Schedule: "@daily", Overlap: "skip", LastDue: &now, LastFired: &now, LastRun: "r1", LastMsg: "m1"}}
	val, _ := json.Marshal(j)
	c := ForkCopy(val, "b", func(string) bool { return false })
	if c == nil || c.Name != "b.daily" || c.Agent != "b" || !c.Disabled || c.LastDue != nil || c.LastFired != nil || c.LastRun != "" || c.LastMsg != "" || c.Schedule != "@daily" {
		t.Fatalf("%+v", c)
	}
	if c := ForkCopy(val, "b", func(name string) bool { return name == "b.daily" }); c != nil {
		t.Fatalf("a taken name: %+v", c)
	}
	if c := ForkCopy([]byte("{"), "b", func(string) bool { return false }); c != nil {
		t.Fatalf("unreadable: %+v", c)
	}
	if c := ForkCopy(val, strings.Repeat("x", 200), func(string) bool { return false }); c != nil {
		t.Fatalf("too long: %+v", c)
	}
}

// store is a Store of job files in memory: by ref, by key.
type store map[string]map[string][]byte

func (s store) Agents() []string {
	var out []string
	for ref := range s {
		if _, a := state.SplitRef(ref); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (s store) List(ref, prefix string) ([]proto.StateRecord, error) {
	var out []proto.StateRecord
	for k := range s[ref] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, proto.StateRecord{Key: k})
		}
	}
	return out, nil
}

func (s store) Load(ref, key string) ([]byte, proto.StateRecord, error) {
	b, ok := s[ref][key]
	if !ok {
		return nil, proto.StateRecord{}, proto.Errorf(proto.ENOENT, "no %s", key)
	}
	return b, proto.StateRecord{Key: key}, nil
}

func TestStartLoadsTheStoresJobs(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ok := func([]string) error { return nil }
	j, err := New(proto.ScheduleAddArgs{Name: "tick", Agent: "a", Schedule: "@daily", Task: "x"}, 0, now, ok)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(proto.ScheduleAddArgs{Name: "other", Agent: "b", Schedule: "@daily", Task: "x"}, 0, now, ok)
	if err != nil {
		t.Fatal(err)
	}
	st := store{
		state.Ref(state.SpaceSys, "a"): {j.Change().Key: j.Change().Value, "budget.json": []byte("{}")},
		// A file that names another job than its path is not loaded.
		state.Ref(state.SpaceSys, "b"): {Key("wrong"): other.Change().Value},
	}
	tab := NewTable(Hooks{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	m := ByName{}
	err = tab.Start(sched.NewManualClock(now), m, st)
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Stop()
	if m.Len() != 1 || m.Get("tick") == nil || m.Get("tick").Agent != "a" || m.Get("wrong") != nil {
		t.Fatalf("loaded %v", m)
	}
	n := 0
	m.Each(func(*File) { n++ })
	m.Delete("tick")
	if n != 1 || m.Len() != 0 {
		t.Fatal(n, m.Len())
	}
}

func TestMsgArrivedFiresOnlyWhenRunning(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j, err := New(proto.ScheduleAddArgs{Name: "inbox", Agent: "m", Schedule: proto.ScheduleMessage, Task: "x"}, 0, now, func([]string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 4)
	tab := NewTable(Hooks{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), MsgIDs: func(agent, after string) []string {
		asked <- agent
		return nil
	}})
	tab.MsgArrived("m")
	select {
	case a := <-asked:
		t.Fatalf("a table not started looked at %s's messages", a)
	case <-time.After(20 * time.Millisecond):
	}
	err = tab.Start(sched.NewManualClock(now), ByName{}, store{state.Ref(state.SpaceSys, "m"): {j.Change().Key: j.Change().Value}})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.Stop()
	<-asked // the catch-up at start
	tab.MsgArrived("m")
	select {
	case a := <-asked:
		if a != "m" {
			t.Fatal(a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message did not fire the message job")
	}
}

// A fork's copies join the table once it started, but one whose name is
// taken; Taken sees them.
func TestAdopt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j, err := New(proto.ScheduleAddArgs{Name: "tick", Agent: "a", Schedule: "@daily", Task: "x"}, 0, now, func([]string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	tab := NewTable(Hooks{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	h := tab.Lock()
	cp := ForkCopy(mustJSON(t, j), "b", h.Taken)
	h.Adopt([]*File{cp})
	if h.Taken(cp.Name) {
		t.Fatal("a table not started adopted a copy")
	}
	h.Unlock()
	m := ByName{}
	if err := tab.Start(sched.NewManualClock(now), m, store{state.Ref(state.SpaceSys, "a"): {j.Change().Key: j.Change().Value}}); err != nil {
		t.Fatal(err)
	}
	defer tab.Stop()
	h = tab.Lock()
	defer h.Unlock()
	if !h.Taken("tick") || h.Taken(cp.Name) {
		t.Fatalf("taken: tick %v, %s %v", h.Taken("tick"), cp.Name, h.Taken(cp.Name))
	}
	other := *cp
	other.Task = "y"
	h.Adopt([]*File{cp, &other})
	if !h.Taken(cp.Name) || m.Get(cp.Name) != cp || !m.Get(cp.Name).Disabled {
		t.Fatalf("adopted %+v", m.Get(cp.Name))
	}
}

func mustJSON(t *testing.T, j *File) []byte {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An agent has at most MaxPerAgent jobs: one more is refused (EDQUOT),
// nothing committed; another agent's jobs are not counted.
func TestMaxPerAgent(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	commits := 0
	tab := NewTable(Hooks{Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Commit: func(ctx context.Context, ch *state.Change, e *audit.Entry, key string, data any) error {
			commits++
			return nil
		}})
	if err := tab.Start(sched.NewManualClock(now), ByName{}, store{}); err != nil {
		t.Fatal(err)
	}
	defer tab.Stop()
	add := func(agent string, i int) error {
		j, err := New(proto.ScheduleAddArgs{Name: fmt.Sprintf("%s-%d", agent, i), Agent: agent, Schedule: "@daily", Task: "x"}, 0, now, func([]string) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		_, err = tab.Add(context.Background(), audit.Actor{}, j, nil)
		return err
	}
	for i := range MaxPerAgent {
		if err := add("a", i); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if err := add("a", MaxPerAgent); proto.AsError(err).Code != proto.EDQUOT || commits != MaxPerAgent {
		t.Fatalf("one past the most: %v (%d commits)", err, commits)
	}
	if err := add("b", 0); err != nil {
		t.Fatalf("another agent: %v", err)
	}
}

// TestFileIsTheRecord: a job's file is written as it was before its
// fields moved to proto.Job (the same keys, in the same order), and its
// record shows every one of them.
func TestFileIsTheRecord(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	j := &File{proto.Job{Name: "daily", Agent: "a", Schedule: "@daily", TZ: "UTC", Priority: 1, Overlap: "skip", CatchUp: true,
		Command: []string{"true"}, Created: at, CreatedBy: 1000, LastDue: &at, LastFired: &at, LastRun: "r1", Disabled: true, LastMsg: "m1"}}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"name":"daily","agent":"a","schedule":"@daily","tz":"UTC","priority":1,"overlap":"skip","catch_up":true,"command":["true"],"created":"2026-01-02T03:04:05Z","created_by":1000,"last_due":"2026-01-02T03:04:05Z","last_fired":"2026-01-02T03:04:05Z","last_run":"r1","disabled":true,"last_msg":"m1"}`
	if string(b) != want {
		t.Errorf("the file:\n%s\nwant\n%s", b, want)
	}
	var file, rec map[string]any
	json.Unmarshal(b, &file)
	rb, _ := json.Marshal(proto.JobRecord{Type: proto.RecordJob, Job: j.Job})
	json.Unmarshal(rb, &rec)
	for k, v := range file {
		if fmt.Sprint(rec[k]) != fmt.Sprint(v) {
			t.Errorf("%s: the record says %v, the file %v", k, rec[k], v)
		}
	}
}
