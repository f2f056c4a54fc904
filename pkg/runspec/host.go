package runspec

import (
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/oxios/oxios/pkg/sandbox"
)

// OpenHost finds once, at start, what this machine offers the sandboxes
// of runs and execs (sandbox.ProbeRoot on DATA/sandbox, where the shims
// build their roots), logs it, and returns the Host they are made on:
// oxiosd's data dir, socket and mount ("" when it has none). Each run's
// and exec's sandbox is made from its agent's policy ([sandbox]) at its
// start (Sandbox).
func OpenHost(data, socket, mount string, log *slog.Logger) Host {
	root := filepath.Join(data, "sandbox")
	h := Host{Features: sandbox.ProbeRoot(root), Root: root, Data: data, Socket: socket, Mount: mount}
	if n, err := sandbox.SweepWorkspaces(filepath.Join(data, "work")); err != nil {
		log.Warn("workspaces left by the last run of oxiosd", "unmounted", n, "err", err)
	} else if n > 0 {
		log.Info("workspaces left by the last run of oxiosd unmounted", "count", n)
	}
	if len(h.Features.Missing) > 0 {
		log.Warn("the sandbox of runs lacks layers: a policy with [sandbox] isolation = \"full\" refuses runs that would need them",
			"have", h.Features.String(), "missing", strings.Join(h.Features.Missing, "; "))
	} else {
		log.Info("sandbox of runs", "have", h.Features.String())
	}
	return h
}

// Where is where oxiosd serves the runs made on h.
func (h Host) Where() Where { return Where{Socket: h.Socket, Mount: h.Mount} }
