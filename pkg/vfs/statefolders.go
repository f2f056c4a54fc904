package vfs

import (
	"context"
	"strings"
	"syscall"

	"github.com/oxios/oxios/pkg/kernel"
)

// The folders of an agent's state. A folder is a key prefix: it is there
// while a key below it is. mkdir makes one that holds no key yet: the
// layer keeps it, in memory, with its mode, until a file is saved in it
// or it is removed (or the daemon stops). What only the adapter knows
// (whether a file it holds has content the store does not show yet:
// StateFile.Present) it tells these functions.

// Folder reports whether agent's key is a folder for c: in the store, or
// made by mkdir.
func (s *States) Folder(c *kernel.Cred, agent, key string) bool {
	return s.k.IsStateFolder(c, agent, key) || s.made(agent, key)
}

// made reports whether mkdir made key, still empty in the store.
func (s *States) made(agent, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.dirs[agent][key]
	return ok
}

// FolderMode is the mode mkdir gave key, if it made it.
func (s *States) FolderMode(agent, key string) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.dirs[agent][key]
	return m, ok
}

// SetFolderMode is chmod of key, kept if mkdir made it (a folder of the
// store has no mode of its own).
func (s *States) SetFolderMode(agent, key string, mode uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ld := s.dirs[agent]; ld != nil {
		if _, ok := ld[key]; ok {
			ld[key] = mode & 0o7777
		}
	}
}

// MadeFolders are the names of the folders mkdir made right below
// prefix ("" for the agent's state folder).
func (s *States) MadeFolders(agent, prefix string) []string {
	skip := 0
	if prefix != "" {
		skip = len(prefix) + 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for p := range s.dirs[agent] {
		if strings.HasPrefix(p, prefix) && len(p) > skip && (prefix == "" || p[len(prefix)] == '/') && !strings.Contains(p[skip:], "/") {
			names = append(names, p[skip:])
		}
	}
	return names
}

// HasFolders reports whether mkdir made any folder of agent still empty
// in the store.
func (s *States) HasFolders(agent string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dirs[agent]) > 0
}

// Exists reports what is at agent's key for c: a file (in the store, or
// present: made or saved through the layer and not committed yet) or a
// folder; stored whether the store has the key.
func (s *States) Exists(ctx context.Context, c *kernel.Cred, agent, key string, present bool) (file, dir, stored bool) {
	file = present
	if _, err := s.k.StateStat(ctx, c, agent, key); err == nil {
		file, stored = true, true
	}
	if !file {
		dir = s.Folder(c, agent, key)
	}
	return file, dir, stored
}

// Mkdir makes the folder key, with mode; EEXIST if a file or a folder is
// there (present: a file the adapter holds).
func (s *States) Mkdir(ctx context.Context, c *kernel.Cred, agent, key string, mode uint32, present bool) error {
	if file, dir, _ := s.Exists(ctx, c, agent, key, present); file || dir {
		return syscall.EEXIST
	}
	s.mu.Lock()
	ld := s.dirs[agent]
	if ld == nil {
		ld = map[string]uint32{}
		s.dirs[agent] = ld
	}
	ld[key] = mode & 0o7777
	s.mu.Unlock()
	return nil
}

// Rmdir removes the folder key: only one that holds nothing, neither
// in the store nor only here (presentBelow: a file the adapter holds
// below it is present).
func (s *States) Rmdir(ctx context.Context, c *kernel.Cred, agent, key string, present, presentBelow bool) error {
	file, dir, _ := s.Exists(ctx, c, agent, key, present)
	switch {
	case file:
		return syscall.ENOTDIR
	case !dir:
		return syscall.ENOENT
	case !s.Empty(c, agent, key, presentBelow):
		return syscall.ENOTEMPTY
	}
	s.mu.Lock()
	delete(s.dirs[agent], key)
	s.mu.Unlock()
	return nil
}

// Empty reports whether the folder key holds nothing: no key in the
// store, no folder made by mkdir below it, and (presentBelow false) no
// file the adapter holds there with content the store does not show.
func (s *States) Empty(c *kernel.Cred, agent, key string, presentBelow bool) bool {
	if s.k.IsStateFolder(c, agent, key) || presentBelow {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for p := range s.dirs[agent] {
		if strings.HasPrefix(p, key+"/") {
			return false
		}
	}
	return true
}

// moveMade moves the folders mkdir made at and below oldKey to newKey;
// replaceEmpty: an empty folder made by mkdir at newKey is replaced.
func (s *States) moveMade(agent, oldKey, newKey string, replaceEmpty bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ld := s.dirs[agent]
	if ld == nil {
		return
	}
	if replaceEmpty {
		delete(ld, newKey)
	}
	for p, m := range ld {
		if p == oldKey || strings.HasPrefix(p, oldKey+"/") {
			delete(ld, p)
			ld[newKey+p[len(oldKey):]] = m
		}
	}
}
