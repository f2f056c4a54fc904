package approval

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestKeeperResolvesWhatACrashLeft(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	g := New(0)
	if _, left, err := Keep(g, dir, log); err != nil || len(left) != 0 {
		t.Fatalf("%v %v", left, err)
	}
	r := g.Ask(Request{Agent: "a", Op: "exec", What: "rm", Rule: "r", Why: "w", Default: Denied}, time.Hour)
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); err != nil {
		t.Fatalf("pending request not on disk: %v", err)
	}
	if rec := Record(r); rec.State != Pending || rec.Text == "" {
		t.Errorf("record: %+v", rec)
	}
	// A new daemon: the request is resolved into its default.
	g2 := New(0)
	kp, left, err := Keep(g2, dir, log)
	if err != nil || len(left) != 1 || left[0].State != Denied || left[0].DecidedBy != "oxiosd restart" {
		t.Fatalf("left: %+v %v", left, err)
	}
	kp.Write(left[0])
	if _, err := os.Stat(filepath.Join(dir, r.ID+".json")); !os.IsNotExist(err) {
		t.Errorf("decided request's file stays: %v", err)
	}
}
