package agent_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/llm"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/proto"
)

// record runs a task against the scripted model and returns its records
// as the run's log holds them.
func record(t *testing.T, k agent.Kernel, cfg agent.Config, turns ...llmtest.Turn) []byte {
	t.Helper()
	r, _, recs := runner(t, k, cfg, turns...)
	_, err := r.Run(context.Background())
	if err != nil {
		r.Failed(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"run","id":"r1","agent":"a","state":"running","task":"` + cfg.Task + `"}` + "\n")
	for _, rec := range *recs {
		b.Write(agent.Marshal(rec))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// replay replays log against k: its report.
func replay(t *testing.T, k agent.Kernel, log []byte) *proto.ReplayRecord {
	t.Helper()
	rec, err := agent.ReadRecording(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	p := &agent.Replay{Rec: rec, Of: "r1"}
	r := agent.New(agent.Config{Agent: "a", Run: "r2", Start: rec.Opening, Recall: -1, NoSummary: true, MaxTurns: len(rec.Answers) + 1,
		Emit: p.Observe}, k, p)
	_, err = r.Run(context.Background())
	return p.End(err)
}

func TestReplayMatchesAndDiverges(t *testing.T) {
	turns := []llmtest.Turn{
		{ToolCalls: []llmtest.Call{{Name: "state_read", Arguments: `{"key":"cfg"}`}, {Name: "remember", Arguments: `{"text":"cfg read"}`}}, PromptTokens: 10, CompletionTokens: 5},
		{Content: "cfg is on", PromptTokens: 20, CompletionTokens: 3},
	}
	k := &memKernel{state: map[string][]byte{"cfg": []byte("on")}}
	log := record(t, k, agent.Config{Agent: "a", Run: "r1", Task: "read cfg"}, turns...)
	if k.charged != 38 {
		t.Fatalf("the recorded run charged %d", k.charged)
	}

	k2 := &memKernel{state: map[string][]byte{"cfg": []byte("on")}}
	end := replay(t, k2, log)
	if !end.Matched || end.Answers != 2 || end.ToolCalls != 2 {
		t.Fatalf("replay %+v", end)
	}
	if k2.charged != 0 || len(k2.checks) != 0 {
		t.Errorf("the replay reserved or charged budget: %d charged, %d checks", k2.charged, len(k2.checks))
	}

	// The world changed: the key holds another value.
	end = replay(t, &memKernel{state: map[string][]byte{"cfg": []byte("off")}}, log)
	if end.Matched || end.Turn != 1 || end.Step != 1 || end.Tool != "state_read" || end.Want != "on" || end.Got != "off" {
		t.Fatalf("replay in a changed world %+v", end)
	}

	// A recording cut after its first answer: the replay asks again.
	cut := log[:bytes.Index(log, []byte(`"turn":2`))]
	cut = cut[:bytes.LastIndexByte(cut, '\n')+1]
	end = replay(t, &memKernel{state: map[string][]byte{"cfg": []byte("on")}}, cut)
	if end.Matched || end.Turn != 2 || !strings.Contains(end.Text, "asked the model again after the 1 answers") {
		t.Fatalf("replay past its recording %+v", end)
	}

	// Records of a runner that did not number its answers.
	old := bytes.ReplaceAll(log, []byte(`,"turn":1`), nil)
	old = bytes.ReplaceAll(old, []byte(`,"turn":2`), nil)
	if _, err := agent.ReadRecording(bytes.NewReader(old)); err == nil || !strings.Contains(err.Error(), "do not number") {
		t.Errorf("unnumbered records: %v", err)
	}
}

// A run that ended over budget replays to the same end, charging nothing.
func TestReplayBudgetEnd(t *testing.T) {
	k := &memKernel{state: map[string][]byte{}, limit: 2000}
	log := record(t, k, agent.Config{Agent: "a", Run: "r1", Task: "spend", Recall: -1},
		llmtest.Turn{Content: "the answer paid for", ToolCalls: []llmtest.Call{{Name: "state_list", Arguments: `{}`}}, PromptTokens: 1900, CompletionTokens: 200},
		llmtest.Turn{Content: "never"})
	if !bytes.Contains(log, []byte(`"code":"EDQUOT"`)) {
		t.Fatalf("the recorded run did not end over budget:\n%s", log)
	}
	k2 := &memKernel{state: map[string][]byte{}}
	if end := replay(t, k2, log); !end.Matched || end.Answers != 1 || k2.charged != 0 {
		t.Fatalf("replay %+v, %d charged", end, k2.charged)
	}
}

// Asked afresh, a model whose last answer differs: the replay names it,
// and the run goes on to the model's own end.
func TestReplayAfresh(t *testing.T) {
	turns := []llmtest.Turn{
		{ToolCalls: []llmtest.Call{{Name: "state_read", Arguments: `{"key":"cfg"}`}}},
		{Content: "cfg is on"},
	}
	log := record(t, &memKernel{state: map[string][]byte{"cfg": []byte("on")}}, agent.Config{Agent: "a", Run: "r1", Task: "read cfg", Recall: -1}, turns...)
	rec, err := agent.ReadRecording(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.New(turns[0], llmtest.Turn{Content: "cfg is enabled"})
	t.Cleanup(s.Close)
	lc := llm.DefaultConfig(s.URL, "", "m")
	lc.Retries = 0
	p := &agent.Replay{Rec: rec, Of: "r1", Ask: llm.New(lc)}
	r := agent.New(agent.Config{Agent: "a", Run: "r2", Start: rec.Opening, Recall: -1, NoSummary: true, Emit: p.Observe},
		&memKernel{state: map[string][]byte{"cfg": []byte("on")}}, p)
	_, err = r.Run(context.Background())
	end := p.End(err)
	if end.Matched || end.Turn != 2 || end.Step != 0 || end.Want != "cfg is on" || end.Got != "cfg is enabled" || len(s.Requests()) != 2 {
		t.Fatalf("afresh %+v, %d requests", end, len(s.Requests()))
	}
}
