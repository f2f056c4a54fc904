package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, v := range []string{"one", "two, longer"} {
		if err := WriteFile(path, path+".tmp", []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != v {
			t.Fatalf("read %q, %v; want %q", b, err, v)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temp file is left: %v", err)
	}
}

// A staged file is synced under its temp name and not in place until
// Place; Drop leaves path as it was.
func TestStage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ref")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := Stage(path, path+".lock", []byte("new"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("staged content visible before Place: %q", b)
	}
	if b, _ := os.ReadFile(path + ".lock"); string(b) != "new" {
		t.Fatalf("staged file holds %q", b)
	}
	st.Drop()
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Drop left the temp file: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("Drop changed path: %q", b)
	}
	if st, err = Stage(path, path+".lock", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Place(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("after Place path holds %q", b)
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Place left the temp file: %v", err)
	}
}

// A failed rename (path is a folder that is not empty) leaves path as it
// was and no temp file.
func TestWriteFileFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, path+".tmp", []byte("v"), 0o600); err == nil {
		t.Fatal("replaced a folder that is not empty")
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temp file is left: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(path, "x")); err != nil || !fi.IsDir() {
		t.Fatalf("the folder changed: %v", err)
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("still there: %v", err)
	}
	if err := Remove(path); err != nil {
		t.Fatalf("removing what is gone: %v", err)
	}
	if err := Remove(filepath.Join(dir, "nope", "f")); err == nil {
		t.Fatal("no error for a missing folder")
	}
}

func TestMkdirAll(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(dir, "a", "b", "c")
	if err := MkdirAll(deep, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(dir, "a"), filepath.Join(dir, "a", "b"), deep} {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&^0o750 != 0 {
			t.Fatalf("%s: %v, %v", d, fi, err)
		}
	}
	if err := MkdirAll(deep, 0o750); err != nil {
		t.Fatalf("again: %v", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(file, "sub"), 0o750); err == nil {
		t.Fatal("made a folder under a file")
	}
	if err := MkdirAll(file, 0o750); err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("a file as the folder: %v, want an error naming it", err)
	}
}

func TestSyncDirNamesTheFolder(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	err := SyncDir(missing)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncDir(%s) = %v, want an error naming it", missing, err)
	}
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// WriteWith: write may seek back; an error from it leaves path as it was.
func TestWriteWith(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	err := WriteWith(path, path+".tmp", 0o600, func(f *os.File) error {
		if _, err := f.Write([]byte("len=?, body")); err != nil {
			return err
		}
		_, err := f.WriteAt([]byte("5"), 4)
		return err
	})
	if b, rerr := os.ReadFile(path); err != nil || rerr != nil || string(b) != "len=5, body" {
		t.Fatalf("read %q (%v, %v)", b, err, rerr)
	}
	boom := errors.New("boom")
	err = WriteWith(path, path+".tmp", 0o600, func(f *os.File) error {
		f.Write([]byte("half"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want the writer's", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "len=5, body" {
		t.Fatalf("path changed to %q", b)
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temp file is left: %v", err)
	}
}

func TestProbe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := Probe(dir); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Fatalf("the probe left %v (%v)", ents, err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Probe(filepath.Join(file, "tmp")); err == nil {
		t.Fatal("a folder that cannot be made was probed writable")
	}
}

func TestPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	if err := Private(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Private(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%v %v", fi.Mode(), err)
	}
}
