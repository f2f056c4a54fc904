// Package uncommitted keeps the set of paths of the versioned tree changed
// since the last commit, so that a commit costs what changed and never a
// scan of the tree. The set survives restarts: each checkpoint of the
// state journal saves it to a file (Save) before the journal is recycled,
// and the journal's later records are marked again when replayed. Without
// that file (deleted, unreadable) the set is unknown, and NeedRescan says
// that the next commit must compare every key with HEAD: slower, never
// wrong.
package uncommitted

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Set is the set of uncommitted paths.
type Set struct {
	// file, DATA/index/uncommitted, lists the paths uncommitted at the
	// last checkpoint, sorted. The set lives there, not in memory: at a
	// million uncommitted memories it is 56 MB, which a start would read
	// and the heap would hold for nothing (only a commit reads it).
	file string

	// fmu orders rewrites of the file (Save) and reads of the set
	// (Under), so that neither sees the file and the changes since
	// from two different checkpoints.
	fmu sync.Mutex
	mu  sync.Mutex
	// Since the file was written: the paths made uncommitted (dirty) and
	// committed (cleaned), which the file may list. A path is in one at
	// most: the later of its mark and its commit wins.
	dirty, cleaned map[string]struct{}
	rescan         bool // the set is unknown: compare everything at the next commit
}

// Open opens the set saved in file. haveHead says whether anything was
// committed yet: with nothing committed, a missing file is no loss (the
// first commit takes every path anyway). An unreadable file is removed,
// the set marked for a rescan, and the reason returned with the set, for
// the log.
func Open(file string, haveHead bool) (*Set, error) {
	s := &Set{file: file, dirty: map[string]struct{}{}, cleaned: map[string]struct{}{}}
	// Only the file's first line is read now; a commit reads the rest.
	err := checkUncommitted(file)
	switch {
	case err == nil:
		return s, nil
	case !haveHead && errors.Is(err, fs.ErrNotExist):
		return s, nil
	}
	s.rescan = true
	// Nothing it says counts now, and the next checkpoint and commit
	// would stumble on it: gone, it lists nothing.
	if rerr := os.Remove(file); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing the unreadable %s: %w", file, rerr)
	}
	return s, err
}

// NeedRescan reports whether the set is unknown: the caller must compare
// everything with HEAD, Mark the differences, then call Rescanned.
func (s *Set) NeedRescan() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rescan
}

// Lost records that the set may miss paths (a replayed change whose
// entry names none, such as an agent's fork): the next commit compares
// everything with HEAD.
func (s *Set) Lost() {
	s.mu.Lock()
	s.rescan = true
	s.mu.Unlock()
}

// Rescanned records that the differences with HEAD are marked.
func (s *Set) Rescanned() {
	s.mu.Lock()
	s.rescan = false
	s.mu.Unlock()
}

// Pending is how many paths the set holds in memory (changed since the
// last Save).
func (s *Set) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dirty) + len(s.cleaned)
}

// checkUncommitted reports whether file starts as a list of uncommitted
// paths does.
func checkUncommitted(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, len(uncommittedMagic))
	if _, err := io.ReadFull(f, b); err != nil || string(b) != uncommittedMagic {
		return errors.New("not a list of uncommitted paths")
	}
	return nil
}

