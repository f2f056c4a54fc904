package kernel

import (
	"context"
	"os"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/reload"
)

// Hot reload. The admin edits the config file and the policy files of
// the policies folder (NAME.toml is agent NAME's policy) on disk; the
// kernel watches both (package reload) and applies a change whole or not
// at all: a config that does not load, or a policy that does not parse,
// is refused with a log line (and, for a policy, an audited refusal) and
// what was in force stays. A SIGHUP does the same at once.

// live is the part of the config that a reload changes.
type live = reload.Config

func (k *Kernel) liveCfg() *live { return k.live.Load(&k.cfg) }

// Reload applies a new config: its live part at once, atomically; a
// change to another part is logged as needing a restart.
func (k *Kernel) Reload(cfg config.Config) { k.live.Apply(k.log, k.cfg, cfg) }

// ApplyPolicies applies every policy file of the policies folder that
// differs from the agent's policy in force.
func (k *Kernel) ApplyPolicies(ctx context.Context) {
	for _, f := range reload.PolicyFiles(k.cfg.Policies) {
		k.applyPolicyFile(ctx, f)
	}
}

// applyPolicyFile applies one policy file, if it changed, as the
// daemon (reload.ApplyPolicyFile).
func (k *Kernel) applyPolicyFile(ctx context.Context, file string) {
	daemon := &Cred{UID: k.uid, PID: int32(os.Getpid()), Admin: true}
	reload.ApplyPolicyFile(k.log, file, func(agent string) ([]byte, error) {
		_, cur, err := k.loadPolicy(agent)
		return cur, err
	}, func(agent string, text []byte) error {
		_, err := k.setPolicy(ctx, daemon, agent, text, nil)
		return err
	})
}

// Watch watches the config file and the policies folder until ctx ends:
// a changed config is loaded with load and applied with Reload; a changed
// policy file is applied. It returns when ctx ends.
func (k *Kernel) Watch(ctx context.Context, load func() (config.Config, error)) error {
	return reload.Watch(ctx, k.log, k.cfg.File, k.cfg.Policies, reload.Hooks{
		Started: func() { k.ApplyPolicies(ctx) },
		Config:  func() { k.live.Reload(k.log, k.cfg, load) },
		Policy:  func(file string) { k.applyPolicyFile(ctx, file) },
	})
}

// ReloadNow reloads the config and applies the policy files (SIGHUP).
func (k *Kernel) ReloadNow(ctx context.Context, load func() (config.Config, error)) {
	k.live.Reload(k.log, k.cfg, load)
	k.ApplyPolicies(ctx)
}
