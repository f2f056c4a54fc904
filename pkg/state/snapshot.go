package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/proto"
)

// The key snapshot spares a start the walk of the work tree, which at a
// million memories is a million stats (seconds). A clean Close, once the
// work tree is durable and the journal empty at generation G, writes every
// tree's keys with their sizes and modification times to
// DATA/index/state.keys, stamped with G. Open uses it instead of the walk
// only if
//
//   - it is whole (its CRC) and of this format (its magic);
//   - the journal's generation is still G, and the journal is not new (a
//     journal moved away and started afresh counts generations from 1
//     again);
//   - every folder of the tree it names (DATA/repo/agents, each agent's,
//     each tree's and each folder of keys) has the inode and ctime it had:
//     a file created, removed or renamed behind the store's back, such as
//     a checkout or a copy into DATA/repo while the daemon was stopped,
//     changes its folder's ctime. (A file rewritten in place is not seen:
//     its size and time would be stale until the next walk.)
//
// A snapshot is also written behind every checkpoint (and after a start
// that had to walk), so that a start after a crash need not walk either
// (issue 45: 30.8 s at a million keys). It is fuzzy: written while the
// store goes on, stamped with the generation the checkpoint began, it
// holds each key as it was before or after the changes made while it was
// written, and every one of those changes is in the journal of that
// generation. A start that finds the journal at the snapshot's
// generation loads it and replays the journal over it, as it would over
// a walk. The folders the journal's records change (the folders of their
// keys and those above them; the whole tree a fork makes) are left out
// of the check above: the applier changed them, and the replay gives
// their keys. So a file created or removed behind the store's back, while
// it was stopped, in a folder the journal also changes, is not seen
// until the next walk (as a file rewritten in place is not).
//
// Whatever the snapshot, the walk stays the truth; anything wrong with
// the snapshot falls back to it, and a snapshot not used is removed.
//
// Layout (little endian; varints as in encoding/binary):
//
//	"OXKEYS01" | generation u64 | body | crc32c(all before) u32
//	body:   folders uvarint | folder... | trees uvarint | tree...
//	folder: path (from DATA/repo/agents; "" for it) | inode uvarint | ctime unix-nanos varint
//	tree:   ref | keys uvarint | key...
//	key:    shared uvarint | rest | size uvarint | mod varint (less the previous key's)
//	string: length uvarint | bytes
//
// A tree's keys are sorted; shared is the length of the prefix a key has
// in common with the one before it (memory keys share kind/ and their
// ID's time), which keeps a million keys near 30 MB.

const (
	snapMagic = "OXKEYS01"
	snapName  = "state.keys"
	// snapChunk keys share one allocation for their entries and one for
	// their names: a million allocations cost more than the rest of the
	// load, and a chunk is freed once all its keys are replaced.
	snapChunk = 1024
)

var errSnapshot = errors.New("damaged or not a key snapshot")

func (s *Store) snapPath() string { return filepath.Join(s.data, "index", snapName) }

type snapKey struct {
	key       string
	size, mod int64
}

// saveSnapshot writes the key snapshot if the work tree holds exactly
// what the index says: no journal records, nothing queued or pending, no
// deletion not yet done. Close calls it after the final checkpoint.
func (s *Store) saveSnapshot() error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if n := s.j.size(); n != 0 {
		return fmt.Errorf("the journal still holds %d bytes", n)
	}
	s.qmu.Lock()
	idle := len(s.queue) == 0 && !s.busy
	s.qmu.Unlock()
	if !idle {
		return errors.New("changes are still queued for the work tree")
	}
	b, err := s.encodeSnapshot(s.j.gen, false)
	if err != nil {
		return err
	}
	return s.writeSnapshot(s.j.gen, b)
}

// writeSnapshot writes b, a snapshot of generation gen, unless one of a
// later generation was written meanwhile.
func (s *Store) writeSnapshot(gen uint64, b []byte) error {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	if gen < s.snapGen {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.snapPath()), 0o700); err != nil {
		return err
	}
	if err := durable.WriteFile(s.snapPath(), s.snapPath()+".tmp", b, 0o600); err != nil {
		return err
	}
	s.snapGen = gen
	return nil
}

