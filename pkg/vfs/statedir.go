package vfs

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// The changes of names in an agent's state folders: a file made, a key
// deleted, a file or a folder renamed. The adapter keeps the tree (which
// names it shows, which file is where) and has checked the names and the
// caller's leave; these carry the change to the store and to the files
// it touches.

// Create makes a file at agent's key, which has none yet, opened for
// writing by c (the handle of create(2)) with mode. Its place is where
// tells (see File). It is saved at its first close even if nothing was
// written: `touch new` makes an empty key.
func (s *States) Create(c *kernel.Cred, agent string, where func() (string, bool), mode uint32, flags int) (*StateFile, *StateHandle, Attr) {
	f := s.File(agent, where)
	// The create's mode is kept with the key (0644, the default, needs
	// no saying).
	f.mode = mode & 0o7777
	f.modeSend = f.mode != 0o644
	f.modeHeld = f.modeSend
	f.local, f.loaded, f.dirty, f.unwritten, f.mtime = true, true, true, true, time.Now()
	f.ctime = f.mtime
	f.writers, f.cred = 1, c
	s.markBusy(f, true)
	f.mu.Lock()
	a := f.attrLocked(0, f.mtime)
	f.mu.Unlock()
	return f, &StateHandle{f: f, c: c, write: true, append: flags&syscall.O_APPEND != 0, Direct: true}, a
}

// Unlink deletes agent's key: f is its file if the adapter has one,
// stored whether the store had the key when it looked. The file is
// marked gone and the delete queued under its lock: a close racing with
// the unlink cannot queue its save after the delete.
func (s *States) Unlink(c *kernel.Cred, agent, key string, f *StateFile, stored bool) error {
	if f == nil {
		_, err := s.k.StateDeleteSubmit(c, agent, key, s.own).Wait()
		return err
	}
	f.mu.Lock()
	f.gone, f.dirty, f.deferred = true, false, false
	var wait *kernel.Pending
	if stored || f.q.Busy() {
		p := s.k.StateDeleteSubmit(c, agent, key, s.own)
		wait = &p
	}
	f.mu.Unlock()
	if wait == nil {
		return nil // made here, never saved
	}
	if _, err := wait.Wait(); err != nil && !(isCode(err, proto.ENOENT) && !stored) {
		f.markGone(false)
		return err
	}
	return nil
}

// RenameFile moves a key: the new key gets the content readers see now
// (the last closed version), then the old key is deleted. A working copy
// still being written moves with its file and is saved under the new
// name at its close. src and dst are the files at the two keys if the
// adapter has them; oldStored and newStored whether the store had the
// keys when it looked.
func (s *States) RenameFile(ctx context.Context, c *kernel.Cred, agent string, src *StateFile, oldKey string, oldStored bool, dst *StateFile, newKey string, newStored bool) error {
	if dst != nil && dst != src {
		dst.markReplaced(true, newKey)
	}
	var waits []kernel.Pending
	var moving []byte
	// The new key keeps the file's mode and mtime (rename(2) changes
	// neither; its ctime is the rename's).
	saveNew := func(v []byte, mode uint32, mtime time.Time) {
		moving = v
		m := kernel.FileMeta{Mod: mtime}
		if mode != 0o644 {
			m.Mode = mode | proto.ModeSet
		}
		waits = append(waits, s.k.StateSubmitMeta(c, agent, newKey, v, m, s.own))
	}
	var shown []byte
	hasShown := false
	if src != nil {
		src.mu.Lock()
		shown, hasShown = src.q.Shown()
	}
	switch {
	case src != nil && src.deferred:
		// Closed empty, its save left to the release: the new key gets
		// that empty content now.
		saveNew([]byte{}, src.mode, src.mtime)
		src.deferred, src.dirty = false, false
	case hasShown:
		saveNew(shown, src.mode, src.mtime)
	case src != nil && src.unsavedLocked():
		// Never closed: nothing to save yet; the old target must go.
		if newStored {
			waits = append(waits, s.k.StateDeleteSubmit(c, agent, newKey, s.own))
		}
	default:
		v, rec, err := s.Load(ctx, c, agent, oldKey)
		if err != nil {
			if src != nil {
				src.mu.Unlock()
			}
			if dst != nil && dst != src {
				dst.markReplaced(false, "")
			}
			return err
		}
		mode := uint32(0o644)
		if rec.Mode&proto.ModeSet != 0 {
			mode = rec.Mode & 0o7777
		}
		saveNew(v, mode, rec.Modified)
	}
	// oldStored was looked up before src.mu was taken: a save of src that
	// was in flight then may have landed since (saving back to 0, local
	// false), and the old key must go all the same.
	if oldStored || src != nil && (src.q.Busy() || !src.local) {
		waits = append(waits, s.k.StateDeleteSubmit(c, agent, oldKey, s.own))
	}
	if src != nil {
		src.renamed = newKey // until the adapter's tree moves it, right after
		if moving != nil {
			src.moving, src.hasMoving = moving, true
		}
		src.mu.Unlock()
		defer func() {
			src.mu.Lock()
			src.moving, src.hasMoving = nil, false
			src.mu.Unlock()
		}()
	}
	return waitAll(waits, !oldStored)
}

// MoveFolder moves every key of agent below oldKey to newKey, each a
// save of the new key and a delete of the old. It is not atomic: the
// store has no rename, and a crash midway leaves both halves (nothing is
// lost). below are the files the adapter has below the folder: their
// working copies move with them, and their closes save under the new
// names. The folders made by mkdir below it move too; replaceEmpty: the
// empty folder at newKey, which it replaces, goes.
func (s *States) MoveFolder(ctx context.Context, c *kernel.Cred, agent, oldKey, newKey string, below []*StateFile, replaceEmpty bool) error {
	// Saves queued by closes below the folder must be in the store before
	// it is listed.
	s.Settle(agent)
	var recs []proto.StateRecord
	err := s.k.StateList(ctx, c, proto.StateListArgs{Agent: agent, Prefix: oldKey}, nil, func(r *proto.StateRecord) error {
		recs = append(recs, *r)
		return nil
	})
	if err != nil && !isCode(err, proto.ENOENT) {
		return err
	}
	for _, f := range below {
		f.mu.Lock()
		if k, ok := f.keyLocked(); ok && strings.HasPrefix(k, oldKey+"/") {
			f.renamed = newKey + k[len(oldKey):]
		}
		f.mu.Unlock()
	}
	var waits []kernel.Pending
	var held int64
	for _, r := range recs {
		v, _, err := s.Load(ctx, c, agent, r.Key)
		if err != nil {
			waitAll(waits, false)
			return err
		}
		waits = append(waits,
			s.k.StateSubmitMeta(c, agent, newKey+r.Key[len(oldKey):], v, kernel.FileMeta{Mode: r.Mode, Mod: r.Modified}, s.own),
			s.k.StateDeleteSubmit(c, agent, r.Key, s.own))
		// Bound what is held in memory.
		if held += int64(len(v)); held > 64<<20 {
			if err := waitAll(waits, false); err != nil {
				return err
			}
			waits, held = waits[:0], 0
		}
	}
	s.moveMade(agent, oldKey, newKey, replaceEmpty)
	return waitAll(waits, false)
}

// waitAll waits for queued changes and returns the first failure (a
// missing old key is fine when it was not known to be stored).
func waitAll(waits []kernel.Pending, missingOK bool) error {
	var first error
	for _, w := range waits {
		if _, err := w.Wait(); err != nil && first == nil && !(missingOK && isCode(err, proto.ENOENT)) {
			first = err
		}
	}
	return first
}

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}
