package memindex

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/memory"
)

func TestFilesAndRebuild(t *testing.T) {
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	files := map[string][]byte{}
	var keys []string
	for i, text := range []string{"the deploy key rotates monthly", "backups run at night", "the cat sat"} {
		m := &memory.Memory{ID: memory.NewID(now.Add(time.Duration(i) * time.Second)), Kind: memory.Semantic, Created: now, Importance: 0.5, Text: text}
		files[m.Key()] = m.Encode()
		keys = append(keys, m.Key())
	}
	bad := memory.Semantic + "/" + memory.NewID(now.Add(time.Hour)) + ".md"
	files[bad] = []byte("not a memory")
	keys = append(keys, bad, "not-a-memory-key")
	var skipped []string
	ix, n, err := Rebuild(keys, func(key string) ([]byte, error) {
		if v, ok := files[key]; ok {
			return v, nil
		}
		return nil, errors.New("no file")
	}, func(key string, err error) { skipped = append(skipped, key) })
	if err != nil || n != 3 || ix.Len() != 3 {
		t.Fatalf("rebuild: %d memories (index %v), %v", n, ix, err)
	}
	if len(skipped) != 1 || skipped[0] != bad {
		t.Errorf("skipped %v", skipped)
	}

	dir := filepath.Join(t.TempDir(), "recall")
	f := NewFiles(dir)
	if err := f.Save("ops", ix, 42); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bad"), []byte("damaged"), 0o600)
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o600)
	g := NewFiles(dir)
	g.Prefetch()
	if as := g.Agents(); len(as) != 2 {
		t.Errorf("agents %v, want ops and bad (not a name an agent may have)", as)
	}
	got, seq, err := g.Load("ops")
	if err != nil || seq != 42 || got.Len() != 3 {
		t.Fatalf("load: %v %d %v", got, seq, err)
	}
	if _, _, err := g.Load("bad"); err == nil {
		t.Error("a damaged file loads")
	}
	g.Done()
	if _, _, err := g.Load("nosuch"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
