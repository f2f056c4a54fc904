package reload

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/config"
)

func TestApply(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	running := config.Config{Socket: "/s"}
	running.LLM.Model = "m0"
	var l Live
	next := running
	next.LLM.Model = "m1"
	next.Socket = "/other"
	l.Apply(log, running, next)
	if got := l.Load(&running); got.LLM.Model != "m1" {
		t.Fatalf("the live part is not in force: %+v", got)
	}
	out := buf.String()
	if !strings.Contains(out, "config reloaded: [llm]") || !strings.Contains(out, "model=m1") || strings.Contains(out, "[access]") ||
		!strings.Contains(out, `keys=socket`) {
		t.Fatalf("log:\n%s", out)
	}
	buf.Reset()
	l.Apply(log, running, next)
	if out := buf.String(); strings.Contains(out, "config reloaded") {
		t.Fatalf("nothing changed in the live part, yet:\n%s", out)
	}
}

func TestReload(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	running := config.Config{}
	running.LLM.Model = "m0"
	var l Live
	l.Reload(log, running, func() (config.Config, error) { return config.Config{}, errors.New("line 3: bad") })
	if got := l.Refused(); got != "line 3: bad" {
		t.Fatalf("Refused = %q", got)
	}
	if got := l.Load(&running); got.LLM.Model != "m0" {
		t.Fatalf("a refused config was applied: %+v", got)
	}
	if out := buf.String(); !strings.Contains(out, "config refused; the config in force stays") {
		t.Fatalf("log:\n%s", out)
	}
	next := running
	next.LLM.Model = "m1"
	l.Reload(log, running, func() (config.Config, error) { return next, nil })
	if got := l.Refused(); got != "" {
		t.Fatalf("Refused after a config loaded = %q", got)
	}
	if got := l.Load(&running); got.LLM.Model != "m1" {
		t.Fatalf("the loaded config is not in force: %+v", got)
	}
}
