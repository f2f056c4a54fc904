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
	addTool(s, tool, func(context.Context, *mcp.CallToolRequest, rememberIn) (*mcp.CallToolResult, any, error) {
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
