package kernel

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// TestRootContext: once the context Bind gave is done (oxiosd's, on
// SIGTERM), a queued run no longer starts when a slot frees, and Close
// still records its end and the end of the run that ran.
func TestRootContext(t *testing.T) {
	cfg := config.Default()
	cfg.Data = filepath.Join(t.TempDir(), "data")
	cfg.Socket = filepath.Join(cfg.Data, "none.sock")
	cfg.NoMount = true
	cfg.Runs.MaxConcurrent = 1
	k, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	root, cancel := context.WithCancel(context.Background())
	k.Bind(root)
	ctx := context.Background()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	first, err := k.RunSpawn(ctx, admin, proto.SpawnArgs{Agent: "ops", Command: []string{"sleep", "60"}}, nil)
	if err != nil || first.State == proto.RunQueued {
		t.Fatalf("first run: %+v %v", first, err)
	}
	second, err := k.RunSpawn(ctx, admin, proto.SpawnArgs{Agent: "ops", Command: []string{"true"}}, nil)
	if err != nil || second.State != proto.RunQueued {
		t.Fatalf("second run is not queued: %+v %v", second, err)
	}
	cancel()
	// The slot frees; the queue no longer starts runs.
	r, _ := k.sup.Get(first.ID)
	r.End("test over")
	<-r.Done()
	time.Sleep(100 * time.Millisecond) // time for a start that must not happen
	if _, started := k.sup.Get(second.ID); started {
		t.Fatal("a queued run started after the root context was done")
	}
	if k.adm.Lookup(second.ID) == nil {
		t.Fatal("the queued run left the queue")
	}
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	// Both ends are on the log, recorded while stopping.
	k2, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	ends := map[string]bool{}
	k2.AuditLog(ctx, admin, proto.AuditLogArgs{Op: proto.OpRunExit}, nil, func(line []byte) error {
		for _, id := range []string{first.ID, second.ID} {
			if strings.Contains(string(line), id) {
				ends[id] = true
			}
		}
		return nil
	}, nil)
	if !ends[first.ID] || !ends[second.ID] {
		t.Errorf("run.exit entries: %v, want both runs", ends)
	}
}
