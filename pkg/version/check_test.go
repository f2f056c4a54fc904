package version

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckFindsMissingObjects: Check passes an intact repository, and
// names the blob and the tree whose pack was deleted, with their paths.
func TestCheckFindsMissingObjects(t *testing.T) {
	r := open(t)
	change(t, r, map[string][]byte{"agents/a/state/k1": []byte("one"), "agents/b/state/k": []byte("b")}, "first")
	packs := func() map[string]bool {
		m := map[string]bool{}
		ps, _ := filepath.Glob(filepath.Join(r.gitDir, "objects", "pack", "*.pack"))
		for _, p := range ps {
			m[p] = true
		}
		return m
	}
	before := packs()
	change(t, r, map[string][]byte{"agents/a/state/k2": []byte("two")}, "second")
	if d, err := r.Check(); err != nil || !d.OK() || d.Objects < 8 {
		t.Fatalf("intact: %v %v", d, err)
	}
	if len(before) == 0 || len(packs()) == len(before) {
		t.Fatalf("the commits wrote no packs of their own: %v", packs())
	}
	// The first commit's packs deleted: HEAD's commit and its own tree are
	// there, its parent and the blob it kept from it are not. Dropped
	// from the disk and from the repository's view of it, as a daemon
	// started on it would see it.
	for p := range before {
		os.Remove(p)
		os.Remove(strings.TrimSuffix(p, ".pack") + ".idx")
	}
	dir := r.dir
	r.Close()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, err := r.Check()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HEAD's parent commit", "blob 43dd47ea691c90a5fa7827892c70241913351963 of agents/a/state/k1", "of agents/b/:"} {
		if !strings.Contains(d.String(), want) {
			t.Errorf("the first commit's pack deleted: the check does not name %q: %v", want, d)
		}
	}
}

// BenchmarkCheck is the cost of Check on a repository whose HEAD holds
// 100k files in 100 folders: what a start adds to read HEAD's trees and
// look up each blob.
func BenchmarkCheck(b *testing.B) {
	r := open(b)
	tx, err := r.Begin()
	if err != nil {
		b.Fatal(err)
	}
	for i := range 100_000 {
		if err := tx.Put(fmt.Sprintf("agents/a%d/state/k%d", i%100, i), fmt.Appendf(nil, "value %d", i)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := tx.Commit(opts("many")); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		d, err := r.Check()
		if err != nil || !d.OK() {
			b.Fatal(d, err)
		}
	}
}
