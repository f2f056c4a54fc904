package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/agent"
	"github.com/oxios/oxios/pkg/llm/llmtest"
	"github.com/oxios/oxios/pkg/mcpbridge"
)

// TestSharedTools: the runner offers the tools the MCP bridge has too
// as they are defined once (mcpbridge.Shared), and takes the arguments
// that definition declares: a base64 value, a memory's ttl and
// importance.
func TestSharedTools(t *testing.T) {
	offered := map[string]string{}
	for _, tl := range agent.Tools() {
		offered[tl.Function.Name] = tl.Function.Description + " " + string(tl.Function.Parameters.(json.RawMessage))
	}
	for _, sp := range mcpbridge.Shared() {
		if got := offered[sp.Name]; got != sp.Description+" "+string(sp.Params()) {
			t.Errorf("%s: offered as %q, defined as %q %s", sp.Name, got, sp.Description, sp.Params())
		}
	}
	k := &memKernel{state: map[string][]byte{}}
	r, s, _ := runner(t, k, agent.Config{Agent: "a", Run: "r", Task: "t", Recall: -1},
		llmtest.Turn{ToolCalls: []llmtest.Call{
			{Name: "state_write", Arguments: `{"key":"bin","value":"AAH/","encoding":"base64"}`},
			{Name: "remember", Arguments: `{"text":"t","ttl":"1h","importance":0.5}`},
			{Name: "recall", Arguments: `{"query":"q","kind":"semantic"}`},
		}},
		llmtest.Turn{Content: "done"})
	if _, err := r.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := k.state["bin"]; string(v) != "\x00\x01\xff" {
		t.Errorf("the base64 value saved as %q", v)
	}
	if len(k.mems) == 0 || k.mems[0].TTL != "1h" || k.mems[0].Importance != 0.5 {
		t.Errorf("remembered %+v", k.mems)
	}
	// This kernel recalls by query alone: the model is told.
	if txt := s.Requests()[1].Text(); !strings.Contains(txt, "kind and tags are not offered here") {
		t.Errorf("conversation:\n%s", txt)
	}
}
