package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oxios/oxios/pkg/proto"
)

// commit runs changes through one batch the way the kernel does.
func commit(t *testing.T, s *Store, changes ...*Change) []*proto.Error {
	t.Helper()
	b := s.Begin()
	errs := make([]*proto.Error, len(changes))
	for i, c := range changes {
		errs[i] = b.Add(c)
	}
	if err := b.Write(); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		b.Abort(err)
		t.Fatal(err)
	}
	b.Publish()
	return errs
}

func save(agent, key, v string) *Change { return &Change{Agent: agent, Key: key, Value: []byte(v)} }
func del(agent, key string) *Change     { return &Change{Agent: agent, Key: key, Delete: true} }

func code(e *proto.Error) string {
	if e == nil {
		return "ok"
	}
	return e.Code
}

func TestBatchConflicts(t *testing.T) {
	s, err := Open(t.TempDir(), Options{MaxValue: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Checked in order within one batch, against the batch's own effects.
	errs := commit(t, s,
		save("a", "x/y", "1"),           // ok
		save("a", "x", "2"),             // EISDIR: x is a folder now
		save("a", "x/y/z", "3"),         // ENOTDIR: x/y is a key
		del("a", "x/y"),                 // ok
		save("a", "x", "4"),             // ok: the folder is empty again
		del("a", "nope"),                // ENOENT
		save("a", "big", "0123456789A"), // E2BIG
		save("a", "../esc", "v"),        // EINVAL
	)
	want := []string{"ok", "EISDIR", "ENOTDIR", "ok", "ok", "ENOENT", "E2BIG", "EINVAL"}
	for i := range want {
		if code(errs[i]) != want[i] {
			t.Errorf("change %d: %s, want %s", i, code(errs[i]), want[i])
		}
	}
	v, _, err := s.Load("a", "x")
	if err != nil || string(v) != "4" {
		t.Fatalf("x = %q, %v", v, err)
	}
	if _, _, err := s.Load("a", "x/y"); err == nil {
		t.Fatal("x/y still loads")
	}
	s.Flush()
	b, err := os.ReadFile(filepath.Join(s.repo, "a", "state", "x"))
	if err != nil || string(b) != "4" {
		t.Fatalf("work tree x = %q, %v (stale folder not replaced by the key)", b, err)
	}
}

func TestReplayAndTornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("a", "k1", "one"), save("a", "dir/k2", "two"))
	commit(t, s, del("a", "k1"), save("a", "k3", "three"))
	// Simulate a crash: copy the data as it is on disk now (journal not yet
	// checkpointed) and add a torn record to the journal.
	s.Flush()
	crash := t.TempDir()
	copyTree(t, dir, crash)
	end := s.j.pos
	s.Close()
	// Undo the work tree so only the journal knows the truth.
	os.RemoveAll(filepath.Join(crash, "repo"))
	f, _ := os.OpenFile(filepath.Join(crash, "journal", "wal"), os.O_WRONLY, 0)
	f.WriteAt([]byte{200, 0, 0, 0, 1, 2, 3}, end) // a header promising 200 bytes that never came
	f.Close()

	s2, err := Open(crash, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for k, want := range map[string]string{"dir/k2": "two", "k3": "three"} {
		v, _, err := s2.Load("a", k)
		if err != nil || string(v) != want {
			t.Errorf("after replay %s = %q, %v; want %q", k, v, err, want)
		}
	}
	if _, _, err := s2.Load("a", "k1"); err == nil {
		t.Error("deleted k1 came back")
	}
	if s2.j.size() != 0 || s2.j.gen != 2 {
		t.Errorf("no checkpoint after replay: %d bytes in generation %d", s2.j.size(), s2.j.gen)
	}
	b, err := os.ReadFile(filepath.Join(crash, "repo", "agents", "a", "state", "dir", "k2"))
	if err != nil || string(b) != "two" {
		t.Errorf("replay did not rebuild the work tree: %q %v", b, err)
	}
}

// copyTree copies src to dst as a crash would find it: a file that goes
// while it is copied (a key snapshot written behind a checkpoint,
// renamed into place) is not copied; any other error fails t.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// TestJournalGenerations: records of an older generation, left in the
// reused file after a checkpoint, are not replayed.
func TestJournalGenerations(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, Options{})
	commit(t, s, save("a", "k", "old-1"), save("a", "j", "old-2"), save("a", "i", "old-3"))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("a", "k", "new"))
	s.Flush()
	crash := t.TempDir()
	copyTree(t, dir, crash)
	s.Close()
	os.RemoveAll(filepath.Join(crash, "repo"))
	s2, err := Open(crash, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if v, _, _ := s2.Load("a", "k"); string(v) != "new" {
		t.Fatalf("k = %q", v)
	}
	// j and i were only in the old generation (and the removed tree).
	if _, _, err := s2.Load("a", "j"); err == nil {
		t.Fatal("a record of the previous generation was replayed")
	}
}