// readUncommitted calls fn for each path of file below prefix, in order;
// a missing file lists none.
func readUncommitted(file, prefix string, fn func(p string)) error {
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	if !sc.Scan() || sc.Text()+"\n" != uncommittedMagic {
		return fmt.Errorf("%s: not a list of uncommitted paths", file)
	}
	for sc.Scan() {
		if p := sc.Text(); p != "" && strings.HasPrefix(p, prefix) {
			fn(p)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}

const uncommittedMagic = "oxios-uncommitted 1\n"

// Mark records uncommitted paths; the committer marks a batch's under
// one lock.
func (v *Set) Mark(paths ...string) {
	if len(paths) == 0 {
		return
	}
	v.mu.Lock()
	for _, p := range paths {
		v.dirty[p] = struct{}{}
		delete(v.cleaned, p)
	}
	v.mu.Unlock()
}

// Save writes the uncommitted paths for the next start (called in a
// checkpoint, whose syncfs makes the file durable before the journal that
// also knows them is recycled): the file's paths less those committed
// since, and those marked since, merged in order. Memory then holds only
// the changes from this checkpoint on.
func (v *Set) Save() error {
	v.fmu.Lock()
	defer v.fmu.Unlock()
	v.mu.Lock()
	if v.rescan {
		// The set is not known until the next commit compares every key
		// with HEAD. A list written now would be believed at the next
		// start; without one, that start compares every key too.
		v.mu.Unlock()
		if err := os.Remove(v.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the list of uncommitted paths: %w", err)
		}
		return nil
	}
	dirty, cleaned := v.dirty, v.cleaned
	v.dirty, v.cleaned = map[string]struct{}{}, map[string]struct{}{}
	v.mu.Unlock()
	err := writeUncommitted(v.file, dirty, cleaned, false)
	if err != nil {
		// Put back what the file does not hold, unless changed since.
		v.mu.Lock()
		for p := range dirty {
			if _, ok := v.cleaned[p]; !ok {
				v.dirty[p] = struct{}{}
			}
		}
		for p := range cleaned {
			if _, ok := v.dirty[p]; !ok {
				v.cleaned[p] = struct{}{}
			}
		}
		v.mu.Unlock()
	}
	return err
}

// writeUncommitted rewrites file as its paths less cleaned, with dirty
// merged in. With sync the new file is made durable before it replaces
// the old (a checkpoint's syncfs does it otherwise).
func writeUncommitted(file string, dirty, cleaned map[string]struct{}, sync bool) error {
	added := make([]string, 0, len(dirty))
	for p := range dirty {
		added = append(added, p)
	}
	sort.Strings(added)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("saving uncommitted paths: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	w.WriteString(uncommittedMagic)
	put := func(p string) {
		w.WriteString(p)
		w.WriteByte('\n')
	}
	err = readUncommitted(file, "", func(p string) {
		for len(added) > 0 && added[0] <= p {
			if added[0] != p {
				put(added[0])
			}
			added = added[1:]
		}
		if _, gone := cleaned[p]; !gone {
			put(p)
		}
	})
	for _, p := range added {
		put(p)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving uncommitted paths: %w", err)
	}
	return nil
}

// Under returns the uncommitted paths below prefix, sorted.
func (v *Set) Under(prefix string) ([]string, error) {
	v.fmu.Lock()
	defer v.fmu.Unlock()
	var out []string
	err := readUncommitted(v.file, prefix, func(p string) { out = append(out, p) })
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	kept := out[:0]
	for _, p := range out {
		if _, gone := v.cleaned[p]; !gone {
			kept = append(kept, p)
		}
	}
	out = kept
	for p := range v.dirty {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	v.mu.Unlock()
	slices.Sort(out)
	return slices.Compact(out), nil
}

// compactAfter is how many committed paths the set holds in memory
// before Clean takes them out of its file (a variable for tests).
var compactAfter = 4096

// Clean records paths as committed. Past compactAfter committed paths it
// rewrites the file without them: until the next checkpoint every commit
// would read them again (Under) and memory would hold them. After the
// first commit of a million keys, that was a read of a 50 MB list at each
// later commit of 10 keys, and 100 bytes a key held (issue 51).
func (v *Set) Clean(paths []string) {
	v.mu.Lock()
	for _, p := range paths {
		delete(v.dirty, p)
		v.cleaned[p] = struct{}{}
	}
	big := len(v.cleaned) >= compactAfter
	v.mu.Unlock()
	if big {
		// A failure leaves the set as it is: right, only slower.
		_ = v.compact()
	}
}

// compact rewrites the file without the paths committed since it was
// written. Paths marked since stay in memory, as they do until a
// checkpoint: the journal that marks them again after a crash is not
// recycled before the next Save. The new file is synced before it
// replaces the old, so that a crash leaves one or the other whole (a
// path it drops was committed, durably, before Clean).
func (v *Set) compact() error {
	v.fmu.Lock()
	defer v.fmu.Unlock()
	v.mu.Lock()
	if v.rescan {
		v.mu.Unlock()
		return nil
	}
	cleaned := v.cleaned
	v.cleaned = map[string]struct{}{}
	v.mu.Unlock()
	if _, err := os.Stat(v.file); errors.Is(err, fs.ErrNotExist) {
		// No file (none saved yet, or the set was rescanned since the
		// last was lost): the committed paths filter nothing. One is not
		// made here: only a checkpoint's Save says the set is known.
		return nil
	}
	err := writeUncommitted(v.file, nil, cleaned, true)
	if err != nil {
		// Put back what the file still holds, unless marked since.
		v.mu.Lock()
		for p := range cleaned {
			if _, ok := v.dirty[p]; !ok {
				v.cleaned[p] = struct{}{}
			}
		}
		v.mu.Unlock()
	}
	return err
}
