package kernel

import (
	"io"
	"path/filepath"
	"strings"

	"github.com/oxios/oxios/pkg/policy"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// The sandbox of runs and execs (issue 17): what the machine offers is
// found once at start; each run's and exec's sandbox is made from its
// agent's policy ([sandbox]) at its start.

type boxState struct {
	feat sandbox.Features
	root string // DATA/sandbox: where the shims build their roots
	err  error  // the root could not be made: no sandbox
}

func (k *Kernel) openSandbox() {
	k.box.feat = sandbox.Probe()
	k.box.root = filepath.Join(k.cfg.Data, "sandbox")
	if err := sandbox.PrepareRoot(k.box.root); err != nil {
		k.box.err = err
		k.box.feat.Namespaces = false
		k.box.feat.Missing = append(k.box.feat.Missing, "sandbox root: "+err.Error())
	}
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

// sandboxFor is the sandbox of a run (run) or an exec of agent under
// policy p, with its workspace dir; nil when the policy says none. llm:
// the LLM runner, which keeps the network to reach its model (its tools
// are execs and syscalls of their own, each checked and confined).
func (k *Kernel) sandboxFor(agent string, p *policy.Policy, dir string, llm, run bool) (*sandbox.Spec, *proto.Error) {
	sp := p.Sandbox
	if sp.Isolation == policy.IsolationNone {
		return nil, nil
	}
	f := k.box.feat
	if sp.Isolation == policy.IsolationFull && (!f.Namespaces || !f.Seccomp) {
		return nil, proto.Errorf(proto.EPERM, "agent %q may start only in the full sandbox ([sandbox] isolation = \"full\" of its policy), and this machine lacks: %s (ox-status shows what oxiosd found; a policy with isolation = \"available\" starts runs with less)",
			agent, strings.Join(f.Missing, "; "))
	}
	if !f.Namespaces {
		return nil, nil // "available", and nothing is
	}
	spec := &sandbox.Spec{
		Root: k.box.root, Net: llm || sp.Network,
		NoSeccomp: !f.Seccomp, NoLandlock: f.Landlock == 0,
		Binds: []sandbox.Bind{{Src: dir, Path: sandbox.WorkDir, RW: true}}, Dir: sandbox.WorkDir,
	}
	for _, list := range []struct {
		paths []string
		rw    bool
	}{{sp.ReadOnly, false}, {sp.ReadWrite, true}} {
		for _, path := range list.paths {
			if overlaps(path, k.cfg.Data) || overlaps(path, k.cfg.Socket) || (!k.cfg.NoMount && overlaps(path, k.cfg.Mount)) {
				return nil, proto.Errorf(proto.EPERM, "sandbox path %s of agent %q's policy would show oxiosd's own files (its data, socket or mount): refused", path, agent)
			}
			spec.Binds = append(spec.Binds, sandbox.Bind{Path: path, RW: list.rw, Optional: true})
		}
	}
	if run && !k.cfg.NoMount {
		// Only its own agent's folder of the mount.
		spec.Binds = append(spec.Binds, sandbox.Bind{Path: filepath.Join(k.cfg.Mount, "agent", agent), RW: true, Optional: true, Mkdir: true})
	}
	return spec, nil
}

// overlaps reports whether one of a and b is the other or inside it.
func overlaps(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	in := func(x, y string) bool { return x == y || strings.HasPrefix(x, y+"/") || y == "/" }
	return in(a, b) || in(b, a)
}
