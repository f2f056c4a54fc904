package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOverlay runs a sandbox with a host folder at /work through an
// overlay: the run sees the folder, finds an overlay there, edits, adds
// and deletes files, and the host folder is as it was; the upper layer
// holds the changes (a deletion as a whiteout).
func TestOverlay(t *testing.T) {
	dir := t.TempDir()
	lower := filepath.Join(dir, "project")
	os.Mkdir(lower, 0o755)
	os.WriteFile(filepath.Join(lower, "a"), []byte("old\n"), 0o644)
	os.WriteFile(filepath.Join(lower, "b"), []byte("gone\n"), 0o644)
	ws := filepath.Join(dir, "ws")
	os.Mkdir(ws, 0o700)
	t.Cleanup(func() { RemoveAll(ws) })
	upper, work := filepath.Join(ws, ".upper"), filepath.Join(ws, ".work")
	var st syscall.Stat_t
	if err := syscall.Stat(lower, &st); err != nil {
		t.Fatal(err)
	}
	out, status := runWith(t, ws, `
set -e
findmnt -n -o FSTYPE /work
cat /work/a
echo new > /work/a
rm /work/b
echo added > /work/c
mkdir /work/d
ls -a /work | tr '\n' ' '
`, func(s *Spec) {
		// The upper layer in the workspace, which the overlay covers.
		for _, d := range []string{upper, work} {
			os.Mkdir(d, 0o700)
			if !s.UserNS {
				os.Chown(d, int(s.UID), int(s.GID))
			}
		}
		s.Overlay = &Overlay{Lower: lower, Upper: upper, Work: work, UID: st.Uid, GID: st.Gid}
		s.Dir = WorkDir
	})
	if !status.Exited || status.Code != 0 {
		t.Fatalf("status %+v, output:\n%s", status, out)
	}
	if !strings.HasPrefix(out, "overlay\nold\n") {
		t.Errorf("want an overlay at /work showing the folder, got:\n%s", out)
	}
	if strings.Contains(out, ".upper") {
		t.Errorf("the run sees the upper layer:\n%s", out)
	}
	for name, want := range map[string]string{"a": "old\n", "b": "gone\n"} {
		if b, err := os.ReadFile(filepath.Join(lower, name)); err != nil || string(b) != want {
			t.Errorf("host's %s changed: %q %v", name, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(lower, "c")); err == nil {
		t.Error("host has the run's new file")
	}
	if b, _ := os.ReadFile(filepath.Join(upper, "a")); string(b) != "new\n" {
		t.Errorf("upper a = %q", b)
	}
	var wst syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(upper, "b"), &wst); err != nil || wst.Mode&syscall.S_IFMT != syscall.S_IFCHR || wst.Rdev != 0 {
		t.Errorf("upper b is no whiteout: %+v %v", wst, err)
	}
}
