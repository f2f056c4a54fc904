// Command oxios-sandbox-init is the init of a run's sandbox: oxiosd starts
// it, in the run's new namespaces, to build the run's world, drop every
// privilege and start the run's command (package sandbox, oxiosd(8)). It
// is a program of its own, small, so that a run starts in about the time
// of an exec rather than of oxiosd's start; oxiosd re-runs itself as the
// init when it is not found beside it. It is not run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/oxios/oxios/pkg/sandbox"
)

func main() {
	sandbox.Main()
	fmt.Fprintln(os.Stderr, "oxios-sandbox-init: the init of oxiosd's sandboxes, started by oxiosd only (see oxiosd(8))")
	os.Exit(2)
}
