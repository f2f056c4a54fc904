package runspec

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenHost(t *testing.T) {
	var buf bytes.Buffer
	data := t.TempDir()
	h := OpenHost(data, "/run/oxios.sock", "/oxios", slog.New(slog.NewTextHandler(&buf, nil)))
	if h.Root != filepath.Join(data, "sandbox") || h.Data != data || h.Socket != "/run/oxios.sock" || h.Mount != "/oxios" {
		t.Fatalf("%+v", h)
	}
	if w := h.Where(); w.Socket != h.Socket || w.Mount != h.Mount {
		t.Fatalf("where: %+v", w)
	}
	// What the machine offers is logged either way, as it was found.
	out := buf.String()
	if !strings.Contains(out, "have=") || strings.Contains(out, "lacks layers") != (len(h.Features.Missing) > 0) {
		t.Fatalf("features %+v, log:\n%s", h.Features, out)
	}
}
