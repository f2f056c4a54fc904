package agent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// listKernel is memKernel whose StateList lists its map.
type listKernel struct{ memKernel }

func (k *listKernel) StateList(_ context.Context, prefix string) ([]proto.StateRecord, error) {
	var out []proto.StateRecord
	for key, v := range k.state {
		if strings.HasPrefix(key, prefix) {
			out = append(out, proto.StateRecord{Key: key, Size: int64(len(v))})
		}
	}
	slices.SortFunc(out, func(a, b proto.StateRecord) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// TestRunnerSkills: the model sees each skill's name and description, not
// its body, until it calls skill_load; a broken skill is not offered.
func TestRunnerSkills(t *testing.T) {
	k := &listKernel{memKernel{state: map[string][]byte{
		"skills/triage/SKILL.md":    []byte("---\nname: triage\ndescription: Sort alerts by urgency.\n---\nSTEP ONE: read alerts/ first.\n"),
		"skills/triage/levels.md":   []byte("p1 p2 p3"),
		"skills/broken/SKILL.md":    []byte("no front matter"),
		"skills/halfdone/notes.txt": []byte("x"),
	}}}
	r, s, recs := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "triage the alerts", Recall: -1},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "skill_load", Arguments: `{"name":"triage"}`}}},
		llmtest.Turn{ToolCalls: []llmtest.Call{{Name: "skill_load", Arguments: `{"name":"nope"}`}}},
		llmtest.Turn{Content: "done"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	first := reqs[0].Text()
	if !strings.Contains(first, "- triage: Sort alerts by urgency.") || strings.Contains(first, "STEP ONE") || strings.Contains(first, "broken") || strings.Contains(first, "halfdone") {
		t.Fatalf("first request:\n%s", first)
	}
	var offered bool
	for _, tl := range reqs[0].Body.Tools {
		if tl.Function.Name == "skill_load" {
			offered = true
		}
	}
	if !offered {
		t.Fatal("skill_load not offered")
	}
	second := reqs[1].Text()
	if !strings.Contains(second, "STEP ONE") || !strings.Contains(second, "skills/triage/levels.md") {
		t.Fatalf("skill_load did not give the body and files:\n%s", second)
	}
	if !strings.Contains(reqs[2].Text(), "ENOENT") && !strings.Contains(reqs[2].Text(), "no skill nope") {
		t.Fatalf("a missing skill:\n%s", reqs[2].Text())
	}
	var errs int
	for _, rec := range *recs {
		if tr, ok := rec.(*proto.ToolResultRecord); ok && tr.Error {
			errs++
		}
	}
	if errs != 1 {
		t.Errorf("%d failed tool results, want 1 (the missing skill)", errs)
	}
}

// TestRunnerNoSkills: without skills nothing is added to the prompt or
// the tools.
func TestRunnerNoSkills(t *testing.T) {
	k := &listKernel{memKernel{state: map[string][]byte{}}}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "t", Recall: -1}, llmtest.Turn{Content: "done"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tl := range s.Requests()[0].Body.Tools {
		if tl.Function.Name == "skill_load" {
			t.Fatal("skill_load offered with no skills")
		}
	}
	if strings.Contains(s.Requests()[0].Text(), "You have skills") {
		t.Fatal("skills prompt with no skills")
	}
}
