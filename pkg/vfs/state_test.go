package vfs

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// State keys as files, in-process: what the mount's state files do (a
// working copy shared by writers, saves at close, readers' snapshots,
// the page cache's versions, unlink and rename of open files, refusals),
// against a real kernel, without FUSE.

// place is where a test's file is in its tree: what the adapter's
// where answers.
type place struct {
	mu  sync.Mutex
	key string
	out bool
}

func (p *place) where() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key, !p.out
}

func (p *place) move(key string) {
	p.mu.Lock()
	p.key = key
	p.mu.Unlock()
}

type stateWorld struct {
	*world
	s     *States
	agent string // the test's own: the kernel is shared
}

// shared is one kernel for the tests of state files, each on an agent
// of its own: opening and closing a kernel is most of what each would
// cost.
var shared struct {
	once sync.Once
	w    *world
	n    int
}

func openStates(t *testing.T, max int64) *stateWorld {
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "vfs-state-")
		if err != nil {
			t.Fatal(err)
		}
		shared.w = openIn(t, dir)
		closeShared = func() {
			shared.w.k.Close()
			os.RemoveAll(dir)
		}
	})
	shared.n++
	s := NewStates(shared.w.k, StateOptions{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Own: new(byte), MaxValue: max})
	t.Cleanup(s.Close)
	return &stateWorld{shared.w, s, fmt.Sprintf("st%d", shared.n)}
}

// file is the file of ops's key, as a lookup finds it.
func (w *stateWorld) file(key string) (*StateFile, *place) {
	p := &place{key: key}
	return w.s.File(w.agent, p.where), p
}

// value is what the store holds at key ("" and ENOENT if nothing).
func (w *stateWorld) value(t *testing.T, key string) (string, string) {
	t.Helper()
	v, _, err := w.s.Load(context.Background(), w.c, w.agent, key)
	if err != nil {
		return "", code(err)
	}
	return string(v), ""
}

func (w *stateWorld) save(t *testing.T, key, value string) {
	t.Helper()
	if _, err := w.k.StateSave(context.Background(), w.c, proto.StateSaveArgs{Agent: w.agent, Key: key, Value: value}, nil); err != nil {
		t.Fatal(err)
	}
}

// readState reads h from off to its end.
func readState(t *testing.T, h *StateHandle) string {
	t.Helper()
	var out []byte
	buf := make([]byte, 5)
	for {
		b, err := h.Read(context.Background(), buf, int64(len(out)))
		if err != nil {
			t.Fatalf("read at %d: %v", len(out), err)
		}
		if len(b) == 0 {
			return string(out)
		}
		out = append(out, b...)
	}
}

// cat opens f for reading and reads it whole.
func (w *stateWorld) cat(t *testing.T, f *StateFile) string {
	t.Helper()
	h, err := f.Open(context.Background(), w.c, syscall.O_RDONLY)
	if err != nil {
		t.Fatalf("open to read: %v", err)
	}
	defer h.Release()
	return readState(t, h)
}

func (w *stateWorld) write(t *testing.T, h *StateHandle, off int64, s string) {
	t.Helper()
	if n, err := h.Write(context.Background(), []byte(s), off); err != nil || n != len(s) {
		t.Fatalf("write %q at %d: %d %v", s, off, n, err)
	}
}

