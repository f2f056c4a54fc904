package status

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/sandbox"
)

func TestRecord(t *testing.T) {
	data := t.TempDir()
	cfg := config.Config{File: "/etc/oxios.toml", Data: data, Socket: "/s", Policies: "/p", Mount: "/m"}
	d := Daemon{Server: "oxiosd/1", Started: time.Now().Add(-time.Minute), Config: cfg, LLM: "http://llm", LLMCircuit: "closed",
		Sandbox: sandbox.Features{Seccomp: true, Missing: []string{"landlock: none"}}}
	rec := Record(d, true)
	if rec.Type != "daemon" || rec.PID != os.Getpid() || rec.Config != cfg.File || rec.Data != data || rec.Mount != "/m" || rec.LLM != "http://llm" ||
		rec.LLMCircuit != "closed" || !rec.DataWritable || rec.DataError != "" || rec.Sandbox != d.Sandbox.String() || len(rec.SandboxMissing) != 1 {
		t.Fatalf("%+v", rec)
	}
	if !strings.HasPrefix(rec.Text, "oxiosd/1 pid ") || !strings.HasSuffix(rec.Text, "up 1m0s") {
		t.Fatal(rec.Text)
	}
	// A granted user learns no paths; a daemon without a mount has none.
	d.Config.NoMount = true
	rec = Record(d, false)
	if rec.Config != "" || rec.Data != "" || rec.Policies != "" || rec.LLM != "" || rec.Mount != "" || rec.Socket != "/s" || rec.Server != "oxiosd/1" {
		t.Fatalf("%+v", rec)
	}
	// A data dir it cannot write to says why.
	d.Config.Data = t.TempDir()
	if err := os.WriteFile(filepath.Join(d.Config.Data, "tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if rec = Record(d, true); rec.DataWritable || rec.DataError == "" {
		t.Fatalf("%+v", rec)
	}
}