// TestJournalBoundedUnderLoad: with changes arriving without a pause the
// journal still checkpoints once past its threshold instead of growing.
func TestJournalBoundedUnderLoad(t *testing.T) {
	s, _ := Open(t.TempDir(), Options{CheckpointBytes: 64 << 10})
	defer s.Close()
	value := bytes.Repeat([]byte("x"), 1000)
	for i := 0; i < 1000; i++ { // about 1 MB of records, no pause
		commit(t, s, &Change{Agent: "a", Key: fmt.Sprintf("k%d", i%50), Value: value})
		s.jmu.Lock()
		size, gen := s.j.size(), s.j.gen
		s.jmu.Unlock()
		if size > 64<<10+4096 {
			t.Fatalf("after %d commits the journal holds %d bytes in generation %d", i, size, gen)
		}
	}
	if v, _, err := s.Load("a", "k7"); err != nil || !bytes.Equal(v, value) {
		t.Fatalf("value lost across checkpoints: %d bytes, %v", len(v), err)
	}
}

func TestDamagedJournalRefused(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, Options{})
	s.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "journal", "wal"), os.O_WRONLY, 0)
	f.WriteAt([]byte("garbage!"), 0)
	f.Close()
	if _, err := Open(dir, Options{}); err == nil || !errors.Is(err, ErrJournalDamaged) {
		t.Fatalf("opened a journal with a damaged header: %v", err)
	}
}

func TestListAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(dir, Options{})
	commit(t, s, save("a", "n/1", "x"), save("a", "n/2", "yy"), save("a", "nx", "z"), save("b", "k", "v"))
	recs, _ := s.List("a", "n")
	if len(recs) != 2 || recs[0].Key != "n/1" || recs[1].Key != "n/2" || recs[1].Size != 2 {
		t.Fatalf("list n: %+v", recs)
	}
	if recs, _ := s.List("a", ""); len(recs) != 3 {
		t.Fatalf("list all: %+v", recs)
	}
	if _, err := s.List("zz", ""); err == nil {
		t.Fatal("list of an unknown agent succeeded")
	}
	s.Close()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if recs, _ := s.List("a", ""); len(recs) != 3 {
		t.Fatalf("after reopen: %+v", recs)
	}
	if got := s.Agents(); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("agents %v", got)
	}
}

// TestConcurrentReadersSeeWholeValues: loads racing with saves of the same
// key see one whole value or another, never a mix.
func TestConcurrentReadersSeeWholeValues(t *testing.T) {
	s, _ := Open(t.TempDir(), Options{CacheBytes: 1})
	defer s.Close()
	vals := [][]byte{bytes.Repeat([]byte("a"), 100<<10), bytes.Repeat([]byte("b"), 50<<10)}
	commit(t, s, &Change{Agent: "a", Key: "k", Value: vals[0]})
	stop := loading(t, s, "a", "k", func(v []byte) bool { return bytes.Equal(v, vals[0]) || bytes.Equal(v, vals[1]) })
	for i := 0; i < 200; i++ {
		commit(t, s, &Change{Agent: "a", Key: "k", Value: vals[i%2]})
	}
	stop()
}

