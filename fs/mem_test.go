package fs

import (
	"strings"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/memory"
)

func TestMemNames(t *testing.T) {
	id := memory.NewID(time.Now())
	if got, ok := memID(id + ".md"); !ok || got != id {
		t.Fatalf("memID(%s.md) = %q, %v", id, got, ok)
	}
	for _, name := range []string{"note.md", id, id + ".txt", strings.ToLower(id) + ".md"} {
		if _, ok := memID(name); ok {
			t.Errorf("memID(%q) ok", name)
		}
	}
	for name, ok := range map[string]bool{"note.md": true, id + ".md": true, ".md": false, ".note.md.swp": false,
		".note.md": false, "note.md~": false, "#note.md#": false, "4913": false, "note.txt": false} {
		if newMemName(name) != ok {
			t.Errorf("newMemName(%q) = %v", name, !ok)
		}
	}
}
