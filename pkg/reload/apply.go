package reload

import (
	"log/slog"
	"reflect"
	"strings"

	"github.com/oxios/oxios/pkg/config"
)

// Apply makes the live part of cfg the one in force at once, atomically,
// and logs which sections changed; a change to a part that needs a
// restart (against running, the config oxiosd started with) is logged
// as such.
func (l *Live) Apply(log *slog.Logger, running, cfg config.Config) {
	old := l.Load(&running)
	nl := l.Store(cfg)
	if !reflect.DeepEqual(old.LLM, nl.LLM) {
		log.Info("config reloaded: [llm]", "base_url", nl.LLM.BaseURL, "model", nl.LLM.Model)
	}
	if !reflect.DeepEqual(old.Access, nl.Access) {
		log.Info("config reloaded: [access]")
	}
	if fixed := Restart(running, cfg); len(fixed) > 0 {
		log.Warn("config: these changes take effect at the next start of oxiosd", "keys", strings.Join(fixed, ", "))
	}
}

// Reload loads the config again with load and applies it (Apply), or
// keeps the one in force when it does not load: then the refusal is
// logged and kept for Refused to say, until a config loads.
func (l *Live) Reload(log *slog.Logger, running config.Config, load func() (config.Config, error)) {
	cfg, err := load()
	l.setRefused(err)
	if err != nil {
		log.Warn("config refused; the config in force stays", "err", err)
		return
	}
	l.Apply(log, running, cfg)
}

// setRefused notes why a config file was refused (nil once one loads).
func (l *Live) setRefused(err error) {
	if err == nil {
		l.refused.Store(nil)
		return
	}
	why := err.Error()
	l.refused.Store(&why)
}

// Refused is why the config file was last refused, "" if it was not.
func (l *Live) Refused() string {
	if why := l.refused.Load(); why != nil {
		return *why
	}
	return ""
}
