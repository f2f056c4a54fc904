package fs

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
)

// dirNode is a folder of an agent's state: a key prefix, or a folder made
// by mkdir that holds no key yet (kept by vfs.States). It keeps the tree:
// which file node is at which name, whose key is its path (file.go); what
// a change of a name does is vfs.States's (pkg/vfs/statedir.go,
// statefolders.go). The agent's state folder itself is the dirNode whose
// root is itself.
type dirNode struct {
	fusefs.Inode
	fs    *FS
	agent string
	root  *fusefs.Inode
	mode  atomic.Uint32
	// changed is when a name was last made or removed in the folder
	// through the mount (unix nanoseconds): shown until the store, which
	// learns of it at commit, says so too.
	changed atomic.Int64
}

// touch records that a name came or went in the folder.
func (d *dirNode) touch() { d.changed.Store(time.Now().UnixNano()) }

func (f *FS) newDir(agent string, root *fusefs.Inode, mode uint32) *dirNode {
	d := &dirNode{fs: f, agent: agent, root: root}
	d.mode.Store(mode)
	return d
}

func (d *dirNode) prefix() (string, bool) {
	if d.root == nil || d.root == &d.Inode {
		return "", true
	}
	return keyOf(&d.Inode, d.root)
}

func (d *dirNode) stateRoot() *fusefs.Inode {
	if d.root == nil {
		return &d.Inode
	}
	return d.root
}

func (d *dirNode) fill(a *fuse.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFDIR | d.mode.Load(), Nlink: 1}
	// A folder's time is that of the last key made or deleted in it
	// since the daemon started, or else the mount's start.
	t := d.fs.started
	if p, ok := d.prefix(); ok {
		if ft, ok := d.fs.k.StateFolderTime(d.agent, p); ok && ft.After(t) {
			t = ft
		}
	}
	if c := d.changed.Load(); c > t.UnixNano() {
		t = time.Unix(0, c)
	}
	a.SetTimes(&t, &t, &t)
	d.fs.setAttrOwner(a)
}

func (d *dirNode) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.fs.may(ctx, d.agent); e != 0 {
		return e
	}
	d.fill(&out.Attr)
	if _, ok := d.prefix(); !ok {
		out.Nlink = 0
	}
	return 0
}

func (d *dirNode) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.fs.may(ctx, d.agent); e != 0 {
		return e
	}
	if m, ok := in.GetMode(); ok {
		d.mode.Store(m & 0o7777)
		if p, ok := d.prefix(); ok && p != "" {
			d.fs.states.SetFolderMode(d.agent, p, m)
		}
	}
	if _, ok := in.GetSize(); ok {
		return syscall.EISDIR
	}
	d.fill(&out.Attr)
	return 0
}

func (d *dirNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	_, e := d.fs.may(ctx, d.agent)
	return e
}

func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.fs.statfs(out)
}

