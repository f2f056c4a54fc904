package agenttree

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/budget"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sched/jobs"
	"github.com/oxios/oxios/pkg/state"
	"github.com/oxios/oxios/pkg/version"
)

// forkFiles are the files of agent a at a fork point.
var forkFiles = map[string]string{
	"agents/a/state/notes":                  "b1",
	"agents/a/mem/fact/1.md":                "b2",
	"agents/a/sys/policy.toml":              "b3",
	"agents/a/sys/budget.json":              "b4",
	"agents/a/sys/schedules/nightly.json":   "b5",
	"agents/a/sys/schedules/taken-one.json": "b6",
}

func paths(p *ForkPlan) []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Space+"/"+f.Key)
	}
	sort.Strings(out)
	return out
}

// A fork of the state now lists the kernel's files of the live store,
// whatever space the agent has, and nothing for an agent without them.
func TestLiveKernelFiles(t *testing.T) {
	st, err := state.Open(t.TempDir(), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := st.Begin()
	for _, ch := range []*state.Change{
		{Agent: "a", Space: state.SpaceSys, Key: "budget.json", Value: []byte("{}\n")},
		{Agent: "a", Space: state.SpaceSys, Key: "schedules/nightly.json", Value: []byte("{}\n")},
		{Agent: "a", Space: state.SpaceState, Key: "k", Value: []byte("v")},
		{Agent: "b", Space: state.SpaceState, Key: "k", Value: []byte("v")},
	} {
		if err := b.Add(ch); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	b.Publish()
	files, err := liveKernelFiles(st, "a")
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(files))
	if want := []string{"agents/a/sys/budget.json", "agents/a/sys/schedules/nightly.json"}; !slices.Equal(got, want) {
		t.Errorf("kernel files of a: %q, want %q", got, want)
	}
	if files, err := liveKernelFiles(st, "b"); err != nil || len(files) != 0 {
		t.Errorf("kernel files of b, which has none: %v, %v", files, err)
	}
	plan := PlanFork(files, "c", true)
	if got := strings.Join(paths(plan), " "); got != "sys/budget.json sys/schedules/nightly.json" {
		t.Errorf("live fork of a reads %s", got)
	}
}

// A fork of the state now needs only its budget and jobs (the live copy
// holds the rest); at an older commit it needs every file. Either way
// its jobs are left out of the graft's tree in its second commit.
func TestPlanFork(t *testing.T) {
	live := PlanFork(forkFiles, "b", true)
	if got := strings.Join(paths(live), " "); got != "sys/budget.json sys/schedules/nightly.json sys/schedules/taken-one.json" {
		t.Errorf("live fork reads %s", got)
	}
	old := PlanFork(forkFiles, "b", false)
	if n := len(old.Files); n != len(forkFiles) {
		t.Errorf("fork at a commit reads %d files, want %d", n, len(forkFiles))
	}
	for _, p := range []*ForkPlan{live, old} {
		var deleted []string
		for _, ch := range p.After {
			if ch.Action != version.Deleted {
				t.Errorf("planned %+v before the values", ch)
			}
			deleted = append(deleted, ch.Path)
		}
		sort.Strings(deleted)
		if got := strings.Join(deleted, " "); got != "agents/b/sys/schedules/nightly.json agents/b/sys/schedules/taken-one.json" {
			t.Errorf("second commit deletes %s", got)
		}
	}
}

// The fork's changes: files as they are, the budget with its use reset,
// each job as its disabled copy FORK.JOB unless that name is taken.
func TestForkChanges(t *testing.T) {
	p := PlanFork(forkFiles, "b", false)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	vals := make([][]byte, len(p.Files))
	for i, f := range p.Files {
		switch {
		case f.Key == Budget:
			vals[i], _ = json.Marshal(budget.File{Limit: &proto.Budget{Tokens: 100}, Used: proto.Budget{Tokens: 60}})
		case strings.HasPrefix(f.Key, jobs.Dir+"/"):
			name := strings.TrimSuffix(strings.TrimPrefix(f.Key, jobs.Dir+"/"), ".json")
			vals[i], _ = json.Marshal(jobs.File{Job: proto.Job{Name: name, Agent: "a", Schedule: "@daily", LastRun: "r9"}})
		default:
			vals[i] = []byte("value of " + f.Key)
		}
	}
	changes, copies := p.Changes(vals, now, func(name string) bool { return name == "b.taken-one" })
	byKey := map[string]*state.Change{}
	for _, ch := range changes {
		if ch.Agent != "b" {
			t.Errorf("change of %s for agent %q", ch.Key, ch.Agent)
		}
		byKey[ch.Space+"/"+ch.Key] = ch
	}
	if len(changes) != len(forkFiles)-1 {
		t.Errorf("%d changes, want %d (the job whose copy's name is taken left out)", len(changes), len(forkFiles)-1)
	}
	if ch := byKey["state/notes"]; ch == nil || string(ch.Value) != "value of notes" {
		t.Errorf("notes: %+v", ch)
	}
	var b budget.File
	if ch := byKey["sys/budget.json"]; ch == nil || json.Unmarshal(ch.Value, &b) != nil || b.Used.Tokens != 0 || b.Limit.Tokens != 100 || !b.Since.Equal(now) {
		t.Errorf("budget: %+v", b)
	}
	if len(copies) != 1 || copies[0].Name != "b.nightly" || !copies[0].Disabled || copies[0].LastRun != "" {
		t.Fatalf("copies %+v", copies)
	}
	if byKey["sys/"+jobs.Key("b.nightly")] == nil {
		t.Errorf("no change for the job's copy")
	}
	modified := map[string]bool{}
	for _, ch := range p.After {
		if ch.Action == version.Modified {
			modified[ch.Path] = true
		}
	}
	if !modified["agents/b/sys/budget.json"] || !modified["agents/b/sys/"+jobs.Key("b.nightly")] || len(modified) != 2 {
		t.Errorf("second commit modifies %v", modified)
	}
}
