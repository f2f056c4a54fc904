package kernel

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// Hot reload. The admin edits the config file and the policy files of
// the policies folder (NAME.toml is agent NAME's policy) on disk; the
// kernel watches both (fsnotify, no polling) and applies a change whole or
// not at all: a config that does not load, or a policy that does not
// parse, is refused with a log line (and, for a policy, an audited
// refusal) and what was in force stays. A SIGHUP does the same at once.

// live is the part of the config that a reload changes; the rest needs a
// restart.
type live struct {
	LLM    config.LLM
	Access config.Access
}

// liveState holds the live config.
type liveState struct{ p atomic.Pointer[live] }

func (k *Kernel) liveCfg() *live {
	if l := k.live.p.Load(); l != nil {
		return l
	}
	return &live{LLM: k.cfg.LLM, Access: k.cfg.Access}
}

// Reload applies a new config: its live part at once, atomically; a
// change to another part is logged as needing a restart.
func (k *Kernel) Reload(cfg config.Config) {
	old := k.liveCfg()
	nl := &live{LLM: cfg.LLM, Access: cfg.Access}
	k.live.p.Store(nl)
	if !reflect.DeepEqual(old.LLM, nl.LLM) {
		k.log.Info("config reloaded: [llm]", "base_url", nl.LLM.BaseURL, "model", nl.LLM.Model)
	}
	if !reflect.DeepEqual(old.Access, nl.Access) {
		k.log.Info("config reloaded: [access]")
	}
	var fixed []string
	if cfg.Data != k.cfg.Data {
		fixed = append(fixed, "data")
	}
	if cfg.Socket != k.cfg.Socket {
		fixed = append(fixed, "socket")
	}
	if cfg.Mount != k.cfg.Mount || cfg.NoMount != k.cfg.NoMount {
		fixed = append(fixed, "mount")
	}
	if !reflect.DeepEqual(cfg.Limits, k.cfg.Limits) {
		fixed = append(fixed, "limits")
	}
	if !reflect.DeepEqual(cfg.Memory, k.cfg.Memory) {
		fixed = append(fixed, "memory")
	}
	if !reflect.DeepEqual(cfg.Runs, k.cfg.Runs) {
		fixed = append(fixed, "runs")
	}
	if cfg.Policies != k.cfg.Policies {
		fixed = append(fixed, "policies")
	}
	if len(fixed) > 0 {
		k.log.Warn("config: these changes take effect at the next start of oxiosd", "keys", strings.Join(fixed, ", "))
	}
}

// ApplyPolicies applies every policy file of the policies folder that
// differs from the agent's policy in force.
func (k *Kernel) ApplyPolicies(ctx context.Context) {
	names, _ := filepath.Glob(filepath.Join(k.cfg.Policies, "*.toml"))
	for _, f := range names {
		k.applyPolicyFile(ctx, f)
	}
}

// applyPolicyFile applies one policy file, if it changed.
func (k *Kernel) applyPolicyFile(ctx context.Context, file string) {
	name := strings.TrimSuffix(filepath.Base(file), ".toml")
	if err := proto.CheckAgent(name); err != nil {
		k.log.Warn("policy file ignored: its name is not an agent's", "file", file, "err", err)
		return
	}
	text, err := os.ReadFile(file)
	if err != nil {
		if !os.IsNotExist(err) {
			k.log.Warn("policy file unreadable; the policy in force stays", "file", file, "err", err)
		}
		return
	}
	if _, cur, err := k.loadPolicy(name); err == nil && bytes.Equal(cur, text) {
		return
	}
	daemon := &Cred{UID: k.uid, PID: int32(os.Getpid()), Admin: true}
	if _, err := k.setPolicy(ctx, daemon, name, text, nil); err != nil {
		k.log.Warn("policy file refused; the policy in force stays", "file", file, "err", err)
		return
	}
	k.log.Info("policy applied", "agent", name, "file", file)
}

// Watch watches the config file and the policies folder until ctx ends:
// a changed config is loaded with load and applied with Reload; a changed
// policy file is applied. It returns when ctx ends.
func (k *Kernel) Watch(ctx context.Context, load func() (config.Config, error)) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	// Folders, not files: editors and config managers replace a file by
	// renaming another over it.
	cfgFile := k.cfg.File
	if cfgFile != "" {
		if err := w.Add(filepath.Dir(cfgFile)); err != nil {
			k.log.Warn("config file not watched", "dir", filepath.Dir(cfgFile), "err", err)
		}
	}
	if err := w.Add(k.cfg.Policies); err != nil {
		k.log.Debug("policies folder not watched", "dir", k.cfg.Policies, "err", err)
	}
	k.ApplyPolicies(ctx)
	// Changes come in bursts (write, chmod, rename): act once things are
	// quiet for a moment.
	const settle = 150 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	cfgChanged := false
	policies := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			k.log.Warn("watching config and policies", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch {
			case cfgFile != "" && filepath.Clean(ev.Name) == filepath.Clean(cfgFile):
				cfgChanged = true
			case filepath.Dir(ev.Name) == filepath.Clean(k.cfg.Policies) && strings.HasSuffix(ev.Name, ".toml") && !strings.HasPrefix(filepath.Base(ev.Name), "."):
				if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
					k.log.Info("policy file removed; the agent keeps the policy in force", "file", ev.Name)
					continue
				}
				policies[ev.Name] = true
			default:
				continue
			}
			timer.Reset(settle)
		case <-timer.C:
			if cfgChanged {
				cfgChanged = false
				k.reloadConfig(load)
			}
			for f := range policies {
				delete(policies, f)
				k.applyPolicyFile(ctx, f)
			}
		}
	}
}

// reloadConfig loads the config again and applies it, or keeps the one in
// force when it does not load.
func (k *Kernel) reloadConfig(load func() (config.Config, error)) {
	cfg, err := load()
	k.configRefused(err)
	if err != nil {
		k.log.Warn("config refused; the config in force stays", "err", err)
		return
	}
	k.Reload(cfg)
}

// ReloadNow reloads the config and applies the policy files (SIGHUP).
func (k *Kernel) ReloadNow(ctx context.Context, load func() (config.Config, error)) {
	k.reloadConfig(load)
	k.ApplyPolicies(ctx)
}
