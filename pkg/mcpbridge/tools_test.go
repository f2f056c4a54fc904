package mcpbridge

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestListArgsAreArrays: a list argument is declared "type": "array",
// which the MCP Inspector's CLI can fill (issue 43), and stays optional.
func TestListArgsAreArrays(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	tool := &mcp.Tool{Name: "remember"}
	addTool(s, tool, func(context.Context, *mcp.CallToolRequest, RememberIn) (*mcp.CallToolResult, any, error) {
		return nil, nil, nil
	})
	b, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(b, &sch); err != nil {
		t.Fatal(err)
	}
	if typ := sch.Properties["tags"].Type; typ != "array" {
		t.Errorf("tags: type %v, want \"array\" (%s)", typ, b)
	}
	if strings.Contains(strings.Join(sch.Required, " "), "tags") {
		t.Errorf("tags is required: %s", b)
	}
}

// TestSharedToolsServed: the tools an LLM run has too are served with
// their one definition (Shared): the name, the description and the
// input schema, as a client lists them.
func TestSharedToolsServed(t *testing.T) {
	ctx := context.Background()
	s := &Server{cfg: Config{Agent: "ops"}, mcp: mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)}
	s.addTools()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		listed[tl.Name] = tl
	}
	if len(Shared()) < 5 {
		t.Fatalf("only %d shared tools", len(Shared()))
	}
	for _, sp := range Shared() {
		tl := listed[sp.Name]
		if tl == nil {
			t.Errorf("%s: not served", sp.Name)
			continue
		}
		got, _ := json.Marshal(tl.InputSchema)
		want := sp.Params()
		var g, w any
		json.Unmarshal(got, &g)
		json.Unmarshal(want, &w)
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		if tl.Description != sp.Description || string(gb) != string(wb) {
			t.Errorf("%s: served as %q %s, defined as %q %s", sp.Name, tl.Description, gb, sp.Description, wb)
		}
	}
}
