package fs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/config"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

func (tm *testMount) admin(t *testing.T) *kernel.Cred {
	t.Helper()
	c, err := tm.k.Identify(uint32(os.Getuid()), uint32(os.Getgid()), int32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (tm *testMount) save(t *testing.T, agent, key, value string) {
	t.Helper()
	if _, err := tm.k.StateSave(context.Background(), tm.admin(t), proto.StateSaveArgs{Agent: agent, Key: key, Value: value}, nil); err != nil {
		t.Fatal(err)
	}
}

func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 2s", what)
		}
	}
}

// TestCoherence: changes made behind the mount's back (here, kernel
// syscalls, as the socket makes them) are seen through it, although the
// kernel caches names, attributes and pages for an hour.
func TestCoherence(t *testing.T) {
	tm := mountForTest(t, nil)
	tm.save(t, "ops", "a/b", "one")
	p := filepath.Join(tm.dir, "agent", "ops", "state", "a", "b")
	if b, err := os.ReadFile(p); err != nil || string(b) != "one" {
		t.Fatalf("read: %q %v", b, err)
	}
	// A longer value: an open sees it whole at once, even before the
	// invalidation has reached the kernel.
	tm.save(t, "ops", "a/b", "one, and then some")
	if b, err := os.ReadFile(p); err != nil || string(b) != "one, and then some" {
		t.Fatalf("read after a change: %q %v", b, err)
	}
	within(t, "stat sees the new size", func() bool {
		fi, err := os.Stat(p)
		return err == nil && fi.Size() == int64(len("one, and then some"))
	})
	// A name that was looked up and missing, then made: the cached
	// negative entry is dropped.
	q := filepath.Join(tm.dir, "agent", "ops", "state", "a", "c")
	if _, err := os.Stat(q); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stat of a missing key: %v", err)
	}
	tm.save(t, "ops", "a/c", "new")
	within(t, "a new key appears", func() bool { _, err := os.Stat(q); return err == nil })
	// A new agent appears in /agent.
	if _, err := os.Stat(filepath.Join(tm.dir, "agent", "dev")); err == nil {
		t.Fatal("agent dev before it exists")
	}
	tm.save(t, "dev", "k", "v")
	within(t, "a new agent appears", func() bool {
		_, err := os.Stat(filepath.Join(tm.dir, "agent", "dev", "state", "k"))
		return err == nil
	})
	// Deletes: the key goes, and the folder it emptied.
	for _, k := range []string{"a/b", "a/c"} {
		if _, err := tm.k.StateDelete(context.Background(), tm.admin(t), proto.StateArgs{Agent: "ops", Key: k}, nil); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "deleted keys and their folder go", func() bool {
		_, err := os.Stat(filepath.Join(tm.dir, "agent", "ops", "state", "a"))
		return errors.Is(err, os.ErrNotExist)
	})
	// A sweep (what lost events trigger) keeps what exists and drops the
	// rest.
	tm.save(t, "ops", "x/y", "1")
	if _, err := os.Stat(filepath.Join(tm.dir, "agent", "ops", "state", "x", "y")); err != nil {
		t.Fatal(err)
	}
	tm.m.fs.sweep()
	if b, err := os.ReadFile(filepath.Join(tm.dir, "agent", "ops", "state", "x", "y")); err != nil || string(b) != "1" {
		t.Fatalf("after a sweep: %q %v", b, err)
	}
}

// TestWholeOrNothing: a write past limits.max_value fails with EFBIG and
// the key keeps its value; so do truncate and fallocate past it.
func TestWholeOrNothing(t *testing.T) {
	tm := mountForTest(t, func(c *config.Config) { c.Limits.MaxValue = 1 << 20 })
	tm.save(t, "ops", "k", "before")
	p := filepath.Join(tm.dir, "agent", "ops", "state", "k")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<19)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20)); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("write past max_value: %v, want EFBIG", err)
	}
	if err := f.Close(); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("close after EFBIG: %v, want EFBIG", err)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "before" {
		t.Fatalf("after EFBIG: %q %v", b, err)
	}
	if err := os.Truncate(p, 2<<20); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("truncate past max_value: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "before" {
		t.Fatalf("after a refused truncate: %q", b)
	}
}

// TestFolders: mkdir makes a folder that lives in the mount until a file
// is saved in it; rmdir refuses a folder with keys.
func TestFolders(t *testing.T) {
	tm := mountForTest(t, nil)
	st := filepath.Join(tm.dir, "agent", "ops")
	if err := os.Mkdir(st, 0o755); err != nil {
		t.Fatal(err)
	}
	st = filepath.Join(st, "state")
	if err := os.MkdirAll(filepath.Join(st, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(st, "a", "b")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("stat of a made folder: %v %v", fi, err)
	}
	if err := os.WriteFile(filepath.Join(st, "a", "b", "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(st, "a", "b")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a folder with a key: %v", err)
	}
	if err := os.Remove(filepath.Join(st, "a", "b", "f")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(st, "a", "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(st, "a")); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(st); err != nil || len(ents) != 0 {
		t.Fatalf("state after rmdir: %v %v", ents, err)
	}
	// Names that are no key are refused, not silently mangled.
	if err := os.WriteFile(filepath.Join(st, string([]byte{0xff})), nil, 0o644); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("a name that is not UTF-8: %v, want EINVAL", err)
	}
}

// TestLateDeleteSparesANewFile: the deletion of a key over the socket
// reaches the mount's invalidator late, after a file of the same name was
// made through the mount (its create found no key). The deletion is of
// the key's earlier life: the new file stays, and its close saves it.
func TestLateDeleteSparesANewFile(t *testing.T) {
	tm := mountForTest(t, nil)
	tm.save(t, "ops", "n/a", "one")
	c := tm.admin(t)
	if _, err := tm.k.StateDelete(context.Background(), c, proto.StateArgs{Agent: "ops", Key: "n/a"}, nil); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tm.dir, "agent", "ops", "state", "n")
	within(t, "the deleted key's folder goes", func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "a"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("two"); err != nil {
		t.Fatal(err)
	}
	// The deletion's event, as if it came only now.
	tm.m.fs.changed(&bus.Event{Name: proto.EventStateChanged, Agent: "ops", Key: "n/a", Deleted: true})
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if v, _, err := tm.k.StateLoad(context.Background(), c, proto.StateArgs{Agent: "ops", Key: "n/a"}, nil); err != nil || string(v) != "two" {
		t.Fatalf("the key after the mount's close: %q %v", v, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(b) != "two" {
		t.Fatalf("read through the mount: %q %v", b, err)
	}
}
