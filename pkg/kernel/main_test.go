package kernel

import (
	"os"
	"testing"

	"github.com/oxios/oxios/pkg/sandbox"
)

// TestMain lets the test binary be the init of the sandboxes of the runs
// the tests start (schedules fire runs): without oxios-sandbox-init beside
// it, the supervisor re-runs the binary as that init.
func TestMain(m *testing.M) {
	sandbox.Main()
	os.Exit(m.Run())
}
