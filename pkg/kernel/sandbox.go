package kernel

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/runspec"
	"github.com/oxios/oxios/pkg/sandbox"
)

// The sandbox of runs and execs (issue 17): what the machine offers is
// found once at start; each run's and exec's sandbox is made from its
// agent's policy ([sandbox]) at its start.

type boxState struct {
	feat sandbox.Features
	root string // DATA/sandbox: where the shims build their roots
}

func (k *Kernel) openSandbox() {
	k.box.root = filepath.Join(k.cfg.Data, "sandbox")
	k.box.feat = sandbox.ProbeRoot(k.box.root)
	if len(k.box.feat.Missing) > 0 {
		k.log.Warn("the sandbox of runs lacks layers: a policy with [sandbox] isolation = \"full\" refuses runs that would need them",
			"have", k.box.feat.String(), "missing", strings.Join(k.box.feat.Missing, "; "))
	} else {
		k.log.Info("sandbox of runs", "have", k.box.feat.String())
	}
}

// SandboxFeatures is what the machine offers for sandboxes (ox-status).
func (k *Kernel) SandboxFeatures() sandbox.Features { return k.box.feat }

// SetRunListener installs what serves a run's own socket (the socket
// server): listen serves path, connectable by uid only, until closed.
func (k *Kernel) SetRunListener(listen func(path string, uid uint32) (io.Closer, error)) {
	k.sup.Listen = listen
}

// where is where oxiosd serves runs.
func (k *Kernel) where() runspec.Where {
	w := runspec.Where{Socket: k.cfg.Socket}
	if !k.cfg.NoMount {
		w.Mount = k.cfg.Mount
	}
	return w
}

// sandboxFor is the sandbox of a run (run) or an exec of agent under
// policy p, with its workspace dir (runspec.Sandbox).
func (k *Kernel) sandboxFor(agent string, p *policy.Policy, dir string, llm, run bool) (*sandbox.Spec, *proto.Error) {
	w := k.where()
	return runspec.Sandbox(runspec.Host{Features: k.box.feat, Root: k.box.root, Data: k.cfg.Data, Socket: w.Socket, Mount: w.Mount}, agent, p, dir, llm, run)
}
