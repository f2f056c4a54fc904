package wasm

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheFiles is the files under dir with their modification times.
func cacheFiles(t *testing.T, dir string) map[string]time.Time {
	t.Helper()
	files := map[string]time.Time{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				files[p] = fi.ModTime()
			}
		}
		return nil
	})
	return files
}

// emptyModule is the smallest tool: a module whose _start returns at
// once (exit status 0), with a page of memory. Written in the text format:
//
//	(module (memory (export "memory") 1) (func (export "_start")))
var emptyModule = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // types: () -> ()
	0x03, 0x02, 0x01, 0x00, // functions: one of type 0
	0x05, 0x03, 0x01, 0x00, 0x01, // memories: one, at least 1 page
	0x07, 0x13, 0x02, // exports: two
	0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // _start: function 0
	0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00, // memory: memory 0
	0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b, // code: no locals, end
}

// TestCompileCacheOnDisk: a runner keeps what it compiles in its cache
// folder, and the next runner on that folder loads it (writes nothing)
// instead of compiling it again. The tool is the smallest module (hostile
// takes about 12 s of CPU to compile under -race).
func TestCompileCacheOnDisk(t *testing.T) {
	tools := t.TempDir()
	if err := os.WriteFile(filepath.Join(tools, "empty.wasm"), emptyModule, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cache")
	s := Spec{Tool: "empty", Timeout: time.Minute}
	a := NewCached(tools, dir)
	if res, err := a.Run(context.Background(), s); err != nil || res.Status != 0 {
		t.Fatalf("first runner: %+v %v", res, err)
	}
	a.Close(context.Background())
	before := cacheFiles(t, dir)
	if len(before) == 0 {
		t.Fatalf("nothing in the cache folder %s after a compile", dir)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the cache folder: %v %v (want mode 0700)", fi.Mode(), err)
	}
	b := NewCached(tools, dir)
	defer b.Close(context.Background())
	if res, err := b.Run(context.Background(), s); err != nil || res.Status != 0 {
		t.Fatalf("second runner: %+v %v", res, err)
	}
	after := cacheFiles(t, dir)
	if len(after) != len(before) {
		t.Fatalf("the second runner compiled again: %d files, then %d", len(before), len(after))
	}
	for p, mt := range before {
		if !after[p].Equal(mt) {
			t.Errorf("%s rewritten by the second runner", p)
		}
	}
}

// TestCacheOverLimitEmptied: a cache folder past MaxCacheBytes is emptied
// when a runner opens it, and stays where and what it was.
func TestCacheOverLimitEmptied(t *testing.T) {
	// Through a link an operator made to the folder, which stays a link.
	real := filepath.Join(t.TempDir(), "cache")
	dir := filepath.Join(t.TempDir(), "link")
	if err := os.MkdirAll(filepath.Join(real, "old"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, dir); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "old", "entry")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(MaxCacheBytes + 1) // sparse
	f.Close()
	r := NewCached(tools, dir)
	defer r.Close(context.Background())
	if _, err := os.Stat(big); err == nil {
		t.Fatal("a cache past its bound was kept")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the cache folder is gone: %v", err)
	}
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link to the cache folder was replaced: %v %v", fi, err)
	}
}

// TestCheckCache: a folder whose compiled code someone else could change
// is refused, with what is wrong with it.
func TestCheckCache(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type cacheCase struct{ name, dir, want string }
	check := func(cases []cacheCase) {
		t.Helper()
		for _, tc := range cases {
			err := CheckCache(tc.dir)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s (%s): refused: %v", tc.name, tc.dir, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s (%s): %v, want an error naming %q", tc.name, tc.dir, err, tc.want)
			}
		}
	}
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o600)
	check([]cacheCase{
		{"ours, 0700", mk("ok", 0o700), ""},
		{"not made yet", filepath.Join(base, "new", "cache"), ""},
		{"under a sticky world-writable folder", filepath.Join(mk("sticky", 0o777|os.ModeSticky), "cache"), ""},
		{"relative", "cache", "not an absolute path"},
		{"group-writable", mk("group", 0o770), "mode 0770"},
		{"world-writable and sticky itself", mk("tmpish", 0o777|os.ModeSticky), "mode 0777"},
		{"under a world-writable folder", filepath.Join(mk("open", 0o777), "cache"), "mode 0777"},
		{"a file", file, "not a folder"},
	})
	// Links: ours to our folder passes; ours to an open folder, and one
	// to a folder of ours under an open one, do not.
	if err := os.Mkdir(filepath.Join(base, "open4"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(base, "open4"), 0o777)
	link := func(name, to string) string {
		t.Helper()
		p := filepath.Join(base, name)
		if err := os.Symlink(to, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check([]cacheCase{
		{"a link to our folder", link("toours", mk("ours2", 0o700)), ""},
		{"under a link to our folder", filepath.Join(link("toours3", mk("ours3", 0o700)), "cache"), ""},
		{"a link to an open folder", link("toopen", mk("open3", 0o777)), "mode 0777"},
		{"a link to a folder of ours under an open one", link("tohidden", mk("open4/x", 0o700)), "mode 0777"},
	})
	if os.Geteuid() != 0 {
		t.Log("not root: the owners' cases need chown")
		return
	}
	theirs := mk("theirs", 0o700)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := CheckCache(theirs); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a folder of uid 65534: %v", err)
	}
	if err := CheckCache(filepath.Join(theirs, "cache")); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("a folder under one of uid 65534: %v", err)
	}
	theirLink := link("theirlink", mk("ours5", 0o700))
	if err := os.Lchown(theirLink, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := CheckCache(theirLink); err == nil || !strings.Contains(err.Error(), "a link owned by uid 65534") {
		t.Errorf("a link of uid 65534: %v", err)
	}
	// A runner on a folder it refuses keeps its compiled tools in memory.
	r := NewCached(tools, filepath.Join(mk("open2", 0o777), "cache"))
	defer r.Close(context.Background())
	if _, err := os.Stat(filepath.Join(base, "open2", "cache")); err == nil {
		t.Error("a refused cache folder was made")
	}
}