// snapshotBehind writes a fuzzy snapshot of generation gen (see above)
// in the background: after a checkpoint that began gen, and after a
// start that walked. A failure only costs the next start after a crash
// its walk.
//
// One is written at a time: checkpoints that come while one is written
// leave only the latest generation for the writer to do next.
func (s *Store) snapshotBehind(gen uint64) {
	s.snapQ.Lock()
	defer s.snapQ.Unlock()
	if s.closing.Load() {
		return
	}
	s.snapNext = gen
	if s.snapBusy {
		return
	}
	s.snapBusy = true
	s.snapWG.Add(1)
	go func() {
		defer s.snapWG.Done()
		for {
			s.snapQ.Lock()
			gen := s.snapNext
			if gen == 0 || s.closing.Load() {
				s.snapBusy = false
				s.snapQ.Unlock()
				return
			}
			s.snapNext = 0
			s.snapQ.Unlock()
			t0 := time.Now()
			b, err := s.encodeSnapshot(gen, true)
			if err == nil {
				err = s.writeSnapshot(gen, b)
			}
			if err != nil {
				slog.Info("state: key snapshot behind the checkpoint not written: a start after a crash reads the work tree", "generation", gen, "err", err)
				continue
			}
			slog.Debug("state: key snapshot written behind the checkpoint", "generation", gen, "bytes", len(b), "took", time.Since(t0).Round(time.Millisecond))
		}
	}()
}

// stopSnapshots lets no more key snapshots start behind checkpoints and
// waits for the one being written.
func (s *Store) stopSnapshots() {
	s.snapQ.Lock()
	s.closing.Store(true)
	s.snapQ.Unlock()
	s.snapWG.Wait()
}