// child returns the node of name if it is of the wanted kind, or makes one.
func (d *dirNode) child(ctx context.Context, name string, dir bool) *fusefs.Inode {
	ch := d.GetChild(name)
	if ch != nil {
		switch ch.Operations().(type) {
		case *dirNode:
			if dir {
				return ch
			}
		case *fileNode:
			if !dir {
				return ch
			}
		}
	}
	if dir {
		mode := uint32(0o755)
		if p, ok := d.prefix(); ok {
			if m, ok := d.fs.states.FolderMode(d.agent, join(p, name)); ok {
				mode = m
			}
		}
		return d.NewInode(ctx, d.fs.newDir(d.agent, d.stateRoot(), mode), fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	return d.NewInode(ctx, d.fs.newFile(d.agent, d.stateRoot()), fusefs.StableAttr{Mode: syscall.S_IFREG})
}

// key checks name and returns its key below this folder.
func (d *dirNode) key(name string) (string, syscall.Errno) {
	p, ok := d.prefix()
	if !ok {
		return "", syscall.ENOENT
	}
	k := join(p, name)
	if err := proto.CheckKey(k); err != nil {
		if err.Code == proto.ENAMETOOLONG {
			return "", syscall.ENAMETOOLONG
		}
		return "", syscall.EINVAL
	}
	return k, 0
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, e
	}
	key, e := d.key(name)
	if e == syscall.EINVAL {
		return nil, syscall.ENOENT // no key can have that name
	} else if e != 0 {
		return nil, e
	}
	if ch := d.GetChild(name); ch != nil {
		if fn, ok := ch.Operations().(*fileNode); ok && fn.f.Present() {
			return ch, fn.getattr(ctx, c, &out.Attr)
		}
	}
	rec, err := d.fs.k.StateStat(ctx, c, d.agent, key)
	switch {
	case err == nil:
		ch := d.child(ctx, name, false)
		d.fs.fillState(&out.Attr, ch.Operations().(*fileNode).f.StatFrom(&rec))
		return ch, 0
	case !isCode(err, proto.ENOENT):
		return nil, errno(err)
	case d.fs.states.Folder(c, d.agent, key):
		ch := d.child(ctx, name, true)
		ch.Operations().(*dirNode).fill(&out.Attr)
		return ch, 0
	}
	return nil, syscall.ENOENT
}

const renameNoReplace = 0x1 // RENAME_NOREPLACE of renameat2(2)

func isCode(err error, code string) bool {
	var pe *proto.Error
	return errors.As(err, &pe) && pe.Code == code
}

func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, 0, e
	}
	prefix, ok := d.prefix()
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	// Files made or saved here first, then the store: a save that
	// commits in between is then seen at least once, never missed.
	var ents []entry
	for name, ch := range d.Children() {
		if fn, ok := ch.Operations().(*fileNode); ok && fn.f.Present() {
			ents = append(ents, entry{name: name})
		}
	}
	lastDir := ""
	skip := 0
	if prefix != "" {
		skip = len(prefix) + 1
	}
	err := d.fs.k.StateList(ctx, c, proto.StateListArgs{Agent: d.agent, Prefix: prefix}, nil, func(r *proto.StateRecord) error {
		if len(r.Key) <= skip {
			return nil // the prefix itself is a key: not below it
		}
		rest := r.Key[skip:]
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			// Keys below one subfolder are contiguous in key order.
			if name := rest[:i]; name != lastDir {
				ents = append(ents, entry{name: name, dir: true})
				lastDir = name
			}
			return nil
		}
		rec := *r
		ents = append(ents, entry{name: rest, rec: &rec})
		return nil
	})
	if err != nil && !isCode(err, proto.ENOENT) { // ENOENT: an agent made by mkdir
		return nil, 0, errno(err)
	}
	// Folders made by mkdir, not in the store.
	for _, name := range d.fs.states.MadeFolders(d.agent, prefix) {
		ents = append(ents, entry{name: name, dir: true})
	}
	l := newListing(&d.Inode, ents)
	l.sync = func() { d.fs.states.Settle(d.agent) }
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode { return d.child(ctx, e.name, e.dir) }
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		switch n := ch.Operations().(type) {
		case *dirNode:
			n.fill(&out.Attr)
		case *fileNode:
			if e.rec == nil {
				return n.getattr(ctx, c, &out.Attr)
			}
			d.fs.fillState(&out.Attr, n.f.StatFrom(e.rec))
		}
		return 0
	}
	return l, 0, 0
}

// exists reports what is at key: a file (in the store or made here) or a
// folder, and the node if the mount has one.
func (d *dirNode) exists(ctx context.Context, c *kernel.Cred, name, key string) (file, dir, stored bool, ch *fusefs.Inode) {
	ch = d.GetChild(name)
	file, dir, stored = d.fs.states.Exists(ctx, c, d.agent, key, present(ch))
	return file, dir, stored, ch
}

// present reports whether ch is a file with content the store does not
// show yet.
func present(ch *fusefs.Inode) bool {
	f := stateFile(ch)
	return f != nil && f.Present()
}

// presentBelow reports whether the folder name holds such a file.
func (d *dirNode) presentBelow(name string) bool {
	if ch := d.GetChild(name); ch != nil {
		for _, gc := range ch.Children() {
			if present(gc) {
				return true
			}
		}
	}
	return false
}

func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, e
	}
	key, e := d.key(name)
	if e != 0 {
		return nil, e
	}
	if err := d.fs.states.Mkdir(ctx, c, d.agent, key, mode, present(d.GetChild(name))); err != nil {
		return nil, errno(err)
	}
	n := d.fs.newDir(d.agent, d.stateRoot(), mode&0o7777)
	d.touch()
	ch := d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	n.fill(&out.Attr)
	return ch, 0
}

func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return e
	}
	key, e := d.key(name)
	if e != 0 {
		return syscall.ENOENT
	}
	if err := d.fs.states.Rmdir(ctx, c, d.agent, key, present(d.GetChild(name)), d.presentBelow(name)); err != nil {
		return errno(err)
	}
	d.touch()
	return 0
}

func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, nil, 0, e
	}
	key, e := d.key(name)
	if e != 0 {
		return nil, nil, 0, e
	}
	if e := d.fs.mayWrite(c, d.agent, key); e != 0 {
		return nil, nil, 0, e
	}
	file, dir, _, _ := d.exists(ctx, c, name, key)
	if dir {
		return nil, nil, 0, syscall.EISDIR
	}
	if file {
		// Made meanwhile (over the socket, say): open what is there.
		if flags&syscall.O_EXCL != 0 {
			return nil, nil, 0, syscall.EEXIST
		}
		ch := d.child(ctx, name, false)
		fn := ch.Operations().(*fileNode)
		h, err := fn.f.OpenWrite(c, int(flags))
		if err != nil {
			return nil, nil, 0, errno(err)
		}
		fh, fl := fn.handle(h)
		return ch, fh, fl, fn.getattr(ctx, c, &out.Attr)
	}
	fn := &fileNode{fs: d.fs, agent: d.agent, root: d.stateRoot()}
	f, h, at := d.fs.states.Create(c, d.agent, fn.where, mode, int(flags))
	fn.f = f
	ch := d.NewInode(ctx, fn, fusefs.StableAttr{Mode: syscall.S_IFREG})
	d.touch()
	d.fs.fillState(&out.Attr, at)
	fh, fl := fn.handle(h)
	return ch, fh, fl, 0
}

