package state

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/oxios/oxios/pkg/durable"
	"github.com/oxios/oxios/pkg/proto"
)

// What a key has besides its value and the value's time: the mode the
// mount gave it (chmod) and the time of its last change of any kind (its
// ctime, when that is not the value's time: after a chmod or a touch).
// Few keys have either, so they live in a sparse map per agent, not in
// the index's entries (a million memories would pay for them), and are
// kept across restarts in DATA/index/meta, rewritten at a checkpoint when
// they changed (the journal holds them until then).
//
// Folders have no record in the store; their time is that of the last
// key made or deleted in them since the store opened (see FolderTime).

// keyMeta is one key's metadata. The zero value is none: mode 0644,
// ctime the value's time.
type keyMeta struct {
	mode  uint32 // with proto.ModeSet, or 0
	ctime int64  // unix nanoseconds, or 0: the value's time
}

const metaName = "meta"

func (s *Store) metaPath() string { return filepath.Join(s.data, "index", metaName) }

// setMeta applies r to the key's metadata; had says whether the key
// existed before. It reports whether the metadata changed.
func (a *agent) setMeta(r *record, had bool) bool {
	old := a.meta[r.key]
	var m keyMeta
	switch r.kind {
	case recDelete:
	case recSaveMeta:
		m = keyMeta{mode: r.mode, ctime: r.ctime}
		if m.mode&proto.ModeSet == 0 && had {
			m.mode = old.mode
		}
		if m.ctime == r.mod.UnixNano() {
			m.ctime = 0
		}
	default:
		// A plain save: the key's mode stays, its ctime is the value's.
		if had {
			m.mode = old.mode
		}
	}
	if m == old {
		return false
	}
	if m == (keyMeta{}) {
		delete(a.meta, r.key)
	} else {
		if a.meta == nil {
			a.meta = map[string]keyMeta{}
		}
		a.meta[r.key] = m
	}
	return true
}

// fillMeta puts the key's metadata into rec (whose Modified is set).
// Called with a.mu held.
func (a *agent) fillMeta(key string, rec *proto.StateRecord) {
	rec.Changed = rec.Modified
	if m, ok := a.meta[key]; ok {
		rec.Mode = m.mode
		if m.ctime != 0 {
			rec.Changed = time.Unix(0, m.ctime).UTC()
		}
	}
}

// touchFolder records that a name came or went in key's folder (and so
// in the agent's top folder, "", for a key there).
func (a *agent) touchFolder(key string, t int64) {
	if a.folders == nil {
		a.folders = map[string]int64{}
	}
	dir := ""
	if i := lastSlash(key); i >= 0 {
		dir = key[:i]
	}
	a.folders[dir] = t
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

// FolderTime returns when a key was last made or deleted directly in the
// folder prefix ("" for the agent's top folder) since the store opened,
// or false if none was.
func (s *Store) FolderTime(agentName, prefix string) (time.Time, bool) {
	a := s.agent(agentName)
	if a == nil {
		return time.Time{}, false
	}
	a.mu.RLock()
	t, ok := a.folders[prefix]
	a.mu.RUnlock()
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, t).UTC(), true
}

// metaLine is a line of DATA/index/meta.
type metaLine struct {
	Ref   string `json:"ref"`
	Key   string `json:"key"`
	Mode  uint32 `json:"mode,omitempty"`
	Ctime int64  `json:"ctime,omitempty"`
}

// saveMeta writes every key's metadata to DATA/index/meta, durably, if it
// changed since it was last written. Called by checkpoint, with the
// journal held (no change is published meanwhile).
func (s *Store) saveMeta() error {
	if !s.metaDirty.Load() {
		return nil
	}
	var lines []metaLine
	s.mu.RLock()
	for ref, a := range s.agents {
		a.mu.RLock()
		for k, m := range a.meta {
			lines = append(lines, metaLine{Ref: ref, Key: k, Mode: m.mode, Ctime: m.ctime})
		}
		a.mu.RUnlock()
	}
	s.mu.RUnlock()
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].Ref != lines[j].Ref {
			return lines[i].Ref < lines[j].Ref
		}
		return lines[i].Key < lines[j].Key
	})
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i := range lines {
		if err := enc.Encode(&lines[i]); err != nil {
			return err
		}
	}
	p := s.metaPath()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if err := durable.WriteFile(p, p+".tmp", b.Bytes(), 0o600); err != nil {
		return err
	}
	s.metaDirty.Store(false)
	return nil
}

// loadMeta reads DATA/index/meta into the index (loaded before): lines of
// keys the index does not have are stale and left out.
func (s *Store) loadMeta() error {
	b, err := os.ReadFile(s.metaPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l metaLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			s.metaDirty.Store(true) // a damaged line: rewritten without it
			continue
		}
		a := s.agent(l.Ref)
		if a == nil {
			continue
		}
		a.mu.Lock()
		if _, ok := a.keys[l.Key]; ok {
			if a.meta == nil {
				a.meta = map[string]keyMeta{}
			}
			a.meta[l.Key] = keyMeta{mode: l.Mode, ctime: l.Ctime}
		}
		a.mu.Unlock()
	}
	return sc.Err()
}
