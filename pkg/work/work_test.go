package work

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func write(t *testing.T, p, s string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is a host folder and an upper layer as overlayfs leaves it: a
// file changed, one added, one deleted (a whiteout), a folder removed,
// a binary file added.
func fixture(t *testing.T) (s Store, host, upper string) {
	dir := t.TempDir()
	host, upper = filepath.Join(dir, "host"), filepath.Join(dir, "upper")
	write(t, filepath.Join(host, "main.c"), "int main(){return 1;}\n")
	write(t, filepath.Join(host, "README"), "readme\n")
	write(t, filepath.Join(host, "old", "x"), "x\n")
	write(t, filepath.Join(host, "keep"), "keep\n")
	s = Store{Root: filepath.Join(dir, "pending")}
	if err := s.Begin("r1", "dev", host, time.Now()); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(upper, "main.c"), "int main(){return 0;}\n")
	write(t, filepath.Join(upper, "keep"), "keep\n") // copied up, not changed
	write(t, filepath.Join(upper, "src", "new.c"), "void f(){}\n")
	os.WriteFile(filepath.Join(upper, "blob"), []byte{0, 1, 2, 0xff}, 0o755)
	for _, wo := range []string{"README", "old"} {
		if err := unix.Mknod(filepath.Join(upper, wo), unix.S_IFCHR, 0); err != nil {
			t.Skipf("a whiteout needs mknod: %v", err)
		}
	}
	return s, host, upper
}

func TestHarvestDiffApply(t *testing.T) {
	s, host, upper := fixture(t)
	m, err := s.Harvest("r1", upper, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range m.Changes {
		got = append(got, c.Op+" "+c.Path)
	}
	want := "delete README|add blob|modify main.c|rmdir old|delete old/x|mkdir src|add src/new.c"
	if strings.Join(got, "|") != want {
		t.Fatalf("changes %q, want %q", strings.Join(got, "|"), want)
	}
	patch, err := s.Patch("r1")
	if err != nil || Digest(patch) != m.Digest {
		t.Fatalf("patch %v, digest %s vs %s", err, Digest(patch), m.Digest)
	}
	// The patch applies with git to a copy of the host folder.
	clean := filepath.Join(t.TempDir(), "clean")
	if out, err := exec.Command("cp", "-a", host, clean).CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	cmd := exec.Command("git", "apply", "--check", "-")
	cmd.Dir, cmd.Stdin = clean, strings.NewReader(string(patch))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply --check: %v %s\n%s", err, out, patch)
	}
	st, err := Stat(patch)
	if err != nil || !strings.Contains(string(st), "5 files changed") {
		t.Errorf("stat %v:\n%s", err, st)
	}
	// A conflict: the host's main.c changed after the run exited.
	time.Sleep(10 * time.Millisecond)
	write(t, filepath.Join(host, "main.c"), "int main(){return 2;}\n")
	cs, err := s.Apply(m, false, time.Now())
	if err != nil || len(cs) != 1 || cs[0].Path != "main.c" {
		t.Fatalf("conflicts %v, err %v", cs, err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "main.c")); string(b) != "int main(){return 2;}\n" {
		t.Fatal("a refused apply wrote")
	}
	if _, err := os.Stat(filepath.Join(host, "README")); err != nil {
		t.Fatal("a refused apply deleted")
	}
	if cs, err := s.Apply(m, true, time.Now()); err != nil || cs != nil {
		t.Fatalf("forced: %v %v", cs, err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "main.c")); string(b) != "int main(){return 0;}\n" {
		t.Errorf("main.c = %q", b)
	}
	for _, gone := range []string{"README", "old"} {
		if _, err := os.Lstat(filepath.Join(host, gone)); err == nil {
			t.Errorf("%s still there", gone)
		}
	}
	if fi, err := os.Stat(filepath.Join(host, "blob")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("blob: %v %v", fi, err)
	}
	if m2, _ := s.Load("r1"); m2.State != Applied {
		t.Errorf("state %s", m2.State)
	}
}

// TestApplyNoEscape: a link in the folder, put where the run's change
// goes, does not lead the apply (oxiosd, as root) out of the folder.
func TestApplyNoEscape(t *testing.T) {
	dir := t.TempDir()
	host, outside := filepath.Join(dir, "host"), filepath.Join(dir, "outside")
	os.MkdirAll(filepath.Join(host, "sub"), 0o755)
	os.MkdirAll(outside, 0o755)
	s := Store{Root: filepath.Join(dir, "pending")}
	if err := s.Begin("r2", "dev", host, time.Now()); err != nil {
		t.Fatal(err)
	}
	upper := filepath.Join(dir, "upper")
	write(t, filepath.Join(upper, "sub", "x"), "the run's\n")
	m, err := s.Harvest("r2", upper, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// Someone swaps the folder sub for a link out of the folder.
	os.Remove(filepath.Join(host, "sub"))
	if err := os.Symlink(outside, filepath.Join(host, "sub")); err != nil {
		t.Fatal(err)
	}
	s.Apply(m, true, time.Now())
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("the apply wrote through a link, out of the folder")
	}
}

// TestView: the view of pending work is the host folder with the run's
// changes over it, and no link leads out of it.
func TestView(t *testing.T) {
	s, host, upper := fixture(t)
	if err := os.Symlink("/etc", filepath.Join(host, "out")); err != nil {
		t.Fatal(err)
	}
	m, err := s.Harvest("r1", upper, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	names := func(rel string) string {
		t.Helper()
		ents, _, dir, err := s.View(m, rel)
		if err != nil || !dir {
			t.Fatalf("view of %s: %v, folder %v", rel, err, dir)
		}
		var ns []string
		for _, e := range ents {
			n := e.Name
			if e.Dir {
				n += "/"
			}
			ns = append(ns, n)
		}
		return strings.Join(ns, " ")
	}
	if got := names("."); got != "blob keep main.c src/" {
		t.Errorf("the top of the view: %q", got)
	}
	if got := names("src"); got != "new.c" {
		t.Errorf("src/ of the view: %q", got)
	}
	for rel, want := range map[string]string{"main.c": "int main(){return 0;}\n", "keep": "keep\n", "src/new.c": "void f(){}\n", "blob": "\x00\x01\x02\xff"} {
		_, data, dir, err := s.View(m, rel)
		if err != nil || dir || string(data) != want {
			t.Errorf("view of %s: %q %v %v, want %q", rel, data, dir, err, want)
		}
	}
	for _, rel := range []string{"README", "old", "old/x", "out", "out/passwd", "../pending/r1/work.json", "/etc/passwd", "nothing", "main.c\x00x"} {
		if _, data, _, err := s.View(m, rel); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("view of %s: %q %v, want not there", rel, data, err)
		}
	}
}
