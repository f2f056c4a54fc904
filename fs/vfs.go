package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
)

// The folders and files of package vfs, as FUSE nodes: one node type for
// every folder and one for every file, whatever row of vfs's table it
// is. What a file does is its row's; this file only carries requests and
// answers between go-fuse and the layer, for a caller who may act on the
// agent. Nothing here is cached by the kernel (a run's files change with
// the run), except the files of a Stable row (a memory), which never
// change.

// check is who is asking, if they may act on agent ("": any caller the
// kernel identifies; what they see is the kernel's to decide).
func (f *FS) check(ctx context.Context, agent string) (*kernel.Cred, syscall.Errno) {
	if agent == "" {
		return f.cred(ctx)
	}
	return f.may(ctx, agent)
}

// vdir is a folder of the layer.
type vdir struct {
	fusefs.Inode
	readOnly
	fs    *FS
	agent string
	d     vfs.Dir
}

// vfile is a file of the layer.
type vfile struct {
	fusefs.Inode
	readOnly
	fs *FS
	n  *vfs.Node
}

// vhandle is an open vfile.
type vhandle struct{ h *vfs.Handle }

func (f *FS) fillV(a *fuse.Attr, at vfs.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFREG | at.Mode, Size: uint64(at.Size), Nlink: 1}
	if at.Dir {
		a.Mode = syscall.S_IFDIR | at.Mode
	}
	a.SetTimes(&at.Mtime, &at.Mtime, &at.Mtime)
	f.setAttrOwner(a)
}

func (d *vdir) fill(a *fuse.Attr) {
	at, _ := d.fs.layer.Stat(context.Background(), nil, vfs.Entry{Dir: d.d}, nil)
	d.fs.fillV(a, at)
}

func (d *vdir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.fs.check(ctx, d.agent); e != 0 {
		return e
	}
	d.fill(&out.Attr)
	out.SetTimeout(noCache)
	return 0
}

func (d *vdir) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := d.fs.check(ctx, d.agent); e != 0 {
		return e
	}
	if mask&2 != 0 { // W_OK
		return syscall.EACCES
	}
	return 0
}

func (d *vdir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.fs.statfs(out)
}

// child returns the node of e, reusing the one already there.
func (d *vdir) child(ctx context.Context, e *vfs.Entry) *fusefs.Inode {
	if ch := d.GetChild(e.Name); ch != nil {
		switch ch.Operations().(type) {
		case *vdir:
			if e.Dir != nil {
				return ch
			}
		case *vfile:
			if e.File != nil {
				return ch
			}
		}
	}
	return d.fs.vnode(ctx, &d.Inode, d.agent, e)
}

// vnode makes the node of e, below parent.
func (f *FS) vnode(ctx context.Context, parent *fusefs.Inode, agent string, e *vfs.Entry) *fusefs.Inode {
	if e.Dir != nil {
		return parent.NewInode(ctx, &vdir{fs: f, agent: agent, d: e.Dir}, fusefs.StableAttr{Mode: syscall.S_IFDIR})
	}
	return parent.NewInode(ctx, &vfile{fs: f, n: e.File}, fusefs.StableAttr{Mode: syscall.S_IFREG})
}

// entryAttr fills the reply to a lookup of ch, uncached.
func (f *FS) entryAttr(ctx context.Context, c *kernel.Cred, ch *fusefs.Inode, out *fuse.EntryOut) {
	switch n := ch.Operations().(type) {
	case *vdir:
		n.fill(&out.Attr)
	case *vfile:
		at, _ := f.layer.Stat(ctx, c, vfs.Entry{File: n.n}, nil)
		f.fillV(&out.Attr, at)
		if n.n.Kind.Stable {
			return
		}
	}
	out.SetEntryTimeout(noCache)
	out.SetAttrTimeout(noCache)
}

func (d *vdir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, e := d.fs.check(ctx, d.agent)
	if e != 0 {
		return nil, e
	}
	ent, err := d.d.Lookup(ctx, c, name)
	if err != nil {
		return nil, errno(err)
	}
	ch := d.child(ctx, &ent)
	d.fs.entryAttr(ctx, c, ch, out)
	return ch, 0
}

