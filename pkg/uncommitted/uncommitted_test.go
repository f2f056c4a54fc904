package uncommitted

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The uncommitted set lives in DATA/index/uncommitted plus the changes
// since the last checkpoint. Against a plain set, through random marks,
// commits (clean), checkpoints (saveDirty, some failing) and reads.
// Run as the daemon runs it, and with commits that rewrite the file
// (compactAfter lowered to a few paths).
func TestUncommittedSetMatchesModel(t *testing.T) {
	t.Run("checkpoints", testSetMatchesModel)
	t.Run("compacting", func(t *testing.T) {
		defer func(n int) { compactAfter = n }(compactAfter)
		compactAfter = 3
		testSetMatchesModel(t)
	})
}

func testSetMatchesModel(t *testing.T) {
	file := filepath.Join(t.TempDir(), "index", "uncommitted")
	k, err := Open(file, false)
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	path := func() string {
		return fmt.Sprintf("agents/a%d/mem/episodic/%03d.md", rng.IntN(3), rng.IntN(200))
	}
	check := func(step int, prefix string) {
		t.Helper()
		got, err := k.Under(prefix)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		var want []string
		for p, ok := range model {
			if ok && strings.HasPrefix(p, prefix) {
				want = append(want, p)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d, under %q: %d paths %v..., want %d %v...", step, prefix, len(got), got[:min(3, len(got))], len(want), want[:min(3, len(want))])
		}
	}
	saves, failed := 0, 0
	for step := 0; step < 4000; step++ {
		switch r := rng.IntN(100); {
		case r < 50:
			var ps []string
			for range 1 + rng.IntN(5) {
				p := path()
				ps = append(ps, p)
				model[p] = true
			}
			k.Mark(ps...)
		case r < 75:
			var ps []string
			for range 1 + rng.IntN(5) {
				p := path()
				ps = append(ps, p)
				model[p] = false
			}
			k.Clean(ps)
		case r < 85:
			// A checkpoint; one in three cannot write the file.
			block := rng.IntN(3) == 0
			if block {
				if err := os.MkdirAll(filepath.Join(file+".tmp", "x"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			err := k.Save()
			if block {
				if err == nil {
					t.Fatalf("step %d: saving over a folder succeeded", step)
				}
				failed++
				os.RemoveAll(file + ".tmp")
			} else if err != nil {
				t.Fatalf("step %d: %v", step, err)
			} else {
				saves++
			}
		default:
			check(step, [...]string{"agents/", "agents/a1/", "agents/a2/mem/"}[rng.IntN(3)])
		}
	}
	check(-1, "agents/")
	if saves == 0 || failed == 0 {
		t.Fatalf("%d saves, %d failed: the test did not exercise both", saves, failed)
	}
	// Memory holds only what changed since the last checkpoint.
	if err := k.Save(); err != nil {
		t.Fatal(err)
	}
	if n := k.Pending(); n != 0 {
		t.Fatalf("%d paths in memory after a checkpoint", n)
	}
	check(-2, "agents/")
}

// TestCleanCompacts: a commit of many paths takes them out of the file at
// once (not at the next checkpoint), so later reads do not go through
// them and memory does not hold them; the set is the same, also when
// opened again from the file.
func TestCleanCompacts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "index", "uncommitted")
	k, err := Open(file, false)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for i := range 3 * compactAfter {
		all = append(all, fmt.Sprintf("agents/a/state/k%06d", i))
	}
	k.Mark(all...)
	if err := k.Save(); err != nil {
		t.Fatal(err)
	}
	k.Mark("agents/b/state/new")
	k.Clean(all[:2*compactAfter])
	if n := k.Pending(); n != 1 {
		t.Fatalf("%d paths in memory after a commit of %d, want the 1 marked since", n, 2*compactAfter)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 1+compactAfter {
		t.Fatalf("the file holds %d lines, want the header and %d paths", lines, compactAfter)
	}
	want := append(slices.Clone(all[2*compactAfter:]), "agents/b/state/new")
	if got, _ := k.Under("agents/"); !slices.Equal(got, want) {
		t.Fatalf("under agents/: %d paths, want %d", len(got), len(want))
	}
	// What a restart finds: the file's paths (the journal marks the rest
	// again).
	k2, err := Open(file, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := k2.Under("agents/"); !slices.Equal(got, all[2*compactAfter:]) {
		t.Fatalf("after reopening: %d paths, want %d", len(got), compactAfter)
	}
}
