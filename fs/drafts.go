package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/vfs"
)

// The folders of drafts, /agent/NAME/mem/KIND/ and /agent/NAME/inbox/,
// as FUSE nodes: what a name is, what a create, an unlink or a close
// does, is package vfs's DraftFolder and Draft (pkg/vfs/folder.go,
// draft.go); the files the kernel holds there (memories, messages) are
// vfiles of their rows. This file gives a draft a node while it is
// pending, and says who sees an inbox as another agent's slot.
// Memories remembered or forgotten over the socket (or by their TTL)
// reach the mount through the bus (notify.go).

// draftDir is a folder of drafts.
type draftDir struct {
	fusefs.Inode
	fs *FS
	f  *vfs.DraftFolder
	// slots: an inbox, which a run of another agent sees as its slot
	// (write-only). Decided per call: the kernel's entry cache is one
	// for all callers.
	slots bool
}

// checkSlot is who asks, and whether they see the folder only as a
// slot.
func (d *draftDir) checkSlot(ctx context.Context) (*kernel.Cred, bool, syscall.Errno) {
	agent := d.f.Agent()
	if d.slots {
		c, e := d.fs.cred(ctx)
		if e != 0 {
			return nil, false, e
		}
		if d.fs.k.MayAct(c, agent) != nil && d.fs.k.MsgSlot(c, agent) {
			return c, true, 0
		}
	}
	c, e := d.fs.may(ctx, agent)
	return c, false, e
}

func (d *draftDir) check(ctx context.Context) (*kernel.Cred, syscall.Errno) {
	c, _, e := d.checkSlot(ctx)
	return c, e
}

func (d *draftDir) fill(a *fuse.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFDIR | 0o755, Nlink: 1}
	a.SetTimes(&d.fs.started, &d.fs.started, &d.fs.started)
	d.fs.setAttrOwner(a)
}

func (d *draftDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.check(ctx); e != 0 {
		return e
	}
	d.fill(&out.Attr)
	return 0
}

func (d *draftDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	_, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return e
	}
	if slot && mask&4 != 0 { // R_OK
		return syscall.EACCES
	}
	return 0
}

func (d *draftDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.fs.statfs(out)
}

// draftNode returns the node of draft dr named name, reusing the one
// there.
func (d *draftDir) draftNode(ctx context.Context, name string, dr *vfs.Draft) *fusefs.Inode {
	if ch := d.GetChild(name); ch != nil {
		if n, ok := ch.Operations().(*draftFile); ok && n.d == dr {
			return ch
		}
	}
	return d.NewInode(ctx, &draftFile{fs: d.fs, dir: d, name: name, d: dr}, fusefs.StableAttr{Mode: syscall.S_IFREG})
}

// fileNode returns the node of a file the kernel holds, reusing the one
// there.
func (d *draftDir) fileNode(ctx context.Context, e *vfs.FolderEntry) *fusefs.Inode {
	if ch := d.GetChild(e.Name); ch != nil {
		if n, ok := ch.Operations().(*vfile); ok && *n.n == *e.File {
			return ch
		}
	}
	return d.NewInode(ctx, &vfile{fs: d.fs, n: e.File}, fusefs.StableAttr{Mode: syscall.S_IFREG})
}

// entryAttr fills the reply for the node ch of e.
func (d *draftDir) entryAttr(ctx context.Context, c *kernel.Cred, e *vfs.FolderEntry, ch *fusefs.Inode, out *fuse.EntryOut) {
	switch n := ch.Operations().(type) {
	case *draftFile:
		n.entry(out)
	case *vfile:
		if e.File != nil && e.File.Kind.Stable && e.Sized {
			d.fs.fillV(&out.Attr, e.Attr) // kept: it does not change
			return
		}
		d.fs.entryAttr(ctx, c, ch, out)
	}
}

func (d *draftDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, e
	}
	ent, err := d.f.Lookup(ctx, c, name, slot)
	if err != nil {
		return nil, errno(err)
	}
	var ch *fusefs.Inode
	if ent.Draft != nil {
		ch = d.draftNode(ctx, name, ent.Draft)
	} else {
		ch = d.fileNode(ctx, &ent)
	}
	d.entryAttr(ctx, c, &ent, ch, out)
	return ch, 0
}

func (d *draftDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, 0, e
	}
	fes, err := d.f.Entries(ctx, c, slot)
	if err != nil {
		return nil, 0, errno(err)
	}
	ents := make([]entry, len(fes))
	byName := make(map[string]*vfs.FolderEntry, len(fes))
	for i := range fes {
		ents[i] = entry{name: fes[i].Name}
		byName[fes[i].Name] = &fes[i]
	}
	l := newListing(&d.Inode, ents)
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode {
		fe := byName[e.name]
		if fe.Draft == nil {
			return d.fileNode(ctx, fe)
		}
		if dr := d.f.Pending(e.name); dr != nil {
			return d.draftNode(ctx, e.name, dr)
		}
		// Submitted since the listing was taken: a stand-in that
		// answers no more.
		return d.NewInode(ctx, &draftFile{fs: d.fs, dir: d, name: e.name, d: d.f.Gone()}, fusefs.StableAttr{Mode: syscall.S_IFREG})
	}
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		d.entryAttr(ctx, c, byName[e.name], ch, out)
		return 0
	}
	return l, 0, 0
}

