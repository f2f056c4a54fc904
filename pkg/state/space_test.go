package state

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/oxios/oxios/pkg/proto"
)

// write runs changes (and a fork) through one batch and returns Write's
// error: the space check's refusal, or nil.
func write(t *testing.T, s *Store, f *Fork, changes ...*Change) error {
	t.Helper()
	b := s.Begin()
	if f != nil {
		if err := b.AddFork(f); err != nil {
			t.Fatal(err)
		}
	}
	return finish(t, b, changes...)
}

// finish adds changes to b and commits it: Write (its error returned),
// Sync and Publish.
func finish(t *testing.T, b *Batch, changes ...*Change) error {
	t.Helper()
	for _, c := range changes {
		if err := b.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Write(); err != nil {
		return err
	}
	if err := b.Sync(); err != nil {
		b.Abort(err)
		t.Fatal(err)
	}
	b.Publish()
	return nil
}

// ownFS is an empty directory on a tmpfs of its own, whose free space
// nothing but the test changes (a shared /tmp's moves by megabytes while
// other programs run).
func ownFS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs of its own takes root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

func isENOSPC(err error) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == proto.ENOSPC
}

// TestForkNeedsRoomForCopies: a fork's copies of values its origin has
// not yet written to files are files the fork must write: a fork whose
// copies do not fit is refused, as a save of them would be. (A fork of
// values in files costs links, not room: TestForkOnFullDisk.)
func TestForkNeedsRoomForCopies(t *testing.T) {
	const v = 400 << 10
	for try := 0; ; try++ {
		s, err := Open(ownFS(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		free, err := s.free()
		if err != nil {
			t.Fatal(err)
		}
		// Room for three such values beyond the reserve, not four: two
		// saves fit (each counts its journal record and its file), a fork
		// of both (their two copies besides the two pending) does not.
		s.opts.DiskReserve = free - 7*v/2
		big := strings.Repeat("x", v)
		for _, k := range []string{"a", "b"} {
			if err := write(t, s, nil, save("o", k, big)); err != nil {
				t.Fatalf("save %s: %v", k, err)
			}
		}
		s.qmu.Lock()
		pending := s.pending
		s.qmu.Unlock()
		if pending < 2*v {
			// The applier wrote them already (a slow machine): their
			// fork would cost links only. Again, quicker.
			s.Close()
			if try == 5 {
				t.Skip("the applier kept writing the values before the fork")
			}
			continue
		}
		err = write(t, s, &Fork{From: "o", To: "f"})
		if !isENOSPC(err) {
			t.Fatalf("fork of %d pending bytes with room for %d: %v, want ENOSPC", pending, 7*v/2, err)
		}
		if n, _ := s.Keys("f"); n != 0 {
			t.Fatalf("the refused fork left %d keys", n)
		}
		s.Close()
		return
	}
}

// TestDeleteDespitePending: when the disk fills under the store (another
// program's files), saves are refused, but deletes still go through:
// work already accepted is no reason to refuse the way to free space.
func TestDeleteDespitePending(t *testing.T) {
	big := strings.Repeat("y", 1<<20)
	for try := 0; ; try++ {
		s, err := Open(ownFS(t), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			if err := write(t, s, nil, save("o", k, big)); err != nil {
				t.Fatal(err)
			}
		}
		free, err := s.free()
		if err != nil {
			t.Fatal(err)
		}
		s.qmu.Lock()
		pending := s.pending
		s.qmu.Unlock()
		if pending < 2<<20 {
			// Written already (a slow machine): nothing pending to
			// stand in the delete's way. Again, quicker.
			s.Close()
			if try == 5 {
				t.Skip("the applier kept writing the values before the delete")
			}
			continue
		}
		// Someone else's files leave 1 MiB beyond half the reserve, less
		// than the work behind the journal.
		s.opts.DiskReserve = 2 * (free - 1<<20)
		if err := write(t, s, nil, save("o", "d", "small")); !isENOSPC(err) {
			t.Fatalf("save on a full disk: %v, want ENOSPC", err)
		}
		if err := write(t, s, nil, del("o", "a")); err != nil {
			t.Fatalf("delete on a full disk with %d bytes of work pending: %v", pending, err)
		}
		if _, _, err := s.Load("o", "a"); err == nil {
			t.Fatal("the deleted key is still there")
		}
		s.Close()
		return
	}
}

// The journal check finds its file moved away and replaced, by statx
// and by the stat fallback alike.
func TestSameJournal(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, check := range map[string]func() error{"statx": s.sameJournal, "stat": s.sameJournalStat} {
		if err := check(); err != nil {
			t.Fatalf("%s: journal in place: %v", name, err)
		}
	}
	path := s.j.path
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]func() error{"statx": s.sameJournal, "stat": s.sameJournalStat} {
		if err := check(); err == nil || !strings.Contains(err.Error(), "removed or replaced") {
			t.Errorf("%s: journal replaced: %v", name, err)
		}
	}
	os.Remove(path)
	for name, check := range map[string]func() error{"statx": s.sameJournal, "stat": s.sameJournalStat} {
		if err := check(); err == nil || !strings.Contains(err.Error(), "removed or replaced") {
			t.Errorf("%s: journal gone: %v", name, err)
		}
	}
	if err := os.Rename(path+".moved", path); err != nil {
		t.Fatal(err)
	}
	if err := s.sameJournal(); err != nil {
		t.Errorf("journal put back: %v", err)
	}
}
