package mcpbridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// TestStartTimeoutFromPolicy: a server's start is bounded by its own
// start_timeout when its policy gives one, not the pool's default.
func TestStartTimeoutFromPolicy(t *testing.T) {
	info := proto.MCPServerInfo{Name: "mute", Command: []string{"sleep", "60"}, Allow: []string{"*"}, StartTimeout: 0.3}
	start := time.Now()
	p, errs := Open(context.Background(), []proto.MCPServerInfo{info}, nil, Options{Dir: t.TempDir(), StartTimeout: time.Minute})
	defer p.Close()
	took := time.Since(start)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "mute") {
		t.Fatalf("errs %v", errs)
	}
	if took > 20*time.Second {
		t.Errorf("the start took %v: the policy's 0.3s did not bound it", took)
	}
}
