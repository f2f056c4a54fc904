package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
)

// Listener returns the socket to serve: systemd's when socket-activated
// (LISTEN_FDS), otherwise a new one at path. A socket on which another
// daemon answers is refused; a stale socket file (nobody listening) is
// removed. The new socket is 0600, or 0660 owned by gid when gid >= 0.
// activated reports whether systemd owns the socket (then its file is not
// ours to remove).
func Listener(path string, gid int) (ln net.Listener, activated bool, err error) {
	lns, err := activation.Listeners()
	if err != nil {
		return nil, false, fmt.Errorf("socket activation: %w", err)
	}
	for _, l := range lns {
		// Entries for fds that are not listeners are nil.
		if ul, ok := l.(*net.UnixListener); ok && ul != nil {
			return ul, true, nil
		}
	}
	if len(lns) > 0 {
		return nil, false, errors.New("socket activation: no unix stream socket among the inherited fds")
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, false, err
	}
	if _, err := os.Lstat(path); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var d net.Dialer
		c, derr := d.DialContext(ctx, "unix", path)
		cancel()
		if derr == nil {
			c.Close()
			return nil, false, fmt.Errorf("another oxiosd is already serving on %s", path)
		}
		// Nobody answers: a crashed daemon left it behind.
		if err := os.Remove(path); err != nil {
			return nil, false, fmt.Errorf("removing stale socket: %w", err)
		}
	}
	// Create it private, then open it up as configured: no window in which
	// another user could connect.
	old := umask(0o177)
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	umask(old)
	if err != nil {
		return nil, false, err
	}
	ul.SetUnlinkOnClose(true)
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			ul.Close()
			return nil, false, fmt.Errorf("socket_group: %w", err)
		}
		if err := os.Chmod(path, 0o660); err != nil {
			ul.Close()
			return nil, false, err
		}
	}
	return ul, false, nil
}

// ListenRun serves a run's own socket at path (in a folder only oxiosd
// reaches, bound into the run's sandbox), connectable by uid only. Who
// connects is still found by Identify: the socket is where a sandbox can
// reach oxiosd, not what names it. Closing the result stops serving it and
// removes the file.
func (s *Server) ListenRun(path string, uid uint32) (io.Closer, error) {
	ul, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ul.SetUnlinkOnClose(true)
	if err := os.Chown(path, int(uid), int(uid)); err != nil {
		ul.Close()
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ul.Close()
		return nil, err
	}
	go s.Serve(ul)
	return ul, nil
}
