package state

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/oxios/oxios/pkg/proto"
)

// What the FUSE view needs from the store beyond Load and Stat.

// HasAgent reports whether agentName has state in the store (or had: an
// agent whose keys were all deleted stays known until the next start).
func (s *Store) HasAgent(agentName string) bool { return s.agent(agentName) != nil }

// Open returns the current value of key in the form cheapest to read: an
// open read-only file when the key's file holds exactly that value (the
// mount serves large reads from it with splice or passthrough), or the
// value itself when it is in memory (not yet in its file, or cached).
// Exactly one of the file and the value is set; the caller closes the
// file.
func (s *Store) Open(agentName, key string) (*os.File, []byte, proto.StateRecord, error) {
	rec := proto.StateRecord{Type: proto.RecordState, Agent: agentName, Key: key}
	a := s.agent(agentName)
	if a == nil {
		return nil, nil, rec, proto.Errorf(proto.ENOENT, "no agent %q", agentName)
	}
	a.mu.RLock()
	e := a.keys[key]
	if e == nil {
		isDir := a.dirs[key] > 0
		a.mu.RUnlock()
		if isDir {
			return nil, nil, rec, proto.Errorf(proto.EISDIR, "%s: %q is a folder of keys, not a key", agentName, key)
		}
		return nil, nil, rec, proto.Errorf(proto.ENOENT, "%s: no key %q", agentName, key)
	}
	rec.Size, rec.Modified = e.size, e.modTime()
	a.fillMeta(key, &rec)
	if e.pending() || e.val != nil {
		v := e.val
		a.mu.RUnlock()
		return nil, v, rec, nil
	}
	// The entry is current and its value is in its file. Opening under
	// the agent's read lock pins that: a newer value must be published
	// (under the write lock) before the applier may rename it into place.
	// A fork's linked entry: the origin's file, not replaced before the
	// link is made (see fork.go).
	path := s.path(agentName, key)
	if e.linked() {
		path = s.path(a.origin.name, key)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	a.mu.RUnlock()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return nil, nil, rec, proto.Errorf(proto.ENOENT, "%s: no key %q", agentName, key)
		}
		return nil, nil, rec, proto.Errorf(proto.EIO, "%s: opening %q: %v", agentName, key, err)
	}
	return os.NewFile(uintptr(fd), path), nil, rec, nil
}
