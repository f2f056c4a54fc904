package vfs

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// TestAuditLog: /audit/log's size is the caller's view of the log, and
// grows with it; a reader reads it whole, a reader at its end gets what
// was appended since, and one that seeks back starts over. It does not
// open for writing.
func TestAuditLog(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	save := func(key string) {
		t.Helper()
		if _, err := w.k.StateSave(ctx, w.c, proto.StateSaveArgs{Agent: "ops", Key: key, Value: "v"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	save("a")
	log := w.l.AuditLog()
	a1, err := log.Stat(ctx, w.c)
	if err != nil || a1.Size == 0 || a1.Mode != 0o444 {
		t.Fatalf("stat: %+v %v", a1, err)
	}
	h, err := log.Open(w.c, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	read := func(off int64) string {
		var out []byte
		buf := make([]byte, 100)
		for {
			n, err := h.Read(ctx, buf, off+int64(len(out)))
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return string(out)
			}
			out = append(out, buf[:n]...)
		}
	}
	all := read(0)
	if int64(len(all)) != a1.Size || !strings.HasSuffix(all, "\n") || !strings.Contains(all, `"op":"state.save"`) {
		t.Fatalf("read %d bytes, stat %d:\n%s", len(all), a1.Size, all)
	}
	save("b")
	a2, _ := log.Stat(ctx, w.c)
	if a2.Size <= a1.Size || a2.Mtime.Before(a1.Mtime) {
		t.Fatalf("after a save: %+v, before %+v", a2, a1)
	}
	more := read(int64(len(all)))
	if int64(len(all)+len(more)) != a2.Size || !strings.Contains(more, `ops:b`) {
		t.Fatalf("appended since (%d bytes, size %d): %q", len(more), a2.Size, more)
	}
	if again := read(0); again != all+more {
		t.Fatalf("read again from 0: %q", again)
	}
	if _, err := log.Open(w.c, syscall.O_WRONLY); code(err) != proto.EROFS {
		t.Fatalf("open to write: %v", err)
	}
}
