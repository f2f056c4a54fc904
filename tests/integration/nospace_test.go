package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// TestCommitOutOfSpace: a commit, and a fork (which commits its origin
// first), on a file system with no room left for git's objects fail with
// ENOSPC, not EIO, and name the cause; once space is freed the commit
// goes through.
func TestCommitOutOfSpace(t *testing.T) {
	t.Parallel()
	dir := smallFS(t, "16m")
	d := startDaemon(t, daemonOpts{dir: dir})
	c := d.client(t)
	ctx := context.Background()
	for i := range 20 {
		if _, err := c.StateSave(ctx, "ops", fmt.Sprintf("k%02d", i), []byte(strings.Repeat(fmt.Sprint(i), 20<<10))); err != nil {
			t.Fatal(err)
		}
	}
	// Fill what is left, as something else on the disk would.
	fill := filepath.Join(dir, "data", "filler")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	wantNoSpace := func(what string, err error) {
		t.Helper()
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != proto.ENOSPC {
			t.Errorf("%s on a full disk: %v, want ENOSPC", what, err)
		}
	}
	_, err = c.Commit(ctx, proto.CommitArgs{Agent: "ops", Message: "full"})
	wantNoSpace("commit", err)
	_, err = c.Fork(ctx, proto.ForkArgs{Agent: "ops", Name: "ops2"})
	wantNoSpace("fork", err)
	os.Remove(fill)
	if _, err := c.Commit(ctx, proto.CommitArgs{Agent: "ops", Message: "room again"}); err != nil {
		t.Errorf("commit once space is freed: %v", err)
	}
}
