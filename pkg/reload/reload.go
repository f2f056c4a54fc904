// Package reload owns hot reload's mechanics: watching the config file
// and the policies folder (fsnotify, no polling) and telling the kernel
// once a burst of changes settles (Watch), reading a policy file of the
// folder (PolicyFile), and the live part of the config that a reload
// swaps atomically with why a config file was last refused (Live, Apply,
// Reload). It decides nothing: the kernel applies a
// config (its live part at once, the rest at the next start, see
// Restart) and a policy (a syscall of its own, audited) whole or not at
// all.
package reload

import (
	"bytes"
	"context"
	"log/slog"
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

// Config is the part of the config that a reload changes; the rest
// needs a restart.
type Config struct {
	LLM    config.LLM
	Access config.Access
}

// Live holds the live config, and why the config file was last refused
// (for ox-spawn and ox-status to say); the zero Live returns its fallback.
type Live struct {
	p       atomic.Pointer[Config]
	refused atomic.Pointer[string]
}

// Load returns the live config, or the part of cfg it would hold when
// none was stored yet.
func (l *Live) Load(cfg *config.Config) *Config {
	if c := l.p.Load(); c != nil {
		return c
	}
	return &Config{LLM: cfg.LLM, Access: cfg.Access}
}

// Store makes the live part of cfg the one in force and returns it.
func (l *Live) Store(cfg config.Config) *Config {
	c := &Config{LLM: cfg.LLM, Access: cfg.Access}
	l.p.Store(c)
	return c
}

// Restart names the sections of next that differ from cur and take
// effect only at the next start of oxiosd.
func Restart(cur, next config.Config) []string {
	var fixed []string
	if next.Data != cur.Data {
		fixed = append(fixed, "data")
	}
	if next.Socket != cur.Socket {
		fixed = append(fixed, "socket")
	}
	if next.Mount != cur.Mount || next.NoMount != cur.NoMount {
		fixed = append(fixed, "mount")
	}
	if !reflect.DeepEqual(next.Limits, cur.Limits) {
		fixed = append(fixed, "limits")
	}
	if !reflect.DeepEqual(next.Memory, cur.Memory) {
		fixed = append(fixed, "memory")
	}
	if !reflect.DeepEqual(next.Runs, cur.Runs) {
		fixed = append(fixed, "runs")
	}
	if next.Policies != cur.Policies {
		fixed = append(fixed, "policies")
	}
	return fixed
}

// PolicyFiles lists the policy files of the policies folder dir.
func PolicyFiles(dir string) []string {
	names, _ := filepath.Glob(filepath.Join(dir, "*.toml"))
	return names
}

// PolicyFile reads the policy file file (NAME.toml is agent NAME's
// policy); ok is false, with a log line when it says something, for a
// file that is not an agent's or cannot be read.
func PolicyFile(log *slog.Logger, file string) (agent string, text []byte, ok bool) {
	name := strings.TrimSuffix(filepath.Base(file), ".toml")
	if err := proto.CheckAgent(name); err != nil {
		log.Warn("policy file ignored: its name is not an agent's", "file", file, "err", err)
		return "", nil, false
	}
	text, err := os.ReadFile(file)
	if err != nil {
		if !os.IsNotExist(err) {
			log.Warn("policy file unreadable; the policy in force stays", "file", file, "err", err)
		}
		return "", nil, false
	}
	return name, text, true
}

// ApplyPolicyFile applies file, a policy file (PolicyFile), if its text
// differs from what current reads of its agent's policy in force: set
// applies it, and a policy set refuses stays refused, with a log line;
// what was in force stays.
func ApplyPolicyFile(log *slog.Logger, file string, current func(agent string) ([]byte, error), set func(agent string, text []byte) error) {
	name, text, ok := PolicyFile(log, file)
	if !ok {
		return
	}
	if cur, err := current(name); err == nil && bytes.Equal(cur, text) {
		return
	}
	if err := set(name, text); err != nil {
		log.Warn("policy file refused; the policy in force stays", "file", file, "err", err)
		return
	}
	log.Info("policy applied", "agent", name, "file", file)
}

// Settle is how long Watch waits for changes to stop before it acts.
const Settle = 150 * time.Millisecond

// Hooks are what Watch calls.
type Hooks struct {
	// Started runs once the watches are in place, before the first
	// event is read: what changed before is applied there.
	Started func()
	// Config runs when the config file changed.
	Config func()
	// Policy runs with each policy file that changed.
	Policy func(file string)
}

// Watch watches the config file cfgFile ("" none) and the policies
// folder policies until ctx ends. Once changes settle it calls h.Config
// if the config file changed, and h.Policy with each policy file that
// changed (a removed one is only logged: the agent keeps the policy in
// force). It returns when ctx ends.
func Watch(ctx context.Context, log *slog.Logger, cfgFile, policies string, h Hooks) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	// Folders, not files: editors and config managers replace a file by
	// renaming another over it.
	if cfgFile != "" {
		if err := w.Add(filepath.Dir(cfgFile)); err != nil {
			log.Warn("config file not watched", "dir", filepath.Dir(cfgFile), "err", err)
		}
	}
	if err := w.Add(policies); err != nil {
		log.Debug("policies folder not watched", "dir", policies, "err", err)
	}
	h.Started()
	// Changes come in bursts (write, chmod, rename): act once things are
	// quiet for a moment.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	cfgChanged := false
	changed := map[string]bool{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			log.Warn("watching config and policies", "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch {
			case cfgFile != "" && filepath.Clean(ev.Name) == filepath.Clean(cfgFile):
				cfgChanged = true
			case filepath.Dir(ev.Name) == filepath.Clean(policies) && strings.HasSuffix(ev.Name, ".toml") && !strings.HasPrefix(filepath.Base(ev.Name), "."):
				if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
					log.Info("policy file removed; the agent keeps the policy in force", "file", ev.Name)
					continue
				}
				changed[ev.Name] = true
			default:
				continue
			}
			timer.Reset(Settle)
		case <-timer.C:
			if cfgChanged {
				cfgChanged = false
				h.Config()
			}
			for f := range changed {
				delete(changed, f)
				h.Policy(f)
			}
		}
	}
}