func (d *draftDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, nil, 0, e
	}
	dr, h, err := d.f.Create(ctx, c, name, int(flags), slot)
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	n := &draftFile{fs: d.fs, dir: d, name: name, d: dr}
	ch := d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFREG})
	n.entry(out)
	return ch, &draftHandle{n: n, h: h}, fuse.FOPEN_DIRECT_IO, 0
}

func (d *draftDir) Unlink(ctx context.Context, name string) syscall.Errno {
	c, e := d.check(ctx)
	if e != 0 {
		return e
	}
	return errno(d.f.Unlink(ctx, c, name))
}

// The folders are fixed, and a memory's or a message's name is its id.
func (d *draftDir) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}
func (d *draftDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *draftDir) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }
func (d *draftDir) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *draftDir) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EPERM
}
func (d *draftDir) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *draftDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// draftFile is a draft's name in its folder while it is pending. Its
// name and attributes are never cached by the kernel (they vanish when
// the content is taken).
type draftFile struct {
	fusefs.Inode
	fs   *FS
	dir  *draftDir
	name string
	d    *vfs.Draft
}

func (n *draftFile) fill(a *fuse.Attr) {
	size, mtime, done := n.d.Stat()
	*a = fuse.Attr{Mode: syscall.S_IFREG | 0o644, Size: uint64(size), Nlink: 1}
	if done {
		a.Nlink = 0
	}
	a.SetTimes(&mtime, &mtime, &mtime)
	n.fs.setAttrOwner(a)
}

// entry fills a lookup's reply: attributes, and no caching.
func (n *draftFile) entry(out *fuse.EntryOut) {
	n.fill(&out.Attr)
	out.SetEntryTimeout(noCache)
	out.SetAttrTimeout(noCache)
}

func (n *draftFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := n.dir.check(ctx); e != 0 {
		return e
	}
	n.fill(&out.Attr)
	out.SetTimeout(noCache)
	return 0
}

func (n *draftFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, e := n.dir.check(ctx); e != 0 {
		return e
	}
	// Modes, owners and times are no part of a memory or a message:
	// accepted and ignored (touch, cp -p).
	if sz, ok := in.GetSize(); ok {
		if err := n.d.Truncate(int64(sz)); err != nil {
			return errno(err)
		}
	}
	n.fill(&out.Attr)
	out.SetTimeout(noCache)
	return 0
}

func (n *draftFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := n.dir.check(ctx)
	if e != 0 {
		return nil, 0, e
	}
	// Submitted, or refused, meanwhile: the name is gone. The kernel
	// still holds its entry (a timeout of a nanosecond lasts a jiffy), so
	// an open(O_CREAT) of the same name right after the close comes here
	// instead of to Create. ESTALE makes it look the path up again and
	// retry once (LOOKUP_REVAL): the lookup finds no such file, so a
	// create makes a new one and a plain open gets ENOENT.
	h, err := n.d.Open(c, int(flags), false)
	if err != nil {
		return nil, 0, errno(err)
	}
	return &draftHandle{n: n, h: h}, fuse.FOPEN_DIRECT_IO, 0
}

// detach takes the name out of the folder once the draft is done with.
func (n *draftFile) detach() {
	if ch := n.dir.GetChild(n.name); ch == n.EmbeddedInode() {
		n.dir.RmChild(n.name)
	}
}

// draftHandle is an open draft.
type draftHandle struct {
	n *draftFile
	h *vfs.DraftHandle
}

func (h *draftHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(h.h.Read(dest, off)), 0
}

func (h *draftHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.n.fs.closed.Load() {
		return 0, syscall.ENOTCONN
	}
	w, err := h.h.Write(data, off)
	return uint32(w), errno(err)
}

// Flush is close(2): see vfs.Draft.
func (h *draftHandle) Flush(ctx context.Context) syscall.Errno {
	if h.n.fs.closed.Load() {
		return syscall.ENOTCONN
	}
	end, err := h.h.Flush(ctx)
	h.done(end, err)
	return errno(err)
}

func (h *draftHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.Flush(ctx)
}

func (h *draftHandle) Release(ctx context.Context) syscall.Errno {
	end, err := h.h.Release(h.n.fs.closed.Load())
	h.done(end, err)
	return 0
}

// done logs a refusal and takes the name out once the draft is done.
func (h *draftHandle) done(end bool, err error) {
	if err != nil {
		h.n.fs.log.Info("mount: file not taken", "what", h.n.dir.f.What(), "file", h.n.name, "err", err)
	}
	if end {
		h.n.detach()
	}
}
