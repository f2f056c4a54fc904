package kernel

import (
	"io"
	"path/filepath"

	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/sandbox"
)

// The sandbox of runs and execs (issue 17): what the machine offers is
// found once at start (runspec.OpenHost); each run's and exec's sandbox
// is made from its agent's policy ([sandbox]) at its start
// (runspec.Sandbox).

func (k *Kernel) openSandbox() {
	k.box = runspec.OpenHost(k.cfg.Data, k.cfg.Socket, k.cfg.MountAt(), k.log)
}

// SandboxFeatures is what the machine offers for sandboxes (ox-status).
func (k *Kernel) SandboxFeatures() sandbox.Features { return k.box.Features }

// SetRunListener installs what serves a run's own socket (the socket
// server): listen serves path, connectable by uid only, until closed.
func (k *Kernel) SetRunListener(listen func(path string, uid uint32) (io.Closer, error)) {
	k.sup.Listen = listen
	if k.cfg.Socket != "" {
		if abs, err := filepath.Abs(k.cfg.Socket); err == nil {
			k.sup.SocketDir = abs + ".runs"
		}
	}
}
