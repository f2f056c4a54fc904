package mcpbridge_test

import (
	"testing"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/mcpbridge"
)

// TestSharedToolsAreSyscalls: each shared tool makes a syscall the
// kernel's table declares, and one that a front end serves.
func TestSharedToolsAreSyscalls(t *testing.T) {
	for _, sp := range mcpbridge.Shared() {
		sc := kernel.Lookup(sp.Op)
		if sc == nil || sc.Recorded {
			t.Errorf("%s: op %q is not a served syscall", sp.Name, sp.Op)
		}
		if sp.Description == "" || sp.Input == nil || sp.Input.Type != "object" {
			t.Errorf("%s: no description or input: %+v", sp.Name, sp)
		}
	}
}
