package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProbeRoot(t *testing.T) {
	dir := t.TempDir()
	f := ProbeRoot(filepath.Join(dir, "sandbox"))
	if st, err := os.Stat(filepath.Join(dir, "sandbox")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the root is not made 0700: %v %v", st, err)
	}
	if len(f.Missing) != len(Probe().Missing) {
		t.Fatalf("a root made adds nothing missing: %v", f.Missing)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f = ProbeRoot(filepath.Join(file, "sandbox"))
	if f.Namespaces || len(f.Missing) == 0 || !strings.HasPrefix(f.Missing[len(f.Missing)-1], "sandbox root: ") {
		t.Fatalf("no root: %+v", f)
	}
}
