package runspec

import (
	"os"
	"path/filepath"
	"syscall"

	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/sandbox"
)

// What a run on a host folder (ox-spawn --work, issue 48) is started
// with: the folder, checked, and the overlay its sandbox mounts at /work.

// WorkFolder is the host folder dir asked for as a run's work, made
// absolute, clean and with its links resolved, which the policy's
// work.allow is checked against: a folder, and none of oxiosd's own
// files (its data, socket or mount) in it or around it.
func WorkFolder(h Host, dir string) (string, *proto.Error) {
	if !filepath.IsAbs(dir) {
		return "", proto.Errorf(proto.EINVAL, "work folder %q: want an absolute path (ox-spawn makes it so)", dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", proto.Errorf(proto.ENOENT, "work folder %s: %v", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.IsDir() {
		return "", proto.Errorf(proto.ENOTDIR, "work folder %s: not a folder", dir)
	}
	if real == "/" || overlaps(real, h.Data) || overlaps(real, h.Socket) || (h.Mount != "" && overlaps(real, h.Mount)) {
		return "", proto.Errorf(proto.EPERM, "work folder %s would show oxiosd's own files (its data, socket or mount): refused", dir)
	}
	return real, nil
}

// WorkOverlay is the overlay of a run whose workspace is ws on the host
// folder dir: its upper layer and the overlay's work folder in the
// workspace (on the run's own filesystem of limits.disk bytes, when
// oxiosd is root), its lower's owner the one the run edits as.
func WorkOverlay(h Host, dir, ws string) (*sandbox.Overlay, *proto.Error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return nil, proto.Errorf(proto.ENOENT, "work folder %s: %v", dir, err)
	}
	return &sandbox.Overlay{Lower: dir, Upper: filepath.Join(ws, ".upper"), Work: filepath.Join(ws, ".overlay"), UID: st.Uid, GID: st.Gid}, nil
}