// encodeSnapshot lists the trees the way loadIndex finds them and takes
// their keys from the index. A fuzzy one (see above) takes each key as
// the index has it, the changes not yet in their files included (the
// journal has them), and leaves out a folder not made yet.
func (s *Store) encodeSnapshot(gen uint64, fuzzy bool) ([]byte, error) {
	ents, err := os.ReadDir(s.repo)
	if err != nil {
		return nil, err
	}
	folders := []string{""}
	var refs []string
	absent := map[string]bool{} // trees a walk finds empty, with no folder
	for _, de := range ents {
		if !de.IsDir() || proto.CheckAgent(de.Name()) != nil {
			continue
		}
		folders = append(folders, de.Name())
		for _, space := range Spaces {
			ref := Ref(space, de.Name())
			switch _, err := os.Stat(s.root(ref)); {
			case err == nil:
				folders = append(folders, de.Name()+"/"+space)
			case !errors.Is(err, fs.ErrNotExist):
				return nil, err
			case space != SpaceState:
				continue
			default:
				absent[ref] = true
			}
			refs = append(refs, ref)
		}
	}
	b := []byte(snapMagic)
	b = binary.LittleEndian.AppendUint64(b, gen)
	var trees []byte
	trees = binary.AppendUvarint(trees, uint64(len(refs)))
	var keys []snapKey
	for _, ref := range refs {
		a := s.agent(ref)
		switch {
		case a == nil && absent[ref]:
			a = &agent{}
		case a == nil:
			return nil, fmt.Errorf("%s is in the work tree but not in the index", s.root(ref))
		}
		space, name := SplitRef(ref)
		keys = keys[:0]
		a.mu.RLock()
		if len(a.tombs) > 0 && !fuzzy {
			a.mu.RUnlock()
			return nil, fmt.Errorf("%s: %d deleted keys are still in the work tree", ref, len(a.tombs))
		}
		for k, e := range a.keys {
			if !fuzzy && (e.pending() || e.linked()) {
				a.mu.RUnlock()
				return nil, fmt.Errorf("%s: %q is not in its file yet", ref, k)
			}
			keys = append(keys, snapKey{k, e.size, e.mod})
		}
		for dir := range a.dirs {
			folders = append(folders, name+"/"+space+"/"+dir)
		}
		a.mu.RUnlock()
		slices.SortFunc(keys, func(x, y snapKey) int { return strings.Compare(x.key, y.key) })
		trees = appendString(trees, ref)
		trees = binary.AppendUvarint(trees, uint64(len(keys)))
		prev, prevMod := "", int64(0)
		for _, k := range keys {
			n := 0
			for n < len(prev) && n < len(k.key) && prev[n] == k.key[n] {
				n++
			}
			trees = binary.AppendUvarint(trees, uint64(n))
			trees = appendString(trees, k.key[n:])
			trees = binary.AppendUvarint(trees, uint64(k.size))
			trees = binary.AppendVarint(trees, k.mod-prevMod)
			prev, prevMod = k.key, k.mod
		}
	}
	slices.Sort(folders)
	var stamps []byte
	kept := 0
	for _, f := range folders {
		ino, ctime, err := folderStamp(filepath.Join(s.repo, filepath.FromSlash(f)))
		if fuzzy && errors.Is(err, fs.ErrNotExist) {
			continue // made by a change of this generation, not written yet
		}
		if err != nil {
			return nil, err
		}
		stamps = appendString(stamps, f)
		stamps = binary.AppendUvarint(stamps, ino)
		stamps = binary.AppendVarint(stamps, ctime)
		kept++
	}
	b = binary.AppendUvarint(b, uint64(kept))
	b = append(b, stamps...)
	b = append(b, trees...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// folderStamp is what changes when an entry of the folder path is
// created, removed or renamed, or the folder is replaced.
func folderStamp(path string) (ino uint64, ctime int64, err error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, 0, &fs.PathError{Op: "stat", Path: path, Err: unix.ENOTDIR}
	}
	return st.Ino, st.Ctim.Nano(), nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// loadSnapshot loads the index from the key snapshot if there is one that
// can be trusted (see above), and removes it. It reports whether it did;
// if not, the index is as empty as before and the caller walks the tree.
func (s *Store) loadSnapshot() bool {
	path := s.snapPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		slog.Info("state: no key snapshot (the last stop was not clean, or this is the first start): reading the work tree")
		return false
	}
	var touched *touchedSet
	if err == nil {
		touched, err = s.journalTouches()
	}
	if err == nil {
		err = s.decodeSnapshot(b, touched)
	}
	if err != nil {
		clear(s.agents)
		slog.Warn("state: key snapshot not used: reading the work tree", "file", path, "err", err)
		if rerr := durable.Remove(path); rerr != nil {
			slog.Warn("state: cannot remove the key snapshot", "file", path, "err", rerr)
		}
		return false
	}
	s.snapGen = s.j.gen
	return true
}

// touchedSet is what the journal's records change in the work tree: the
// folders of their keys and those above them (paths as in a snapshot),
// and the trees forks make, whole.
type touchedSet struct {
	dirs  map[string]bool
	trees []string // "NAME/space"
}

func (t *touchedSet) has(folder string) bool {
	if t == nil {
		return false
	}
	if t.dirs[folder] {
		return true
	}
	for _, p := range t.trees {
		if folder == p || strings.HasPrefix(folder, p+"/") {
			return true
		}
	}
	return false
}

// journalTouches reads the journal's records (without replaying them)
// for the folders they change. The damaged
// parts of a journal are skipped: its replay reports them.
func (s *Store) journalTouches() (*touchedSet, error) {
	t := &touchedSet{dirs: map[string]bool{}}
	_, err := s.j.scan(func(r *record) error {
		switch r.kind {
		case recSave, recDelete, recSaveMeta:
			space, name := SplitRef(r.agent)
			t.dirs[""], t.dirs[name] = true, true
			t.dirs[name+"/"+space] = true
			forEachParent(r.key, func(dir string) { t.dirs[name+"/"+space+"/"+dir] = true })
		case recFork, recForkKeys:
			space, name := SplitRef(r.key)
			t.dirs[""], t.dirs[name] = true, true
			t.trees = append(t.trees, name+"/"+space)
		}
		return nil
	})
	return t, err
}

func (s *Store) decodeSnapshot(b []byte, touched *touchedSet) error {
	if len(b) < len(snapMagic)+8+4 || !bytes.HasPrefix(b, []byte(snapMagic)) {
		return errSnapshot
	}
	end := len(b) - 4
	if crc32.Checksum(b[:end], castagnoli) != binary.LittleEndian.Uint32(b[end:]) {
		return fmt.Errorf("%w: checksum mismatch", errSnapshot)
	}
	if gen := binary.LittleEndian.Uint64(b[len(snapMagic):]); gen != s.j.gen || s.j.fresh {
		return fmt.Errorf("written at journal generation %d, the journal is at %d (new: %v)", gen, s.j.gen, s.j.fresh)
	}
	r := snapReader{b: b[len(snapMagic)+8 : end]}
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		f, ino, ctime := string(r.bytes()), r.uvarint(), r.varint()
		if r.bad {
			break
		}
		if touched.has(string(f)) {
			continue // the journal's replay changes it
		}
		gotIno, gotCtime, err := folderStamp(filepath.Join(s.repo, filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("the work tree changed since: %w", err)
		}
		if gotIno != ino || gotCtime != ctime {
			return fmt.Errorf("the work tree changed since: %s was modified at %s", filepath.Join(s.repo, filepath.FromSlash(f)), time.Unix(0, gotCtime).UTC().Format(time.RFC3339Nano))
		}
	}
	for n := r.uvarint(); n > 0 && !r.bad; n-- {
		ref := string(r.bytes())
		if r.bad || checkRef(ref) != nil || s.agents[ref] != nil {
			return errSnapshot
		}
		if err := s.agentLocked(ref).decodeKeys(&r); err != nil {
			return err
		}
	}
	if r.bad || len(r.b) != 0 {
		return errSnapshot
	}
	return nil
}

// decodeKeys reads a tree's keys into a, which is empty.
func (a *agent) decodeKeys(r *snapReader) error {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) { // a key takes at least a byte
		return errSnapshot
	}
	a.keys = make(map[string]*entry, n)
	// The snapshot lists keys in order: kept as the tree's key order
	// (see sorted.go).
	order := make([]string, 0, n)
	var (
		last    []byte // the previous key
		mod     int64
		run     string // the last key of a run of keys in one folder
		runDir  string
		runKeys int
		names   []byte
		ends    []int
		ents    []entry
	)
	flushRun := func() {
		if runKeys > 0 {
			forEachParent(run, func(dir string) { a.dirs[dir] += runKeys })
		}
		runKeys = 0
	}
	for i := uint64(0); i < n; {
		// One chunk: the names as one string, the entries as one slice.
		m := min(n-i, snapChunk)
		names, ends = names[:0], ends[:0]
		ents = make([]entry, m)
		for j := range ents {
			shared := r.uvarint()
			rest := r.bytes()
			size := r.uvarint()
			mod += r.varint()
			if r.bad || shared > uint64(len(last)) || shared+uint64(len(rest)) == 0 || size > 1<<62 {
				return errSnapshot
			}
			last = append(last[:shared], rest...)
			names = append(names, last...)
			ends = append(ends, len(names))
			ents[j] = entry{size: int64(size), mod: mod}
		}
		str, start := string(names), 0
		for j := range ents {
			key := str[start:ends[j]]
			start = ends[j]
			if _, dup := a.keys[key]; dup {
				return errSnapshot
			}
			a.keys[key] = &ents[j]
			order = append(order, key)
			a.bytes += ents[j].size
			dir := key[:max(strings.LastIndexByte(key, '/'), 0)]
			if dir != runDir {
				flushRun()
				runDir = dir
			}
			run = key
			runKeys++
		}
		i += m
	}
	flushRun()
	if slices.IsSorted(order) {
		a.setOrder(order)
	}
	return nil
}

// checkRef reports whether ref names a tree the store can hold.
func checkRef(ref string) error {
	space, name := SplitRef(ref)
	if checkSpace(space) != nil || proto.CheckAgent(name) != nil {
		return errSnapshot
	}
	return nil
}

type snapReader struct {
	b   []byte
	bad bool
}

func (r *snapReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *snapReader) bytes() []byte {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}
