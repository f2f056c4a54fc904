package fs

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
)

// The memory view: /agent/NAME/mem/KIND/ID.md, one file per memory, as
// it is stored (front matter, then the text). Memories do not change, so
// their files are read-only; a folder of a kind is where memories are
// made and forgotten:
//
//   - creating a file there and closing it remembers its content (see
//     vfs.MemInput), as a memory of that kind. The name is only a handle: any
//     NAME.md is taken, the kernel gives the memory its id, and once the
//     memory is remembered (at the first close(2) or fsync(2) after
//     something was written) NAME.md is gone and ID.md is there. close(2)
//     reports a refusal (EINVAL for an empty text or a bad front matter,
//     EFBIG past the size limit, EPERM/EACCES by policy); then nothing is
//     remembered and the name is gone too. A file closed empty (touch) is
//     not remembered at all.
//   - other names (editors' swap and backup files: .x.swp, x~, 4913) are
//     refused with EINVAL, so that no editor litters the memory with them;
//   - unlink(2) of ID.md forgets the memory;
//   - mkdir, rename, link, symlink and writing to a memory: EPERM.
//
// Memories remembered or forgotten over the socket (or by their TTL)
// reach the mount through the bus (notify.go).

// memID returns the id of a memory's file name, if name is one.
func memID(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, ".md")
	return id, ok && memory.CheckID(id) == nil
}

// newMemName reports whether name may be created in a kind's folder.
func newMemName(name string) bool {
	return len(name) > len(".md") && strings.HasSuffix(name, ".md") &&
		!strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "~#")
}

// memDir is /agent/NAME/mem/KIND.
type memDir struct {
	fusefs.Inode
	fs    *FS
	agent string
	kind  string
}

func (f *FS) newMemDir(agent, kind string) *memDir {
	return &memDir{fs: f, agent: agent, kind: kind}
}

func (d *memDir) fill(a *fuse.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFDIR | 0o755, Nlink: 1}
	a.SetTimes(&d.fs.started, &d.fs.started, &d.fs.started)
	d.fs.setAttrOwner(a)
}

func (d *memDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.fs.may(ctx, d.agent); e != 0 {
		return e
	}
	d.fill(&out.Attr)
	return 0
}

func (d *memDir) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}

func (d *memDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	_, e := d.fs.may(ctx, d.agent)
	return e
}

func (d *memDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.fs.statfs(out)
}

// pending returns the file being written under name, if there is one.
func (d *memDir) pending(name string) *memNew {
	if ch := d.GetChild(name); ch != nil {
		if n, ok := ch.Operations().(*memNew); ok && n.open() {
			return n
		}
	}
	return nil
}

// child returns the node of memory id, making it if needed.
func (d *memDir) child(ctx context.Context, name, id string) *fusefs.Inode {
	if ch := d.GetChild(name); ch != nil {
		if _, ok := ch.Operations().(*memFile); ok {
			return ch
		}
	}
	return d.NewInode(ctx, &memFile{fs: d.fs, agent: d.agent, kind: d.kind, id: id}, fusefs.StableAttr{Mode: syscall.S_IFREG})
}

func (d *memDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, e
	}
	if n := d.pending(name); n != nil {
		n.entry(out)
		return n.EmbeddedInode(), 0
	}
	id, ok := memID(name)
	if !ok {
		return nil, syscall.ENOENT
	}
	size, err := d.fs.k.MemStat(c, d.agent, d.kind, id)
	if err != nil {
		return nil, errno(err)
	}
	ch := d.child(ctx, name, id)
	ch.Operations().(*memFile).fill(&out.Attr, size)
	return ch, 0
}

