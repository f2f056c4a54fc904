package vfs

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

func TestDraftNames(t *testing.T) {
	l := New(nil)
	mem, inbox := l.MemFolder("ops", "semantic", 64), l.Inbox("ops", 64)
	id := memory.NewID(time.Now())
	if got, ok := mem.IDName(id + ".md"); !ok || got != id {
		t.Fatalf("memory IDName(%s.md) = %q, %v", id, got, ok)
	}
	for _, name := range []string{"note.md", id, id + ".txt", strings.ToLower(id) + ".md", "m12.md"} {
		if _, ok := mem.IDName(name); ok {
			t.Errorf("memory IDName(%q) ok", name)
		}
	}
	if got, ok := inbox.IDName("m12.md"); !ok || got != "m12" {
		t.Errorf("message IDName(m12.md) = %q %v", got, ok)
	}
	for _, name := range []string{"m.md", "mx1.md", "m12", id + ".md"} {
		if _, ok := inbox.IDName(name); ok {
			t.Errorf("message IDName(%q) ok", name)
		}
	}
	for name, ok := range map[string]bool{"note.md": true, id + ".md": true, ".md": false, ".note.md.swp": false,
		".note.md": false, "note.md~": false, "#note.md#": false, "4913": false, "note.txt": false} {
		if NewName(name) != ok {
			t.Errorf("NewName(%q) = %v", name, !ok)
		}
	}
}

// TestDraftFolders: a folder of drafts lists what the kernel holds and
// the drafts being written; a draft's name is taken while it is written
// and gone once it is submitted, when the kernel's ID.md is there; an
// unlink discards a draft, forgets a memory, and leaves a message; an
// inbox's slot creates and does nothing else.
func TestDraftFolders(t *testing.T) {
	w := open(t)
	ctx := context.Background()
	mem := w.l.MemFolder("ops", "semantic", 64)

	d, h, err := mem.Create(ctx, w.c, "note.md", syscall.O_WRONLY, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{{"note.md", "EEXIST"}, {".note.md.swp", "EINVAL"}, {"4913", "EINVAL"}} {
		if _, _, err := mem.Create(ctx, w.c, tc.name, syscall.O_WRONLY, false); errName(err) != tc.want {
			t.Errorf("create %s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if e, err := mem.Lookup(ctx, w.c, "note.md", false); err != nil || e.Draft != d {
		t.Fatalf("lookup of the draft: %+v %v", e, err)
	}
	if _, err := h.Write([]byte("the backups run at 2am\n"), 0); err != nil {
		t.Fatal(err)
	}
	if es, _ := mem.Entries(ctx, w.c, false); len(es) != 1 || es[0].Draft != d {
		t.Fatalf("listing while written: %+v", es)
	}
	if end, err := h.Flush(ctx); !end || err != nil {
		t.Fatalf("close: %v %v", end, err)
	}
	if _, err := mem.Lookup(ctx, w.c, "note.md", false); errName(err) != "ENOENT" {
		t.Fatalf("the draft's name after its close: %v", err)
	}
	es, err := mem.Entries(ctx, w.c, false)
	if err != nil || len(es) != 1 || es[0].File == nil || !es[0].Sized {
		t.Fatalf("listing after the close: %+v %v", es, err)
	}
	name := es[0].Name
	e, err := mem.Lookup(ctx, w.c, name, false)
	if err != nil || e.File.Kind != Memory || e.Attr.Size != es[0].Attr.Size || e.Attr.Mode != 0o444 {
		t.Fatalf("lookup of %s: %+v %v", name, e, err)
	}
	rh, err := w.l.Open(ctx, w.c, e.File, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, rh); !strings.Contains(got, "the backups run at 2am") || int64(len(got)) != e.Attr.Size {
		t.Fatalf("the memory's file (%d bytes shown): %q", e.Attr.Size, got)
	}
	rh.Release()
	if _, err := w.l.Open(ctx, w.c, e.File, syscall.O_WRONLY); code(err) != proto.EPERM {
		t.Fatalf("a write to a memory: %v", err)
	}
	if _, _, err := mem.Create(ctx, w.c, name, syscall.O_WRONLY, false); errName(err) != "EEXIST" {
		t.Fatalf("create over a memory: %v", err)
	}
	// A draft unlinked is discarded; a memory unlinked is forgotten.
	d2, h2, _ := mem.Create(ctx, w.c, "other.md", syscall.O_WRONLY, false)
	h2.Write([]byte("never"), 0)
	if err := mem.Unlink(ctx, w.c, "other.md"); err != nil || d2.Pending() {
		t.Fatalf("unlink of a draft: %v", err)
	}
	if end, err := h2.Release(false); !end || err != nil {
		t.Fatalf("release of a discarded draft: %v %v", end, err)
	}
	if err := mem.Unlink(ctx, w.c, name); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Lookup(ctx, w.c, name, false); code(err) != proto.ENOENT {
		t.Fatalf("a forgotten memory: %v", err)
	}
	if es, _ := mem.Entries(ctx, w.c, false); len(es) != 0 {
		t.Fatalf("left: %+v", es)
	}
	if _, err := (&Layer{k: w.k}).Stat(ctx, w.c, Entry{File: e.File}, nil); code(err) != proto.ENOENT {
		t.Fatalf("stat of a forgotten memory: %v", err)
	}

	// An inbox: a message sent through a draft is there as ID.md,
	// read-only, and stays; a slot neither lists nor looks up.
	inbox := w.l.Inbox("ops", 1024)
	if _, err := w.k.StateSave(ctx, w.c, proto.StateSaveArgs{Agent: "ops", Key: "k", Value: "v"}, nil); err != nil {
		t.Fatal(err) // ops exists
	}
	_, hm, err := inbox.Create(ctx, w.c, "hello.md", syscall.O_WRONLY, false)
	if err != nil {
		t.Fatal(err)
	}
	hm.Write([]byte("hello, ops\n"), 0)
	if _, err := hm.Release(false); err != nil {
		t.Fatal(err)
	}
	es, err = inbox.Entries(ctx, w.c, false)
	if err != nil || len(es) != 1 || es[0].File == nil || es[0].File.Kind != Message {
		t.Fatalf("inbox: %+v %v", es, err)
	}
	if e, err := inbox.Lookup(ctx, w.c, es[0].Name, false); err != nil || !e.Sized || e.Attr.Size == 0 {
		t.Fatalf("lookup of the message: %+v %v", e, err)
	}
	if err := inbox.Unlink(ctx, w.c, es[0].Name); errName(err) != "EPERM" {
		t.Fatalf("unlink of a message: %v", err)
	}
	if _, err := inbox.Lookup(ctx, w.c, es[0].Name, true); errName(err) != "ENOENT" {
		t.Fatalf("lookup through the slot: %v", err)
	}
	if _, err := inbox.Entries(ctx, w.c, true); errName(err) != "EACCES" {
		t.Fatalf("listing of the slot: %v", err)
	}
	if _, _, err := inbox.Create(ctx, w.c, "to-ops.md", syscall.O_WRONLY, true); err != nil {
		t.Fatalf("create through the slot: %v", err)
	}
}

// errName is the name of an errno, or the code of a kernel's error.
func errName(err error) string {
	if en, ok := err.(syscall.Errno); ok {
		switch en {
		case syscall.EEXIST:
			return "EEXIST"
		case syscall.EINVAL:
			return "EINVAL"
		case syscall.ENOENT:
			return "ENOENT"
		case syscall.EPERM:
			return "EPERM"
		case syscall.EACCES:
			return "EACCES"
		}
		return en.Error()
	}
	return code(err)
}