func (d *dirNode) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, syscall.EPERM // state holds values, not devices or pipes
	}
	ch, fh, _, e := d.Create(ctx, name, syscall.O_WRONLY|syscall.O_EXCL, mode, out)
	if e != 0 {
		return nil, e
	}
	h := fh.(*handle)
	if e := h.Flush(ctx); e != 0 {
		return nil, e
	}
	h.Release(ctx)
	return ch, 0
}

func (d *dirNode) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, d.refuseLink(ctx, name, "link") // a key has one name
}

func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, d.refuseLink(ctx, name, "symlink") // state holds values, not links
}

// refuseLink refuses a link named name, and audits the attempt: a link is
// the classic way out of a tree (issue 7).
func (d *dirNode) refuseLink(ctx context.Context, name, what string) syscall.Errno {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return e
	}
	key, e := d.key(name)
	if e != 0 {
		key = name
	}
	d.fs.auditRefusal(c, d.agent+":"+key+" ["+what+"]", proto.Errorf(proto.EPERM, "%s", what))
	return syscall.EPERM
}

func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return e
	}
	key, e := d.key(name)
	if e != 0 {
		return syscall.ENOENT
	}
	file, dir, stored, ch := d.exists(ctx, c, name, key)
	if file {
		if e := d.fs.mayWrite(c, d.agent, key); e != 0 {
			return e
		}
	}
	switch {
	case dir:
		return syscall.EISDIR
	case !file:
		return syscall.ENOENT
	}
	d.touch()
	return errno(d.fs.states.Unlink(c, d.agent, key, stateFile(ch), stored))
}

// stateFile is the layer's file of ch, if ch is a state file.
func stateFile(ch *fusefs.Inode) *vfs.StateFile {
	if ch == nil {
		return nil
	}
	if fn, ok := ch.Operations().(*fileNode); ok {
		return fn.f
	}
	return nil
}

func (d *dirNode) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return e
	}
	nd, ok := newParent.(*dirNode)
	if !ok || nd.agent != d.agent {
		return syscall.EXDEV // another agent's state is another store: mv copies
	}
	if flags&fusefs.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	oldKey, e := d.key(name)
	if e != 0 {
		return syscall.ENOENT
	}
	newKey, e := nd.key(newName)
	if e != 0 {
		return e
	}
	sFile, sDir, sStored, sCh := d.exists(ctx, c, name, oldKey)
	dFile, dDir, dStored, dCh := nd.exists(ctx, c, newName, newKey)
	if sFile {
		if e := d.fs.mayWrite(c, d.agent, oldKey); e != 0 {
			return e
		}
		if e := d.fs.mayWrite(c, d.agent, newKey); e != 0 {
			return e
		}
	}
	switch {
	case !sFile && !sDir:
		return syscall.ENOENT
	case flags&renameNoReplace != 0 && (dFile || dDir):
		return syscall.EEXIST
	case oldKey == newKey:
		return 0
	case sFile && dDir:
		return syscall.EISDIR
	case sDir && dFile:
		return syscall.ENOTDIR
	case sDir && strings.HasPrefix(newKey, oldKey+"/"):
		return syscall.EINVAL
	case sDir && dDir && !d.fs.states.Empty(c, d.agent, newKey, nd.presentBelow(newName)):
		return syscall.ENOTEMPTY
	}
	d.touch()
	nd.touch()
	if sFile {
		return errno(d.fs.states.RenameFile(ctx, c, d.agent, stateFile(sCh), oldKey, sStored, stateFile(dCh), newKey, dStored))
	}
	return d.renameDir(ctx, c, sCh, oldKey, newKey, dDir)
}

// renameDir moves every key below oldKey to newKey, and the folders made
// by mkdir below it (vfs.States's MoveFolder).
func (d *dirNode) renameDir(ctx context.Context, c *kernel.Cred, src *fusefs.Inode, oldKey, newKey string, replaceEmpty bool) syscall.Errno {
	var below []*vfs.StateFile
	if src != nil {
		walkFiles(src, func(fn *fileNode) { below = append(below, fn.f) })
	}
	return errno(d.fs.states.MoveFolder(ctx, c, d.agent, oldKey, newKey, below, replaceEmpty))
}

// walkFiles calls fn for every file node below n.
func walkFiles(n *fusefs.Inode, fn func(*fileNode)) {
	for _, ch := range n.Children() {
		switch x := ch.Operations().(type) {
		case *fileNode:
			fn(x)
		case *dirNode:
			walkFiles(ch, fn)
		}
	}
}

func (d *dirNode) Fsync(ctx context.Context, fh fusefs.FileHandle, flags uint32) syscall.Errno {
	// Changes of names (create, unlink, rename, mkdir) are durable when
	// they return; what may still be queued is the content of closed files.
	d.fs.states.Settle(d.agent)
	return 0
}
