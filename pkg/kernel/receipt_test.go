package kernel

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/audit"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/proto"
)

// TestAuditFrom: a receipt finds a run's entries from the first entry of
// the time it started, found by halving, not by reading the log from its
// first entry.
func TestAuditFrom(t *testing.T) {
	cfg := config.Default()
	cfg.Data = filepath.Join(t.TempDir(), "data")
	cfg.Socket = filepath.Join(cfg.Data, "none.sock")
	cfg.NoMount = true
	k, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	admin := &Cred{UID: uint32(os.Getuid()), Admin: true}
	var marks []time.Time // before each save
	for i := range 40 {
		marks = append(marks, time.Now())
		time.Sleep(2 * time.Millisecond)
		if _, err := k.StateSave(ctx, admin, proto.StateSaveArgs{Agent: "ops", Key: fmt.Sprintf("k%d", i), Value: "v"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.audit.Sync(); err != nil {
		t.Fatal(err)
	}
	for i, m := range marks {
		seq := k.auditFrom(m)
		line, err := k.audit.Line(seq)
		if err != nil {
			t.Fatalf("mark %d: entry %d: %v", i, seq, err)
		}
		in, _ := audit.Peek(line)
		if in.Time < audit.FormatTime(m) || in.Target != fmt.Sprintf("ops:k%d", i) {
			t.Errorf("mark %d: entry %d is %s %s, want the save of k%d", i, seq, in.Time, in.Target, i)
		}
		if prev, err := k.audit.Line(seq - 1); err == nil {
			if p, _ := audit.Peek(prev); p.Time >= audit.FormatTime(m) {
				t.Errorf("mark %d: entry %d before %d is of its time too", i, seq-1, seq)
			}
		}
	}
	if got, last := k.auditFrom(time.Now().Add(time.Hour)), k.audit.Published(); got != last+1 {
		t.Errorf("after the last entry: %d, want %d", got, last+1)
	}
	if got := k.auditFrom(time.Time{}); got != 1 {
		t.Errorf("before the first entry: %d", got)
	}
}