// loading loads agent's key from 2 goroutines over and over until stop is
// called (which waits for them), failing t at a load that errs or whose
// value whole rejects.
func loading(t *testing.T, s *Store, agent, key string, whole func([]byte) bool) (stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				v, _, err := s.Load(agent, key)
				if err != nil || !whole(v) {
					t.Errorf("torn load of %s/%s: %d bytes %.20q, %v", agent, key, len(v), v, err)
					return
				}
			}
		}()
	}
	return func() {
		close(done)
		wg.Wait()
	}
}

// TestOverlayAccounting: once the applier is done, the overlay counts
// nothing, however often keys changed before it came.
func TestOverlayAccounting(t *testing.T) {
	s, _ := Open(t.TempDir(), Options{})
	defer s.Close()
	v := bytes.Repeat([]byte("v"), 1000)
	for i := 0; i < 50; i++ {
		commit(t, s, &Change{Agent: "a", Key: "k", Value: v[:i*10]}, &Change{Agent: "a", Key: "k", Value: v})
		commit(t, s, &Change{Agent: "a", Key: fmt.Sprint("gone", i), Value: v})
		commit(t, s, del("a", fmt.Sprint("gone", i)))
	}
	s.qmu.Lock()
	if s.pending <= 1000 {
		t.Errorf("the overlay counts %d bytes before the applier ran", s.pending)
	}
	s.qmu.Unlock()
	s.Flush()
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.pending != 0 {
		t.Fatalf("the overlay counts %d bytes with nothing pending", s.pending)
	}
}

// A change whose file cannot be written stays durable: no checkpoint
// recycles the journal while it is not in its file, a crash replays it,
// and once the files can be written again a checkpoint writes it.
func TestFailedWriteKeepsJournal(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit(t, s, save("a", "k0", "zero"))
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil { // temp files cannot be made
		t.Fatal(err)
	}
	commit(t, s, save("a", "k", "value"))
	if err := s.Checkpoint(); err == nil || s.j.size() == 0 {
		t.Fatalf("checkpoint with an unwritten change: %v, journal %d bytes; want an error and the journal kept", err, s.j.size())
	}
	if v, _, err := s.Load("a", "k"); err != nil || string(v) != "value" {
		t.Fatalf("read while unwritten: %q %v", v, err)
	}
	crash := t.TempDir()
	copyTree(t, dir, crash)
	s2, err := Open(crash, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(crash, "repo", "agents", "a", "state", "k")); err != nil || string(b) != "value" {
		t.Errorf("after a crash, the replay wrote %q %v; want value", b, err)
	}
	s2.Close()

	os.Remove(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(); err != nil || s.j.size() != 0 {
		t.Fatalf("checkpoint once writable: %v, journal %d bytes", err, s.j.size())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "repo", "agents", "a", "state", "k")); err != nil || string(b) != "value" {
		t.Errorf("retried write: %q %v", b, err)
	}
}

// niceThreads counts the threads of this process at the applier's nice
// value (field 19 of /proc/self/task/TID/stat).
func threadNice(tid int32) (nice string, alive bool) {
	b, err := os.ReadFile(filepath.Join("/proc/self/task", strconv.Itoa(int(tid)), "stat"))
	if err != nil {
		return "", false // the thread ended
	}
	// The command, field 2, is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) <= 16 {
		return "", true
	}
	return f[16], true
}

