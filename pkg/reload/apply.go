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
