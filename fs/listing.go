package fs

import (
	"context"
	"sort"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/proto"
)

// entry is one name of a listing.
type entry struct {
	name string
	dir  bool
	rec  *proto.StateRecord // a key's record: readdirplus needs no second lookup
}

// listing is an open directory: a snapshot of its names taken at opendir,
// sorted, with "." and ".." first. The kernel always reads directories
// with READDIRPLUS (go-fuse asks for it without the "auto" heuristic), so
// each entry's node is made as the entry is produced (its inode number is
// then the one stat reports) and Lookup fills its attributes from the
// snapshot, without asking the store again: `ls -l` of a folder is one
// listing, not one lookup per name.
type listing struct {
	dir     *fusefs.Inode
	entries []entry
	idx     int // the next entry; 0 and 1 are "." and ".."
	// node gets or makes the child node of an entry; attr fills its
	// attributes and timeouts.
	node func(ctx context.Context, e *entry) *fusefs.Inode
	attr func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno

	// sync, if set, is fsync(2) of the directory.
	sync func()

	cur     *entry
	curNode *fusefs.Inode
}

func newListing(dir *fusefs.Inode, entries []entry) *listing {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	// Deterministic and without duplicates (a name both made here and
	// committed meanwhile is one name).
	out := entries[:0]
	for i, e := range entries {
		if i > 0 && e.name == entries[i-1].name {
			continue
		}
		out = append(out, e)
	}
	return &listing{dir: dir, entries: out}
}

func (l *listing) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	i := l.idx
	if i >= len(l.entries)+2 {
		return nil, 0
	}
	l.idx++
	de := &fuse.DirEntry{Off: uint64(l.idx), Mode: syscall.S_IFDIR}
	switch i {
	case 0:
		de.Name, de.Ino = ".", l.dir.StableAttr().Ino
	case 1:
		de.Name, de.Ino = "..", fuse.FUSE_ROOT_ID
		if _, p := l.dir.Parent(); p != nil {
			de.Ino = p.StableAttr().Ino
		}
	default:
		e := &l.entries[i-2]
		de.Name = e.name
		if !e.dir {
			de.Mode = syscall.S_IFREG
		}
		l.cur, l.curNode = e, l.node(ctx, e)
		de.Ino = l.curNode.StableAttr().Ino
	}
	return de, 0
}

// Lookup is READDIRPLUS asking for the entry just produced (or, after an
// interrupted or sought read, any entry of the snapshot).
func (l *listing) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	e, ch := l.cur, l.curNode
	if e == nil || e.name != name {
		i := sort.Search(len(l.entries), func(i int) bool { return l.entries[i].name >= name })
		if i == len(l.entries) || l.entries[i].name != name {
			return nil, syscall.ENOENT
		}
		e = &l.entries[i]
		ch = l.node(ctx, e)
	}
	if errno := l.attr(ctx, e, ch, out); errno != 0 {
		return nil, errno
	}
	return ch, 0
}

func (l *listing) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off > uint64(len(l.entries)+2) {
		return syscall.EINVAL
	}
	l.idx = int(off)
	l.cur, l.curNode = nil, nil
	return 0
}

func (l *listing) Releasedir(ctx context.Context, flags uint32) {}

func (l *listing) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if l.sync != nil {
		l.sync()
	}
	return 0
}

// keyOf is the path of n below root ("a/b" for root/a/b), or false when n
// is no longer in the tree below root (unlinked).
func keyOf(n, root *fusefs.Inode) (string, bool) {
	var stack [16]string
	names := stack[:0]
	for p := n; p != root; {
		name, parent := p.Parent()
		if parent == nil {
			return "", false
		}
		names = append(names, name)
		p = parent
	}
	switch len(names) {
	case 0:
		return "", true
	case 1:
		return names[0], true
	}
	var b strings.Builder
	for i := len(names) - 1; i >= 0; i-- {
		b.WriteString(names[i])
		if i > 0 {
			b.WriteByte('/')
		}
	}
	return b.String(), true
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}