func (d *vdir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := d.fs.check(ctx, d.agent)
	if e != 0 {
		return nil, 0, e
	}
	vents, err := d.d.Entries(ctx, c)
	if err != nil {
		return nil, 0, errno(err)
	}
	ents := make([]entry, len(vents))
	byName := make(map[string]*vfs.Entry, len(vents))
	for i := range vents {
		ents[i] = entry{name: vents[i].Name, dir: vents[i].Dir != nil}
		byName[vents[i].Name] = &vents[i]
	}
	l := newListing(&d.Inode, ents)
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode { return d.child(ctx, byName[e.name]) }
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		d.fs.entryAttr(ctx, c, ch, out)
		return 0
	}
	return l, 0, 0
}

func (n *vfile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c, e := n.fs.check(ctx, n.n.Agent)
	if e != 0 {
		return e
	}
	var h *vfs.Handle
	if vh, ok := fh.(*vhandle); ok {
		h = vh.h
	}
	at, err := n.fs.layer.Stat(ctx, c, vfs.Entry{File: n.n}, h)
	if err != nil {
		return errno(err)
	}
	n.fs.fillV(&out.Attr, at)
	if !n.n.Kind.Stable {
		out.SetTimeout(noCache)
	}
	return 0
}

// Setattr takes a truncation of a file that takes writes (a shell's `>`
// may send one) and nothing else: the row decides what a write does. A
// file that takes none is read-only (EROFS), as the fixed tree is.
func (n *vfile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c, e := n.fs.check(ctx, n.n.Agent)
	if e != 0 {
		return e
	}
	if k := n.n.Kind; k.Write == nil {
		if k.WriteErr != "" {
			return errno(proto.Errorf(k.WriteErr, "%s does not change", n.n.ID))
		}
		return syscall.EROFS
	}
	if sz, ok := in.GetSize(); !ok || sz != 0 || in.Valid&^(fuse.FATTR_SIZE|fuse.FATTR_FH|fuse.FATTR_ATIME|fuse.FATTR_MTIME|fuse.FATTR_ATIME_NOW|fuse.FATTR_MTIME_NOW|fuse.FATTR_CTIME) != 0 {
		return syscall.EPERM
	}
	at, _ := n.fs.layer.Stat(ctx, c, vfs.Entry{File: n.n}, nil)
	n.fs.fillV(&out.Attr, at)
	out.SetTimeout(noCache)
	return 0
}

func (n *vfile) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := n.fs.check(ctx, n.n.Agent); e != 0 {
		return e
	}
	m := n.n.Kind.Mode
	if mask&4 != 0 && m&0o444 == 0 || mask&2 != 0 && m&0o222 == 0 || mask&1 != 0 {
		return syscall.EACCES
	}
	return 0
}

func (n *vfile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := n.fs.check(ctx, n.n.Agent)
	if e != 0 {
		return nil, 0, e
	}
	h, err := n.fs.layer.Open(ctx, c, n.n, int(flags))
	if err != nil {
		return nil, 0, errno(err)
	}
	if n.n.Kind.Stable {
		// It never changes: its pages are kept across opens.
		return &vhandle{h}, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
	}
	// Direct I/O: reads are answered by the layer, past the size the
	// kernel last heard of (out grows), and never from stale pages.
	fl := uint32(fuse.FOPEN_DIRECT_IO)
	if flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		fl |= fuse.FOPEN_NOFLUSH
	}
	if h.Stream() {
		fl |= fuse.FOPEN_STREAM | fuse.FOPEN_NONSEEKABLE
	}
	if h.Follows() {
		// The kernel holds the size of the lookup that led here for a
		// jiffy (a timeout of 1 ns is rounded up): drop it, so the fstat
		// tail makes right after open asks, and sees what has come.
		// Attributes only (offset -1): no lock is taken.
		n.NotifyContent(-1, 0)
	}
	return &vhandle{h}, fl, 0
}

func (h *vhandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.h.Read(ctx, dest, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (h *vhandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := h.h.Write(ctx, data)
	return uint32(n), errno(err)
}

func (h *vhandle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *vhandle) Release(ctx context.Context) syscall.Errno {
	h.h.Release()
	return 0
}
