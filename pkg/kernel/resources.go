package kernel

import (
	"context"

	"github.com/oxios/oxios/pkg/admit"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/status"
)

// Resources (issue 8) samples, now, what the runs c may see use (CPU
// time, RSS, open fds and processes summed over each run's processes,
// from /proc; tokens and cost as charged), the host's load and the state
// of admission. Nothing is sampled between calls: ox-top asks each
// second while it runs, and an idle oxiosd reads nothing.
func (k *Kernel) Resources(ctx context.Context, c *Cred, a proto.ResourcesArgs, raw []byte) (proto.ResourcesRecord, error) {
	return sysResources.Call(k, ctx, c, a, raw)
}

func (k *Kernel) resources(ctx context.Context, c *Cred, a proto.ResourcesArgs, raw []byte) (proto.ResourcesRecord, error) {
	return admit.Resources(admit.ReadHost(), k.adm.Admission(k.cfg.Runs.MaxConcurrent, k.cfg.Runs.MaxPerAgent), k.runRecords(c, proto.PsArgs{Agent: a.Agent}), k.cfg.Runs.OverloadLoad, k.cfg.Runs.OverloadMemory), nil
}

// Status describes the daemon for ox-status: what it runs with, and
// whether it can write its data dir now (status.Record). Anyone who may
// connect may ask; it changes nothing and is not audited.
func (k *Kernel) Status(ctx context.Context, c *Cred) (proto.DaemonRecord, error) {
	return sysStatus.Call(k, ctx, c, struct{}{}, nil)
}

func (k *Kernel) status(_ context.Context, c *Cred) (proto.DaemonRecord, error) {
	return status.Record(status.Daemon{
		Server: "oxiosd/" + Version, Started: k.started, Config: k.cfg,
		LLM: k.liveCfg().LLM.BaseURL, LLMCircuit: k.LLMState(), ConfigError: k.ConfigRefused(), Sandbox: k.box.Features,
		Models: k.models(), Repo: k.checkRepo,
	}, c.Admin), nil
}