func (d *memDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, 0, e
	}
	ids, sizes := d.fs.k.MemIDs(c, d.agent, d.kind)
	ents := make([]entry, 0, len(ids))
	for i, id := range ids {
		ents = append(ents, entry{name: id + ".md", rec: &proto.StateRecord{Size: sizes[i]}})
	}
	for name, ch := range d.Children() {
		if n, ok := ch.Operations().(*memNew); ok && n.open() {
			ents = append(ents, entry{name: name})
		}
	}
	l := newListing(&d.Inode, ents)
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode {
		if e.rec == nil {
			if n := d.pending(e.name); n != nil {
				return n.EmbeddedInode()
			}
			// Remembered since the listing was taken: a stand-in that
			// answers no more.
			n := d.newFile(e.name)
			n.d.End()
			return d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFREG})
		}
		id, _ := memID(e.name)
		return d.child(ctx, e.name, id)
	}
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		switch n := ch.Operations().(type) {
		case *memFile:
			n.fill(&out.Attr, e.rec.Size)
		case *memNew:
			n.entry(out)
		}
		return 0
	}
	return l, 0, 0
}

func (d *memDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return nil, nil, 0, e
	}
	if !newMemName(name) {
		return nil, nil, 0, syscall.EINVAL
	}
	if d.pending(name) != nil {
		return nil, nil, 0, syscall.EEXIST // being written; the kernel opens it instead
	}
	if id, ok := memID(name); ok {
		if _, err := d.fs.k.MemStat(c, d.agent, d.kind, id); err == nil {
			return nil, nil, 0, syscall.EEXIST
		}
	}
	n := d.newFile(name)
	ch := d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFREG})
	h := n.create(c, flags)
	n.entry(out)
	return ch, h, fuse.FOPEN_DIRECT_IO, 0
}

func (d *memDir) Unlink(ctx context.Context, name string) syscall.Errno {
	c, e := d.fs.may(ctx, d.agent)
	if e != 0 {
		return e
	}
	if n := d.pending(name); n != nil {
		if n.discard() {
			return 0
		}
	}
	id, ok := memID(name)
	if !ok {
		return syscall.ENOENT
	}
	if _, err := d.fs.k.MemStat(c, d.agent, d.kind, id); err != nil {
		return errno(err)
	}
	args := proto.MemForgetArgs{Agent: d.agent, IDs: []string{id}}
	raw, _ := json.Marshal(args)
	_, err := d.fs.k.MemForget(ctx, c, args, raw)
	return errno(err)
}

func (d *memDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM // memories are files of a kind; kinds are fixed
}

func (d *memDir) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }

func (d *memDir) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (d *memDir) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EPERM // a memory's name is its id
}

func (d *memDir) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (d *memDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

// memFile is a memory: its file, read-only. A memory's file never changes
// (an id is never reused), so its pages are kept across opens.
type memFile struct {
	fusefs.Inode
	fs    *FS
	agent string
	kind  string
	id    string
}

func (m *memFile) fill(a *fuse.Attr, size int64) {
	*a = fuse.Attr{Mode: syscall.S_IFREG | 0o444, Size: uint64(size), Nlink: 1}
	t := memory.IDTime(m.id)
	a.SetTimes(&t, &t, &t)
	m.fs.setAttrOwner(a)
}

func (m *memFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c, e := m.fs.may(ctx, m.agent)
	if e != 0 {
		return e
	}
	size, err := m.fs.k.MemStat(c, m.agent, m.kind, m.id)
	if err != nil {
		return errno(err)
	}
	m.fill(&out.Attr, size)
	return 0
}

func (m *memFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, e := m.fs.may(ctx, m.agent); e != 0 {
		return e
	}
	return syscall.EPERM // a memory does not change: forget it and remember anew
}

func (m *memFile) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := m.fs.may(ctx, m.agent); e != 0 {
		return e
	}
	if mask&(2|1) != 0 { // W_OK, X_OK
		return syscall.EACCES
	}
	return 0
}

func (m *memFile) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := m.fs.may(ctx, m.agent)
	if e != 0 {
		return nil, 0, e
	}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EPERM
	}
	b, err := m.fs.k.MemRead(ctx, c, m.agent, m.kind, m.id)
	if err != nil {
		return nil, 0, errno(err)
	}
	return &bytesHandle{b}, fuse.FOPEN_KEEP_CACHE | fuse.FOPEN_NOFLUSH, 0
}

