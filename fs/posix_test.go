package fs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
)

// testMount is a kernel on a temp dir with its view mounted, in this
// process (as go-fuse's own tests do: the test drives the mount from its
// goroutine, the server answers from others).
type testMount struct {
	k   *kernel.Kernel
	m   *Mount
	dir string
}

// watchdog aborts the FUSE connection if a test is stuck on the mount for
// longer than d, so that it fails with ENOTCONN instead of hanging the run.
const watchdog = 60 * time.Second

func mountForTest(t *testing.T, edit func(*config.Config)) *testMount {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	base := t.TempDir()
	cfg := config.Default()
	cfg.Data = filepath.Join(base, "data")
	if edit != nil {
		edit(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	k, err := kernel.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "mnt")
	m, err := New(k, Options{Dir: dir, Log: log})
	if err != nil {
		k.Close()
		t.Fatal(err)
	}
	tm := &testMount{k: k, m: m, dir: dir}
	stuck := time.AfterFunc(watchdog, func() {
		t.Errorf("the mount did not answer within %s: aborting it", watchdog)
		abort(m.conn)
	})
	t.Cleanup(func() {
		stuck.Stop()
		if err := m.Close(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		if err := k.Close(); err != nil {
			t.Errorf("kernel close: %v", err)
		}
		if _, mounted, _ := mountedAt(dir); mounted {
			t.Errorf("%s is still mounted after Close", dir)
		}
	})
	return tm
}

// posixSkips are the posixtest cases that cannot apply to agent state,
// and why.
var posixSkips = map[string]string{
	"Link":             "a key has exactly one name: hard links are refused with EPERM",
	"LinkUnlinkRename": "builds a rename from link(2), refused with EPERM (a key has one name); rename(2) itself is tested by the Rename* cases",
	"SymlinkReadlink":  "state holds values, not links: symlink(2) is refused with EPERM",
	"SetattrSymlink":   "needs a symlink; state holds values, not links (EPERM)",
	"OpenSymlinkRace":  "swaps a file with a symlink; state holds values, not links (EPERM)",
	// The loopback passes it because its locks are open-file-description
	// locks on its backing files.
	"FcntlFlockLocksFile": "expects two descriptors of one process to conflict; the mount leaves POSIX locks to the kernel, whose locks never conflict within a process (POSIX)",
}

// TestPosix runs go-fuse's conformance suite against /agent/NAME/state of
// a real mount, each case in a fresh agent's empty state folder.
func TestPosix(t *testing.T) {
	tm := mountForTest(t, nil)
	names := make([]string, 0, len(posixtest.All))
	for n := range posixtest.All {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if why, ok := posixSkips[name]; ok {
				t.Skip(why)
			}
			agent := filepath.Join(tm.dir, "agent", "p-"+strings.ToLower(name))
			if err := os.Mkdir(agent, 0o755); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, filepath.Join(agent, "state"))
		})
	}
}
