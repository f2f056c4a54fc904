package version

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/oxios/oxios/pkg/proto"
)

// Git file modes of tree entries. Git writes them in octal without
// leading zeros ("40000", not "040000"); fsck --strict rejects padding.
const (
	modeDir     = 0o40000
	modeFile    = 0o100644
	modeExec    = 0o100755
	modeSymlink = 0o120000
	modeGitlink = 0o160000
)

// treeEntry is one line of a tree object. sub is the committer's cache of
// the subtree (nil until needed); readers never set it.
type treeEntry struct {
	name string
	mode uint32
	id   oid
	sub  *dirNode
}

func (e *treeEntry) isDir() bool { return e.mode == modeDir }

// cmpEntry orders tree entries as git does: by name bytes, a directory's
// name compared as if it ended in "/". So "a.md" < "a/" < "a0": a tree
// sorted any other way fails `git fsck` (treeNotSorted).
func cmpEntry(an string, adir bool, bn string, bdir bool) int {
	n := min(len(an), len(bn))
	if c := strings.Compare(an[:n], bn[:n]); c != 0 {
		return c
	}
	return cmp.Compare(nextByte(an, n, adir), nextByte(bn, n, bdir))
}

func nextByte(name string, n int, dir bool) int {
	switch {
	case len(name) > n:
		return int(name[n])
	case dir:
		return '/'
	}
	return 0
}

func cmpTreeEntry(a, b treeEntry) int { return cmpEntry(a.name, a.isDir(), b.name, b.isDir()) }

// findEntry returns the position of the entry called name in es (sorted),
// whether a file or a folder.
func findEntry(es []treeEntry, name string) (int, bool) {
	for _, dir := range []bool{false, true} {
		i, ok := slices.BinarySearchFunc(es, name, func(e treeEntry, n string) int {
			return cmpEntry(e.name, e.isDir(), n, dir)
		})
		if ok {
			return i, true
		}
	}
	return 0, false
}

// parseTree decodes a tree object: "<octal mode> <name>\x00<20-byte id>"...
func parseTree(data []byte) ([]treeEntry, error) {
	var es []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp || len(data) < nul+1+len(oid{}) {
			return nil, fmt.Errorf("%w: malformed tree entry", errCorrupt)
		}
		mode, err := strconv.ParseUint(string(data[:sp]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: tree entry mode %q", errCorrupt, data[:sp])
		}
		e := treeEntry{name: string(data[sp+1 : nul]), mode: uint32(mode)}
		copy(e.id[:], data[nul+1:])
		es = append(es, e)
		data = data[nul+1+len(oid{}):]
	}
	return es, nil
}

// encodeTree lays out a tree object from entries already in git order.
func encodeTree(es []treeEntry) []byte {
	n := 0
	for _, e := range es {
		n += 8 + len(e.name) + len(e.id)
	}
	b := make([]byte, 0, n)
	for _, e := range es {
		b = strconv.AppendUint(b, uint64(e.mode), 8)
		b = append(b, ' ')
		b = append(b, e.name...)
		b = append(b, 0)
		b = append(b, e.id[:]...)
	}
	return b
}

// emptyTree is the id of the tree with no entries, the root of a commit
// whose files were all deleted.
var emptyTree = hashObject(objTree, nil)

// dirNode is a folder of the committer's cache of the HEAD tree: its
// entries in git order and the id of the tree object they encode. A node
// is never changed once built, except for filling its entries' sub
// pointers as the committer walks down; a commit builds new nodes for the
// folders on the paths it changes and shares the rest.
type dirNode struct {
	id      oid
	entries []treeEntry
}

// CheckPath reports why path cannot name a file in the repository, or nil.
// A path is slash-separated and relative: no empty, "." or ".." element,
// no NUL, and no element that git treats as its own (".git" and
// ".gitmodules" in any case, with the HFS+ and NTFS aliases `git fsck`
// also refuses, such as ".GIT." or "git~1").
func CheckPath(path string) error {
	if path == "" {
		return fmt.Errorf("%w: path is empty", ErrBadName)
	}
	if strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("%w: path %q contains a NUL byte", ErrBadName, path)
	}
	for elem := range strings.SplitSeq(path, "/") {
		switch {
		case elem == "":
			return fmt.Errorf("%w: path %q has an empty element", ErrBadName, path)
		case elem == "." || elem == "..":
			return fmt.Errorf("%w: path %q has a %q element", ErrBadName, path, elem)
		case proto.GitReserved(elem):
			return fmt.Errorf("%w: path %q has the element %q, which git reserves", ErrBadName, path, elem)
		}
	}
	return nil
}

// treeCache keeps decoded trees for readers (Log, Show, Files), which walk
// the same unchanged subtrees commit after commit. It forgets everything
// when full: simple, and a walk refills what it needs.
type treeCache struct {
	mu    sync.Mutex
	trees map[oid][]treeEntry
	max   int
}

func (c *treeCache) get(id oid) ([]treeEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	es, ok := c.trees[id]
	return es, ok
}

func (c *treeCache) put(id oid, es []treeEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trees == nil || len(c.trees) >= c.max {
		c.trees = make(map[oid][]treeEntry)
	}
	c.trees[id] = es
}
