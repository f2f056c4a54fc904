package fs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/mountinfo"
)

// Options say where and how to mount.
type Options struct {
	// Dir is the mount point; it is created if missing.
	Dir string
	// AllowOther lets uids other than the daemon's reach the mount (the
	// kernel refuses them otherwise, before oxiosd is asked). Set it when
	// the configuration grants other users access: oxiosd then checks
	// every request itself. As a user it needs user_allow_other in
	// /etc/fuse.conf; without it the mount is made without.
	AllowOther bool
	// Debug logs every FUSE request at debug level.
	Debug bool
	// Log receives the mount's messages.
	Log *slog.Logger
}

// Mount is a mounted view.
type Mount struct {
	fs     *FS
	server *fuse.Server
	dir    string
	conn   uint32 // the FUSE connection (minor device), to abort it
}

// Available reports why the mount cannot work here, or nil.
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: %w", err)
	}
	if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			if _, err2 := exec.LookPath("fusermount"); err2 != nil {
				return errors.New("fusermount3 not found (install the fuse3 package)")
			}
		}
	}
	return nil
}

// New mounts the view of k at o.Dir and serves it until Close. A stale
// mount left there by a daemon that died is cleared first. As root the
// mount is made directly; as a user through fusermount3.
func New(k Kernel, o Options) (*Mount, error) {
	log := o.Log
	if log == nil {
		log = slog.Default()
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := clearStale(dir, log); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f := newFS(k, log)
	self, err := k.Identify(f.uid, f.gid, int32(os.Getpid()))
	if err != nil {
		return nil, err
	}
	f.self = self
	entry, attr, neg := entryTimeout, attrTimeout, negativeTimeout
	opts := &fusefs.Options{
		EntryTimeout:    &entry,
		AttrTimeout:     &attr,
		NegativeTimeout: &neg,
		UID:             f.uid,
		GID:             f.gid,
		// Every node reports its mode: a file chmod'ed to 0 is shown so,
		// not as go-fuse's default 0644.
		NullPermissions: true,
		MountOptions: fuse.MountOptions{
			FsName:      "oxios",
			Name:        "oxios",
			AllowOther:  o.AllowOther,
			DirectMount: os.Geteuid() == 0,
			// ENOSYS once, and the kernel stops asking: ls -l would
			// otherwise cost two round trips per file for security
			// labels and ACLs.
			DisableXAttrs: true,
			// Requests up to 1 MiB (the kernel's max_pages limit).
			MaxWrite:      1 << 20,
			MaxBackground: 64,
			// O_TRUNC arrives with the open instead of as a separate
			// truncate, which would save an empty value first: the new
			// content must replace the old at close, whole.
			// Writers use direct I/O (their working copy is the daemon's,
			// see pkg/vfs/state.go); DIRECT_IO_ALLOW_MMAP (Linux 6.6) lets them
			// mmap all the same: the kernel writes the mapping's dirty
			// pages back as writes to the working copy, at msync, munmap
			// or close at the latest. Older kernels refuse a writable
			// shared mapping with ENODEV.
			ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_DIRECT_IO_ALLOW_MMAP,
			Debug:             o.Debug,
			Logger:            slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
		Logger: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	raw := fusefs.NewNodeFS(f.root, opts)
	f.subscribe()
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil && o.AllowOther {
		log.Warn("mounting for other users failed; mounting for oxiosd's uid only (add user_allow_other to /etc/fuse.conf)", "err", err)
		opts.MountOptions.AllowOther = false
		server, err = fuse.NewServer(raw, dir, &opts.MountOptions)
	}
	if err != nil {
		f.sub.Close()
		return nil, fmt.Errorf("mounting %s: %w", dir, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		server.Unmount()
		f.sub.Close()
		return nil, fmt.Errorf("mounting %s: %w", dir, err)
	}
	m := &Mount{fs: f, server: server, dir: dir}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err == nil {
		m.conn = unix.Minor(st.Dev)
	}
	f.wg.Add(1)
	go f.watch()
	return m, nil
}

// Dir is the mount point.
func (m *Mount) Dir() string { return m.dir }

// Close unmounts (lazily if the mount is busy, and then cuts off the
// processes still using it), saves what closes left unsaved and waits
// until every save of the mount is durable. Call it before the kernel is
// closed.
func (m *Mount) Close() error {
	unmounted := make(chan error, 1)
	go func() { unmounted <- m.server.Unmount() }()
	var err error
	select {
	case err = <-unmounted:
	case <-time.After(2 * time.Second):
		// Gone from this namespace, but a live run's sandbox binds its
		// agent's folder of the mount in a namespace of its own, and the
		// kernel keeps the connection (and go-fuse waits for it) as long
		// as that run lives: oxiosd stopped only when the run ended (60 s
		// for a detached sleep 60). Stop serving it instead: what the run
		// asks from now on fails with ENOTCONN, and the connection ends
		// when oxiosd exits (or at once, where fusectl is mounted).
		m.fs.log.Info("the mount is still bound in runs' sandboxes; no longer serving it", "mount", m.dir)
		m.fs.shut()
		abort(m.conn)
	}
	if err != nil {
		// A process works in the mount (a shell's cwd, an open file).
		// Detach it; whatever the processes inside ask from now on fails
		// with ENOTCONN, and the connection ends when oxiosd exits (or at
		// once, where fusectl is mounted).
		m.fs.log.Warn("mount busy; detaching it", "mount", m.dir, "err", err)
		m.fs.shut()
		err = detach(m.dir)
		abort(m.conn)
	}
	m.fs.shut()
	close(m.fs.stop)
	m.fs.sub.Close()
	m.fs.wg.Wait()
	m.fs.states.Close()
	return err
}

// detach unmounts dir lazily: gone from the namespace now, released once
// no process uses it.
func detach(dir string) error {
	if os.Geteuid() == 0 {
		return unix.Unmount(dir, unix.MNT_DETACH)
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if p, err := exec.LookPath(bin); err == nil {
			out, err := exec.Command(p, "-u", "-z", dir).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s -u -z %s: %v: %s", bin, dir, err, strings.TrimSpace(string(out)))
			}
			return nil
		}
	}
	return errors.New("fusermount3 not found")
}

// abort ends a FUSE connection (root only, through fusectl): processes
// still inside a detached mount get ENOTCONN instead of waiting on a
// daemon that is leaving.
func abort(conn uint32) {
	if conn == 0 {
		return
	}
	_ = os.WriteFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", conn), []byte("1"), 0)
}

// clearStale unmounts what a dead daemon left at dir: a FUSE mount whose
// server is gone answers ENOTCONN. Anything else mounted there is left
// alone and refused.
func clearStale(dir string, log *slog.Logger) error {
	for range 8 { // mounts may be stacked
		fstype, ok, err := mountedAt(dir)
		if err != nil || !ok {
			return err
		}
		if !strings.HasPrefix(fstype, "fuse") {
			return fmt.Errorf("%s is already a mount point (%s)", dir, fstype)
		}
		switch err := probe(dir); {
		case errors.Is(err, syscall.ENOTCONN), errors.Is(err, syscall.ECONNABORTED):
			if err := detach(dir); err != nil {
				return fmt.Errorf("clearing the stale mount at %s: %w", dir, err)
			}
			log.Info("cleared a stale mount left by a previous oxiosd", "mount", dir)
		case err == nil:
			return fmt.Errorf("%s is already mounted (%s): is another oxiosd running?", dir, fstype)
		default:
			return fmt.Errorf("%s is a FUSE mount that does not answer: %w", dir, err)
		}
	}
	return fmt.Errorf("%s: cannot clear the mounts stacked there", dir)
}

// probe asks the file system mounted at dir for its statistics, giving
// up after a while (a hung FUSE server would block it forever). statfs
// always reaches the server, where a stat may be answered from the
// kernel's cache even after the server died.
func probe(dir string) error {
	done := make(chan error, 1)
	go func() {
		var st unix.Statfs_t
		done <- unix.Statfs(dir, &st)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mountedAt reports whether dir is a mount point, and its type (the
// visible mount there).
func mountedAt(dir string) (fstype string, ok bool, err error) {
	m, ok, err := mountinfo.At(dir)
	return m.FSType, ok, err
}
