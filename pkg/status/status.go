// Package status builds the record ox-status shows of the daemon
// (proto.DaemonRecord): what it runs with, whether it can write its data
// dir now, and what the caller may see of it. The kernel gathers what it
// knows (its config, the live [llm] endpoint and its breaker, a refused
// config file, the sandbox's features) and passes it.
package status

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// Daemon is what the kernel knows of the daemon.
type Daemon struct {
	Server  string // "oxiosd/VERSION"
	Started time.Time
	Config  config.Config // the config it started with
	// LLM is the live [llm] base_url, LLMCircuit the state of its
	// breaker; ConfigError why the config file was last refused.
	LLM, LLMCircuit, ConfigError string
	Sandbox                      sandbox.Features
	// Models are the models runs may ask for.
	Models []proto.ModelInfo
	// Repo checks the repository's objects (version.Repo.Check): what it
	// found, and whether that is damage. Asked for the admin only.
	Repo func() (string, bool)
}

// Record is the daemon's record as a caller sees it (admin: with its
// paths), and whether the data dir is writable now: a file created in
// DATA/tmp and removed.
func Record(d Daemon, admin bool) proto.DaemonRecord {
	cfg := d.Config
	rec := proto.DaemonRecord{
		Type: proto.RecordDaemon, Server: d.Server, PID: os.Getpid(), Started: d.Started,
		Config: cfg.File, Data: cfg.Data, Socket: cfg.Socket, Policies: cfg.Policies,
		LLM: d.LLM, LLMCircuit: d.LLMCircuit, ConfigError: d.ConfigError, Models: d.Models,
		Sandbox: d.Sandbox.String(), SandboxMissing: d.Sandbox.Missing,
	}
	if !cfg.NoMount {
		rec.Mount = cfg.Mount
	}
	if err := durable.Probe(filepath.Join(cfg.Data, "tmp")); err != nil {
		rec.DataError = err.Error()
	} else {
		rec.DataWritable = true
	}
	if admin && d.Repo != nil {
		rec.Repo, rec.RepoDamaged = d.Repo()
	}
	if !admin {
		// Paths are the admin's business; a granted user learns the version.
		rec.Config, rec.Data, rec.Policies, rec.LLM = "", "", "", ""
		rec.Models = append([]proto.ModelInfo(nil), rec.Models...)
		for i := range rec.Models {
			rec.Models[i].Endpoint = ""
		}
	}
	rec.Text = fmt.Sprintf("%s pid %d, up %s", rec.Server, rec.PID, time.Since(d.Started).Round(time.Second))
	return rec
}
