// Package durable makes changes to files and folders survive a crash,
// tells whether a folder takes such a write now (Probe), and makes the
// data directory its owner's alone (Private).
//
// A write is durable once its data and the folder entry that names it
// are on disk: the file needs an fsync before it is renamed into place
// (else a crash may leave the new name on empty or partial data), and
// the folder needs one after a creation, rename or removal (else the
// entry may be lost though the data is not). The store, the audit log
// and versioning all need this; here it is written once.
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SyncDir makes the entries of dir (creations, renames, removals)
// durable.
func SyncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return &fs.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// WriteFile replaces path with data, atomically and durably: it writes
// tmp, a name in the same folder, fsyncs it, renames it over path and
// fsyncs the folder. On error tmp is removed and path is as it was, or
// (if only the folder's fsync failed) replaced but maybe not durably.
func WriteFile(path, tmp string, data []byte, perm fs.FileMode) error {
	st, err := Stage(path, tmp, data, perm)
	if err != nil {
		return err
	}
	return st.Place()
}

// Staged is a file written and fsynced under a temporary name, not yet
// in place. Staging lets a caller fsync several files at once (their
// fsyncs overlap instead of queueing) and still choose the order in
// which they become visible: Place each in turn.
type Staged struct{ path, tmp string }

// Stage writes data to tmp, a name in path's folder, and fsyncs it.
func Stage(path, tmp string, data []byte, perm fs.FileMode) (*Staged, error) {
	return StageWith(path, tmp, perm, func(f *os.File) error {
		_, err := f.Write(data)
		return err
	})
}

// StageWith is Stage for content that write streams into tmp (see
// WriteWith).
func StageWith(path, tmp string, perm fs.FileMode, write func(f *os.File) error) (*Staged, error) {
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return nil, err
	}
	return &Staged{path: path, tmp: tmp}, nil
}

// Place renames the staged file over its path and fsyncs the folder. On
// error the temporary file is removed, as by Drop.
func (s *Staged) Place() error {
	if err := os.Rename(s.tmp, s.path); err != nil {
		os.Remove(s.tmp)
		return err
	}
	return SyncDir(filepath.Dir(s.path))
}

// Drop removes the staged file: it is not placed.
func (s *Staged) Drop() { os.Remove(s.tmp) }

// WriteWith is WriteFile for content that write streams into tmp, opened
// for reading and writing (write may seek back, to fill in a length), so
// that a large file need not be held in memory first.
func WriteWith(path, tmp string, perm fs.FileMode, write func(f *os.File) error) error {
	st, err := StageWith(path, tmp, perm, write)
	if err != nil {
		return err
	}
	return st.Place()
}

// Remove removes path, if it exists, and makes that durable.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// MkdirAll creates dir and its missing parents with perm, making each
// new folder's entry durable in its parent.
func MkdirAll(dir string, perm fs.FileMode) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: unix.ENOTDIR}
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(parent)
}

// Private makes dir (and its parents) if missing, and makes it its
// owner's alone (0700) even if it was there with other permissions: a
// daemon's data directory.
func Private(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// Probe reports whether a file can be written and synced in dir now: it
// makes dir if need be, writes a file there, syncs and removes it.
func Probe(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "status-")
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("ok\n"))
	if serr := f.Sync(); err == nil {
		err = serr
	}
	f.Close()
	os.Remove(f.Name())
	return err
}