// TestStateWriteBack: a file made, written and closed is seen whole at
// its close by readers and, once settled, by the store; until then a
// reader sees what was closed last, never a working copy.
func TestStateWriteBack(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	p := &place{key: "notes/a"}
	f, h, at := w.s.Create(w.c, w.agent, p.where, 0o600, syscall.O_WRONLY)
	if at.Mode != 0o600 || at.Size != 0 || !h.Direct {
		t.Fatalf("created: %+v, direct %v", at, h.Direct)
	}
	if !f.Present() || !f.Unsaved() {
		t.Fatal("a file made here is present and unsaved")
	}
	w.write(t, h, 0, "hello")
	if got := w.cat(t, f); got != "" {
		t.Fatalf("a reader saw the working copy %q", got)
	}
	if a, _ := f.Stat(ctx, w.c); a.Size != 5 {
		t.Fatalf("stat while written: %+v", a)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := w.cat(t, f); got != "hello" {
		t.Fatalf("after close: %q", got)
	}
	w.write(t, h, 5, ", world")
	h.Release() // writes after the last close are saved by the release
	w.s.Settle(w.agent)
	if v, e := w.value(t, "notes/a"); v != "hello, world" {
		t.Fatalf("stored: %q %s", v, e)
	}
	rec, err := w.k.StateStat(ctx, w.c, w.agent, "notes/a")
	if err != nil || rec.Mode&0o7777 != 0o600 || rec.Mode&proto.ModeSet == 0 {
		t.Fatalf("the create's mode is kept with the key: %o %v", rec.Mode, err)
	}
	if f.Present() || w.s.Busy(w.agent) {
		t.Fatal("settled, the file still holds content the store has")
	}
	// touch: a file made and closed empty is an empty key.
	p2 := &place{key: "empty"}
	_, h2, _ := w.s.Create(w.c, w.agent, p2.where, 0o644, syscall.O_WRONLY)
	if err := h2.Fsync(); err != nil {
		t.Fatal(err)
	}
	h2.Release()
	if v, e := w.value(t, "empty"); v != "" || e != "" {
		t.Fatalf("touched: %q %s", v, e)
	}
}

// TestStateRedirect: `echo x > file` opens with O_TRUNC, dups the
// descriptor and closes the original before writing: the file reads
// empty meanwhile, and the store gets x alone, never the empty value.
func TestStateRedirect(t *testing.T) {
	w := openStates(t, 0)
	w.save(t, "k", "old value")
	f, _ := w.file("k")
	h, err := f.Open(context.Background(), w.c, syscall.O_WRONLY|syscall.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := w.cat(t, f); got != "" {
		t.Fatalf("truncated and closed: %q", got)
	}
	if v, _ := w.value(t, "k"); v != "old value" {
		t.Fatalf("the empty content was saved: store has %q", v)
	}
	w.write(t, h, 0, "x\n")
	if err := h.Flush(); err != nil {
		t.Fatal(err)
	}
	h.Release()
	w.s.Settle(w.agent)
	if v, _ := w.value(t, "k"); v != "x\n" {
		t.Fatalf("stored %q", v)
	}
}

// TestStateConcurrentWriters: the writers of a file share one working
// copy (a write is seen by every other descriptor at once), from many
// goroutines; the last close saves what they wrote together.
func TestStateConcurrentWriters(t *testing.T) {
	w := openStates(t, 0)
	w.save(t, "shared", "0123456789")
	f, _ := w.file("shared")
	ctx := context.Background()
	const n = 8
	hs := make([]*StateHandle, n)
	for i := range hs {
		h, err := f.Open(ctx, w.c, syscall.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	if got := readState(t, hs[3]); got != "0123456789" {
		t.Fatalf("a writer reads the stored value first: %q", got)
	}
	var wg sync.WaitGroup
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				h.Write(ctx, []byte{byte('a' + i)}, int64(10+i))
				h.Read(ctx, make([]byte, 4), int64(j%10))
				if j%10 == 0 {
					h.Flush()
				}
			}
		}()
	}
	wg.Wait()
	want := "0123456789abcdefgh"
	if got := readState(t, hs[0]); got != want {
		t.Fatalf("the writers see %q, want %q", got, want)
	}
	// Appends go to the end, whatever the offset.
	ha, err := f.Open(ctx, w.c, syscall.O_WRONLY|syscall.O_APPEND)
	if err != nil {
		t.Fatal(err)
	}
	w.write(t, ha, 0, "!")
	want += "!"
	for _, h := range append(hs, ha) {
		if err := h.Flush(); err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	w.s.Settle(w.agent)
	if v, _ := w.value(t, "shared"); v != want {
		t.Fatalf("stored %q, want %q", v, want)
	}
}

// TestStateReaders: a reader keeps the snapshot it opened; the page
// cache is kept across opens of the version it holds, and never shared
// by two versions.
func TestStateReaders(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	w.save(t, "r", "one")
	f, _ := w.file("r")
	h1, err := f.Open(ctx, w.c, syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if h1.Direct || h1.KeepCache || !h1.DropAttr {
		t.Fatalf("first open of a version: direct %v keep %v drop %v", h1.Direct, h1.KeepCache, h1.DropAttr)
	}
	if _, err := f.Stat(ctx, w.c); err != nil {
		t.Fatal(err)
	}
	h2, _ := f.Open(ctx, w.c, syscall.O_RDONLY)
	if h2.Direct || !h2.KeepCache || h2.DropAttr {
		t.Fatalf("second open of the version the cache holds: direct %v keep %v drop %v", h2.Direct, h2.KeepCache, h2.DropAttr)
	}
	h2.Release()
	// A writer's close: readers opened before keep their snapshot; one
	// opened now reads the new content around the page cache (another
	// version is being read through it).
	hw, _ := f.Open(ctx, w.c, syscall.O_WRONLY|syscall.O_TRUNC)
	w.write(t, hw, 0, "two, longer")
	hw.Flush()
	hw.Release()
	w.s.Settle(w.agent)
	f.Invalidated() // as the adapter does at the change's event
	h3, _ := f.Open(ctx, w.c, syscall.O_RDONLY)
	if got := readState(t, h3); got != "two, longer" || !h3.Direct {
		t.Fatalf("new reader: %q direct %v", got, h3.Direct)
	}
	h3.Release()
	if got := readState(t, h1); got != "one" {
		t.Fatalf("the old reader's snapshot: %q", got)
	}
	if _, err := h1.Write(ctx, []byte("x"), 0); !errorsIs(err, syscall.EBADF) {
		t.Fatalf("write to a reader: %v", err)
	}
	h1.Release()
	h4, _ := f.Open(ctx, w.c, syscall.O_RDONLY)
	if h4.Direct || h4.KeepCache {
		t.Fatalf("the new version's first cached open: direct %v keep %v", h4.Direct, h4.KeepCache)
	}
	h4.Release()
}

func errorsIs(err error, e syscall.Errno) bool {
	en, ok := err.(syscall.Errno)
	return ok && en == e
}

// TestStateRefusals: what a file refuses, and that nothing is half
// applied: a value past limits.max_value (whole or nothing), writes after
// the mount began to close, fallocate modes it cannot keep, an open of a
// file gone from the tree.
func TestStateRefusals(t *testing.T) {
	w := openStates(t, 16)
	ctx := context.Background()
	w.save(t, "big", "small")
	f, p := w.file("big")
	h, _ := f.Open(ctx, w.c, syscall.O_WRONLY)
	w.write(t, h, 0, "0123456789")
	if _, err := h.Write(ctx, []byte("0123456789"), 10); !errorsIs(err, syscall.EFBIG) {
		t.Fatalf("write past the limit: %v", err)
	}
	if err := h.Flush(); code(err) != proto.E2BIG {
		t.Fatalf("close after a refused write: %v", err)
	}
	h.Release()
	w.s.Settle(w.agent)
	if v, _ := w.value(t, "big"); v != "small" {
		t.Fatalf("half applied: %q", v)
	}
	size := int64(17)
	if _, err := f.Setattr(ctx, w.c, SetAttr{Size: &size}); !errorsIs(err, syscall.EFBIG) {
		t.Fatalf("truncate past the limit: %v", err)
	}
	h, _ = f.Open(ctx, w.c, syscall.O_RDWR)
	if err := h.Allocate(ctx, 0, 4, 2); !errorsIs(err, syscall.EOPNOTSUPP) {
		t.Fatalf("fallocate punch hole: %v", err)
	}
	if err := h.Allocate(ctx, 0, 17, 0); !errorsIs(err, syscall.EFBIG) {
		t.Fatalf("fallocate past the limit: %v", err)
	}
	if err := h.Allocate(ctx, 0, 8, 0); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, h); got != "small\x00\x00\x00" {
		t.Fatalf("fallocate extends: %q", got)
	}
	h.Release()
	p.mu.Lock()
	p.out = true
	p.mu.Unlock()
	if _, err := f.Open(ctx, w.c, syscall.O_RDONLY); !errorsIs(err, syscall.ESTALE) {
		t.Fatalf("open of a file out of the tree: %v", err)
	}
	// Shut: writes, closes and fsyncs fail; Close saves what was left.
	pl := &place{key: "late"}
	g, hl, _ := w.s.Create(w.c, w.agent, pl.where, 0o644, syscall.O_WRONLY)
	w.write(t, hl, 0, "kept")
	w.s.Shut()
	if _, err := hl.Write(ctx, []byte("x"), 4); !errorsIs(err, syscall.ENOTCONN) {
		t.Fatalf("write after shut: %v", err)
	}
	if err := hl.Flush(); !errorsIs(err, syscall.ENOTCONN) {
		t.Fatalf("close after shut: %v", err)
	}
	w.s.Close()
	if v, _ := w.value(t, "late"); v != "kept" || g.Present() {
		t.Fatalf("Close saved %q", v)
	}
}

// TestStateEviction: a file closed and then forgotten by the adapter
// (evicted from the OS's cache) keeps its writes: the next file of the
// key reads them, while or after the save commits.
func TestStateEviction(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	w.save(t, "e", "")
	for i := range 20 {
		f, _ := w.file("e")
		h, err := f.Open(ctx, w.c, syscall.O_WRONLY|syscall.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("version %d", i)
		w.write(t, h, 0, want)
		h.Flush()
		h.Release()
		g, _ := w.file("e") // f is gone; a new lookup
		if got := w.cat(t, g); got != want {
			t.Fatalf("after eviction: %q, want %q", got, want)
		}
	}
}

// TestStateUnlinkOpen: an unlinked file stays readable and writable by
// those who hold it open, with no links; their closes save nothing, and
// the key stays gone.
func TestStateUnlinkOpen(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	w.save(t, "u", "content")
	f, p := w.file("u")
	r, _ := f.Open(ctx, w.c, syscall.O_RDONLY)
	h, _ := f.Open(ctx, w.c, syscall.O_RDWR)
	w.write(t, h, 0, "C")
	if _, err := f.Stat(ctx, w.c); err != nil {
		t.Fatal(err)
	}
	if err := w.s.Unlink(w.c, w.agent, "u", f, true); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.out = true // the adapter's tree drops the name
	p.mu.Unlock()
	a, err := f.Stat(ctx, w.c)
	if err != nil || !a.Unlinked || a.Size != 7 {
		t.Fatalf("stat of the unlinked file: %+v %v", a, err)
	}
	w.write(t, h, 1, "ONTENT")
	if got := readState(t, h); got != "CONTENT" {
		t.Fatalf("the writer reads %q", got)
	}
	if got := readState(t, r); got != "content" {
		t.Fatalf("the reader reads %q", got)
	}
	h.Flush()
	h.Release()
	r.Release()
	w.s.Settle(w.agent)
	if _, e := w.value(t, "u"); e != proto.ENOENT {
		t.Fatalf("the key came back: %s", e)
	}
	// A file made here and never saved: its unlink deletes nothing.
	pn := &place{key: "never"}
	g, hn, _ := w.s.Create(w.c, w.agent, pn.where, 0o644, syscall.O_WRONLY)
	if err := w.s.Unlink(w.c, w.agent, "never", g, false); err != nil {
		t.Fatal(err)
	}
	hn.Release()
	w.s.Settle(w.agent)
	if _, e := w.value(t, "never"); e != proto.ENOENT {
		t.Fatalf("an unlinked new file was saved: %s", e)
	}
	// Without a file: the key is deleted.
	w.save(t, "plain", "v")
	if err := w.s.Unlink(w.c, w.agent, "plain", nil, true); err != nil {
		t.Fatal(err)
	}
	if err := w.s.Unlink(w.c, w.agent, "plain", nil, true); code(err) != proto.ENOENT {
		t.Fatalf("unlink of a missing key: %v", err)
	}
}

// TestStateRename: a rename moves the content readers see (mode and
// mtime kept); one over an open file leaves its readers their snapshot,
// and an open that reaches the replaced file reads the new one; a
// working copy moves with its file; a folder moves key by key.
func TestStateRename(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	w.save(t, "a", "from a")
	w.save(t, "b", "old b")
	a, pa := w.file("a")
	b, pb := w.file("b")
	mode := uint32(0o640)
	if _, err := a.Setattr(ctx, w.c, SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	rb, _ := b.Open(ctx, w.c, syscall.O_RDONLY)
	if err := w.s.RenameFile(ctx, w.c, w.agent, a, "a", true, b, "b", true); err != nil {
		t.Fatal(err)
	}
	pa.move("b")
	pb.mu.Lock()
	pb.out = true
	pb.mu.Unlock()
	if v, _ := w.value(t, "b"); v != "from a" {
		t.Fatalf("b holds %q", v)
	}
	if _, e := w.value(t, "a"); e != proto.ENOENT {
		t.Fatalf("a is still there: %s", e)
	}
	if rec, _ := w.k.StateStat(ctx, w.c, w.agent, "b"); rec.Mode&0o7777 != 0o640 {
		t.Fatalf("the mode did not move: %o", rec.Mode)
	}
	if got := readState(t, rb); got != "old b" {
		t.Fatalf("an open reader of the replaced file: %q", got)
	}
	rb.Release()
	if got := w.cat(t, b); got != "from a" {
		t.Fatalf("an open of the replaced file: %q", got)
	}
	// A working copy moves with its file: its close saves the new key.
	h, _ := a.Open(ctx, w.c, syscall.O_WRONLY|syscall.O_TRUNC)
	w.write(t, h, 0, "written while moving")
	if err := w.s.RenameFile(ctx, w.c, w.agent, a, "b", true, nil, "c", false); err != nil {
		t.Fatal(err)
	}
	pa.move("c")
	h.Flush()
	h.Release()
	w.s.Settle(w.agent)
	if v, _ := w.value(t, "c"); v != "written while moving" {
		t.Fatalf("c holds %q", v)
	}
	if _, e := w.value(t, "b"); e != proto.ENOENT {
		t.Fatalf("b is still there: %s", e)
	}
	// A folder.
	w.save(t, "d/x", "x")
	w.save(t, "d/y/z", "z")
	x, px := w.file("d/x")
	hx, _ := x.Open(ctx, w.c, syscall.O_WRONLY|syscall.O_APPEND)
	w.write(t, hx, 0, "+")
	if err := w.s.MoveFolder(ctx, w.c, w.agent, "d", "e", []*StateFile{x}, false); err != nil {
		t.Fatal(err)
	}
	px.move("e/x")
	hx.Flush()
	hx.Release()
	w.s.Settle(w.agent)
	for key, want := range map[string]string{"e/x": "x+", "e/y/z": "z", "d/x": "", "d/y/z": ""} {
		if v, _ := w.value(t, key); v != want {
			t.Errorf("%s holds %q, want %q", key, v, want)
		}
	}
}

// TestStateSetattr: chmod, truncate and utimes of a file nobody writes
// are saves, carrying the mode and times.
func TestStateSetattr(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	w.save(t, "s", "0123456789")
	f, _ := w.file("s")
	mode, size, mtime := uint32(0o600), int64(4), time.Unix(1_000_000_000, 0)
	a, err := f.Setattr(ctx, w.c, SetAttr{Mode: &mode, Size: &size, Mtime: &mtime})
	if err != nil || a.Mode != 0o600 || a.Size != 4 || !a.Mtime.Equal(mtime) {
		t.Fatalf("setattr: %+v %v", a, err)
	}
	w.s.Settle(w.agent)
	rec, err := w.k.StateStat(ctx, w.c, w.agent, "s")
	if err != nil || rec.Size != 4 || rec.Mode&0o7777 != 0o600 || !rec.Modified.Equal(mtime) {
		t.Fatalf("stored: %+v %v", rec, err)
	}
	g, _ := w.file("s")
	if a, _ := g.Stat(ctx, w.c); a.Mode != 0o600 || a.Size != 4 {
		t.Fatalf("a new lookup: %+v", a)
	}
}

// TestStateFolders: mkdir makes a folder the layer keeps until it is
// removed, listed in its parent with the mode it was given; rmdir
// refuses a folder that holds anything (a key, a folder made here, a
// file not committed yet) and a key; a folder's rename moves the
// folders made below it.
func TestStateFolders(t *testing.T) {
	w := openStates(t, 0)
	ctx := context.Background()
	a := w.agent
	if err := w.s.Mkdir(ctx, w.c, a, "d", 0o750, false); err != nil {
		t.Fatal(err)
	}
	if err := w.s.Mkdir(ctx, w.c, a, "d/e", 0o700, false); err != nil {
		t.Fatal(err)
	}
	if m, ok := w.s.FolderMode(a, "d"); !ok || m != 0o750 || !w.s.Folder(w.c, a, "d/e") || !w.s.HasFolders(a) {
		t.Fatalf("made: %o %v", m, ok)
	}
	if got := w.s.MadeFolders(a, ""); len(got) != 1 || got[0] != "d" {
		t.Fatalf("made below the state folder: %q", got)
	}
	if got := w.s.MadeFolders(a, "d"); len(got) != 1 || got[0] != "e" {
		t.Fatalf("made below d: %q", got)
	}
	w.save(t, "k", "v")
	for _, tc := range []struct {
		key     string
		present bool
		want    syscall.Errno
	}{{"d", false, syscall.EEXIST}, {"k", false, syscall.EEXIST}, {"new", true, syscall.EEXIST}} {
		if err := w.s.Mkdir(ctx, w.c, a, tc.key, 0o755, tc.present); !errorsIs(err, tc.want) {
			t.Errorf("mkdir %s (present %v): %v, want %v", tc.key, tc.present, err, tc.want)
		}
	}
	for _, tc := range []struct {
		key                   string
		present, presentBelow bool
		want                  error
	}{
		{"d", false, false, syscall.ENOTEMPTY},  // d/e below
		{"d/e", false, true, syscall.ENOTEMPTY}, // a file not committed
		{"k", false, false, syscall.ENOTDIR},    // a key
		{"none", false, false, syscall.ENOENT},  // nothing
		{"d/e", false, false, nil},              // empty
		{"d", false, false, nil},                // empty now
	} {
		if err := w.s.Rmdir(ctx, w.c, a, tc.key, tc.present, tc.presentBelow); err != tc.want {
			t.Errorf("rmdir %s: %v, want %v", tc.key, err, tc.want)
		}
	}
	if w.s.Folder(w.c, a, "d") || w.s.HasFolders(a) {
		t.Fatal("removed folders are still there")
	}
	// A folder of the store: not empty while a key is below it.
	w.save(t, "s/x", "x")
	if err := w.s.Rmdir(ctx, w.c, a, "s", false, false); err != syscall.ENOTEMPTY {
		t.Fatalf("rmdir of a folder with a key: %v", err)
	}
	// A rename moves the folders made below, and replaces an empty one.
	w.s.Mkdir(ctx, w.c, a, "s/made", 0o711, false)
	w.s.Mkdir(ctx, w.c, a, "t", 0o755, false)
	if err := w.s.MoveFolder(ctx, w.c, a, "s", "t", nil, true); err != nil {
		t.Fatal(err)
	}
	if m, ok := w.s.FolderMode(a, "t/made"); !ok || m != 0o711 || w.s.Folder(w.c, a, "s/made") {
		t.Fatalf("the made folder after the rename: %o %v", m, ok)
	}
	if _, ok := w.s.FolderMode(a, "t"); ok {
		t.Fatal("the replaced empty folder is still kept")
	}
	if v, _ := w.value(t, "t/x"); v != "x" {
		t.Fatalf("t/x holds %q", v)
	}
	w.s.SetFolderMode(a, "t/made", 0o700)
	if m, _ := w.s.FolderMode(a, "t/made"); m != 0o700 {
		t.Fatalf("chmod: %o", m)
	}
}
