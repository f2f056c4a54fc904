package kernel

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oxios/oxios/pkg/admit"
	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/proto"
)

// Resources (issue 8) samples, now, what the runs c may see use (CPU
// time, RSS, open fds and processes summed over each run's processes,
// from /proc; tokens and cost as charged), the host's load and the state
// of admission. Nothing is sampled between calls: ox-top asks each
// second while it runs, and an idle oxiosd reads nothing.
func (k *Kernel) Resources(ctx context.Context, c *Cred, a proto.ResourcesArgs, raw []byte) (proto.ResourcesRecord, error) {
	if a.Agent != "" {
		if err := k.gate(call{op: proto.OpResources, c: c, agent: a.Agent, raw: raw}); err != nil {
			return proto.ResourcesRecord{}, err
		}
	}
	return admit.Resources(admit.ReadHost(), k.admissionState(), k.runRecords(c, proto.PsArgs{Agent: a.Agent}), k.cfg.Runs.OverloadLoad, k.cfg.Runs.OverloadMemory), nil
}

// Status describes the daemon for ox-status: what it runs with, and
// whether it can write its data dir now (a file created in DATA/tmp and
// removed). Anyone who may connect may ask; it changes nothing and is not
// audited.
func (k *Kernel) Status(ctx context.Context, c *Cred) proto.DaemonRecord {
	rec := proto.DaemonRecord{
		Type: proto.RecordDaemon, Server: "oxiosd/" + Version, PID: os.Getpid(), Started: k.started,
		Config: k.cfg.File, Data: k.cfg.Data, Socket: k.cfg.Socket, Policies: k.cfg.Policies,
		LLM: k.liveCfg().LLM.BaseURL, LLMCircuit: k.LLMState(), ConfigError: k.ConfigRefused(),
		Sandbox: k.box.feat.String(), SandboxMissing: k.box.feat.Missing,
	}
	if !k.cfg.NoMount {
		rec.Mount = k.cfg.Mount
	}
	if err := durable.Probe(filepath.Join(k.cfg.Data, "tmp")); err != nil {
		rec.DataError = err.Error()
	} else {
		rec.DataWritable = true
	}
	if !c.Admin {
		// Paths are the admin's business; a granted user learns the version.
		rec.Config, rec.Data, rec.Policies, rec.LLM = "", "", "", ""
	}
	rec.Text = fmt.Sprintf("%s pid %d, up %s", rec.Server, rec.PID, time.Since(k.started).Round(time.Second))
	return rec
}
