package runspec

import (
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

func TestMCPRecordAndTargets(t *testing.T) {
	if got := MCPTarget("ops", "git", "status", ""); got != "ops:mcp git/status" {
		t.Fatal(got)
	}
	if got := MCPTarget("ops", strings.Repeat("s", 40), "t", " x"); got != "ops:mcp "+strings.Repeat("s", 32)+".../t x" {
		t.Fatal(got)
	}
	rec := MCPRecord("ops", "r1", "git", "status", 30*time.Second)
	if rec.Type != proto.RecordMCPCall || rec.Agent != "ops" || rec.Run != "r1" || rec.Timeout != 30 || rec.Seq != 0 || rec.Text != "" {
		t.Fatalf("%+v", rec)
	}
	MCPAuthorized(&rec, 42)
	if rec.Seq != 42 || rec.Text != "mcp git/status authorized (audit entry 42)" {
		t.Fatalf("%+v", rec)
	}
	a := proto.MCPResultArgs{Agent: "ops", Server: "git", Tool: "status", Call: 42, Digest: strings.Repeat("0123456789abcdef", 4)}
	if got := MCPResultTarget(&a, "ok"); got != "ops:mcp git/status call 42 => ok result 0123456789abcdef" {
		t.Fatal(got)
	}
}