// newFile makes the node of a file being written in the folder.
func (d *memDir) newFile(name string) *memNew {
	return &memNew{fs: d.fs, parent: &d.Inode, name: name, what: "memory " + d.agent + "/" + d.kind,
		check: func(ctx context.Context) (*kernel.Cred, syscall.Errno) { return d.fs.may(ctx, d.agent) },
		d:     d.fs.layer.NewDraft(&vfs.Node{Kind: vfs.NewMemory, Agent: d.agent, ID: d.kind}, d.fs.states.MaxValue())}
}

// memNew is a file being written in a folder where a file written is
// handed to the kernel whole at its first close and then is gone: a
// memory to be (mem/KIND), a message to send (inbox). What it holds and
// when it is submitted is its vfs.Draft's; this node gives it a name in
// the folder while it is pending. Its name and attributes are never
// cached by the kernel (they vanish when the content is taken).
type memNew struct {
	fusefs.Inode
	fs     *FS
	parent *fusefs.Inode
	name   string
	what   string // for the log
	// check is who may touch the file.
	check func(ctx context.Context) (*kernel.Cred, syscall.Errno)
	d     *vfs.Draft
}

func (n *memNew) open() bool { return n.d.Pending() }

func (n *memNew) fill(a *fuse.Attr) {
	size, mtime, done := n.d.Stat()
	*a = fuse.Attr{Mode: syscall.S_IFREG | 0o644, Size: uint64(size), Nlink: 1}
	if done {
		a.Nlink = 0
	}
	a.SetTimes(&mtime, &mtime, &mtime)
	n.fs.setAttrOwner(a)
}

// entry fills a lookup's reply: attributes, and no caching.
func (n *memNew) entry(out *fuse.EntryOut) {
	n.fill(&out.Attr)
	out.SetEntryTimeout(noCache)
	out.SetAttrTimeout(noCache)
}

func (n *memNew) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := n.check(ctx); e != 0 {
		return e
	}
	n.fill(&out.Attr)
	out.SetTimeout(noCache)
	return 0
}

func (n *memNew) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, e := n.check(ctx); e != 0 {
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

func (n *memNew) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := n.check(ctx)
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
	return &memHandle{n: n, h: h}, fuse.FOPEN_DIRECT_IO, 0
}

// create is the handle of the create(2) that made n.
func (n *memNew) create(c *kernel.Cred, flags uint32) *memHandle {
	h, _ := n.d.Open(c, int(flags), true)
	return &memHandle{n: n, h: h}
}

// discard drops a file being written (unlinked before it was submitted)
// and reports whether there was one.
func (n *memNew) discard() bool { return n.d.Discard() }

// detach takes the name out of the folder once the file is done with.
func (n *memNew) detach() {
	if ch := n.parent.GetChild(n.name); ch == n.EmbeddedInode() {
		n.parent.RmChild(n.name)
	}
}

// memHandle is an open file being written in a kind's folder or an inbox.
type memHandle struct {
	n *memNew
	h *vfs.DraftHandle
}

func (h *memHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return fuse.ReadResultData(h.h.Read(dest, off)), 0
}

func (h *memHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.n.fs.closed.Load() {
		return 0, syscall.ENOTCONN
	}
	w, err := h.h.Write(data, off)
	return uint32(w), errno(err)
}

// Flush is close(2): see vfs.Draft.
func (h *memHandle) Flush(ctx context.Context) syscall.Errno {
	if h.n.fs.closed.Load() {
		return syscall.ENOTCONN
	}
	end, err := h.h.Flush(ctx)
	h.done(end, err)
	return errno(err)
}

func (h *memHandle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return h.Flush(ctx)
}

func (h *memHandle) Release(ctx context.Context) syscall.Errno {
	end, err := h.h.Release(h.n.fs.closed.Load())
	h.done(end, err)
	return 0
}

// done logs a refusal and takes the name out once the draft is done.
func (h *memHandle) done(end bool, err error) {
	if err != nil {
		h.n.fs.log.Info("mount: file not taken", "what", h.n.what, "file", h.n.name, "err", err)
	}
	if end {
		h.n.detach()
	}
}

// bytesHandle reads a memory's file.
type bytesHandle struct{ b []byte }

func (h *bytesHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.b)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.b[off:min(off+int64(len(dest)), int64(len(h.b)))]), 0
}