// The applier runs on a thread of its own at a lower priority, which
// ends with the store. (Its own thread, by its id: counting the niced
// threads of the process raced with other tests' stores.)
func TestApplierThreadIsNiced(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc:", err)
	}
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("a", "k", "v"))
	s.Flush()
	tid := s.applierTID.Load()
	if nice, alive := threadNice(tid); tid == 0 || !alive || nice != strconv.Itoa(applierNice) {
		s.Close()
		t.Fatalf("the applier's thread %d: nice %q (alive %v), want %d", tid, nice, alive, applierNice)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, alive := threadNice(tid); !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the applier's thread %d outlives the store", tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnknownRecordKindRefused: an intact record of a kind this version
// does not know (a newer oxiosd's) stops the start with a reason; it is
// not taken for a torn tail, which would drop the acknowledged changes
// after it.
func TestUnknownRecordKindRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("a", "k1", "one"))
	commit(t, s, save("a", "k2", "two"))
	s.Flush()
	crash := t.TempDir()
	copyTree(t, dir, crash)
	s.Close()
	// The first record becomes kind 99, its checksum made right again.
	f, err := os.OpenFile(filepath.Join(crash, "journal", "wal"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [recHeader]byte
	if _, err := f.ReadAt(hdr[:], journalHeader); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, binary.LittleEndian.Uint32(hdr[:4]))
	if _, err := f.ReadAt(p, journalHeader+recHeader); err != nil {
		t.Fatal(err)
	}
	if k := p[8] &^ batchStart; k != recSave && k != recSaveMeta {
		t.Fatalf("first record is of kind %d, not a save", p[8])
	}
	p[8] = 99 | p[8]&batchStart
	j, err := openJournal(filepath.Join(crash, "journal", "wal"), minJournalChunk)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint32(hdr[4:], j.sum(p))
	j.close()
	f.WriteAt(hdr[:], journalHeader)
	f.WriteAt(p, journalHeader+recHeader)

	s2, err := Open(crash, Options{})
	if err == nil {
		s2.Close()
		t.Fatal("a journal with a record of an unknown kind was opened")
	}
	if !strings.Contains(err.Error(), "unknown record kind 99") || !strings.Contains(err.Error(), "newer oxiosd") {
		t.Errorf("error %q does not name the kind and the cause", err)
	}
}

// A second Close does nothing and returns what the first returned; the
// store reopens with what was saved.
func TestCloseTwice(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, s, save("a", "k", "v"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _, err := s.Load("a", "k"); err != nil || string(v) != "v" {
		t.Fatalf("after reopening: %q %v", v, err)
	}
}

// TestApplierWaitsForALullUnderLoad: under a steady stream of saves the
// applier writes a key's file about once per applyMaxDelay, not after
// every run of its own: a run takes what came during the last one only
// when its timer fires. Before, it took it at once, and the file of a
// key saved every few milliseconds was made again after each run.
func TestApplierWaitsForALullUnderLoad(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer s.Close()
	const keys = 32
	file := func(i int) string { return filepath.Join(dir, "repo", "agents", "a", "state", fmt.Sprintf("k%d", i)) }
	type made struct {
		key int
		ino uint64
	}
	files := map[made]bool{}
	last := make([]string, keys)
	start := time.Now()
	// Batches of a save of each key, one after the other, as a daemon
	// under many clients commits them: the applier's queue never empties.
	for i := 0; time.Since(start) < 2*applyMaxDelay+applyMaxDelay/4; i++ {
		var batch []*Change
		for k := range keys {
			last[k] = fmt.Sprintf("v%d", i)
			batch = append(batch, save("a", fmt.Sprintf("k%d", k), last[k]))
		}
		commit(t, s, batch...)
		for k := range keys {
			if fi, err := os.Stat(file(k)); err == nil {
				files[made{k, fi.Sys().(*syscall.Stat_t).Ino}] = true
			}
		}
		// Below applyBatch changes in applyMaxDelay, which would start
		// a run at once.
		time.Sleep(2 * time.Millisecond)
	}
	// A run at about applyMaxDelay and one at twice it (a loaded machine
	// may split one): at most a few files per key. Taking each run's
	// leftovers at once made one for about every run of the applier. And
	// at least one: a run that found each key's change outdated by a
	// later one wrote no file at all until the saves stopped.
	seen := map[int]bool{}
	for f := range files {
		seen[f.key] = true
	}
	if len(files) > 4*keys || len(seen) < keys {
		t.Fatalf("%d keys saved without a pause had %d files made in %v, of %d keys", keys, len(files), time.Since(start).Round(time.Millisecond), len(seen))
	}
	// The stream stopped: the files follow within a lull.
	deadline := time.Now().Add(applyMaxDelay + time.Second)
	for k := range keys {
		for {
			if b, err := os.ReadFile(file(k)); err == nil && string(b) == last[k] {
				break
			}
			if time.Now().After(deadline) {
				b, err := os.ReadFile(file(k))
				t.Fatalf("file of k%d after the stream stopped: %q %v, want %q", k, b, err, last[k])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
