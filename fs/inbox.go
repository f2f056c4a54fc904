package fs

import (
	"context"
	"strings"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
)

// The messages and approvals view:
//
//   - /agent/NAME/inbox/ID.md is a message of NAME's inbox (front matter,
//     then the text, then attached records as JSON lines), read-only;
//     reading one does not receive it (ox-msg recv does). Creating a file
//     there sends its content as a message to NAME once it is closed,
//     like a memory's file (memNew): the name is only a handle, and the
//     message's own ID.md takes its place. A front matter may give
//     reply_to. Whoever may act on NAME may write there (the admin sends
//     as an operator, a run of NAME to itself).
//   - a run of another agent (one whose sandbox shows it the mount) sees
//     /agent/NAME as a folder holding only inbox/, write-only: it may
//     create files there and nothing else. Whether the send is granted is
//     the policies' msg rules, decided by msg.send at close(2): refused
//     with EACCES, and audited, like every send.
//   - /approvals/ID is a pending approval request as a JSON record; an
//     operator decides with ox-approve yes|no ID.

// inboxDir is /agent/NAME/inbox. Whether a caller sees it whole or as
// the write-only slot of a run of another agent is decided per call:
// the kernel's entry cache is one for all callers.
type inboxDir struct {
	fusefs.Inode
	fs    *FS
	agent string
}

func (d *inboxDir) check(ctx context.Context) (*kernel.Cred, syscall.Errno) {
	c, _, e := d.checkSlot(ctx)
	return c, e
}

// checkSlot is check, and whether the caller may only send.
func (d *inboxDir) checkSlot(ctx context.Context) (*kernel.Cred, bool, syscall.Errno) {
	c, e := d.fs.cred(ctx)
	if e != 0 {
		return nil, false, e
	}
	if d.fs.k.MayAct(c, d.agent) != nil && d.fs.k.MsgSlot(c, d.agent) {
		return c, true, 0
	}
	c, e = d.fs.may(ctx, d.agent)
	return c, false, e
}

func (d *inboxDir) fill(a *fuse.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFDIR | 0o755, Nlink: 1}
	a.SetTimes(&d.fs.started, &d.fs.started, &d.fs.started)
	d.fs.setAttrOwner(a)
}

func (d *inboxDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.check(ctx); e != 0 {
		return e
	}
	d.fill(&out.Attr)
	return 0
}

func (d *inboxDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	_, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return e
	}
	if slot && mask&4 != 0 { // R_OK
		return syscall.EACCES
	}
	return 0
}

func (d *inboxDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.fs.statfs(out)
}

func (d *inboxDir) pending(name string) *memNew {
	if ch := d.GetChild(name); ch != nil {
		if n, ok := ch.Operations().(*memNew); ok && n.open() {
			return n
		}
	}
	return nil
}

// msgID returns the id of a message's file name, if name is one.
func msgID(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, ".md")
	return id, ok && len(id) > 1 && id[0] == 'm' && strings.Trim(id[1:], "0123456789") == ""
}

func (d *inboxDir) message(ctx context.Context, name, id string) *fusefs.Inode {
	if ch := d.GetChild(name); ch != nil {
		if _, ok := ch.Operations().(*vfile); ok {
			return ch
		}
	}
	return d.NewInode(ctx, &vfile{fs: d.fs, n: &vfs.Node{Kind: vfs.Message, Agent: d.agent, ID: id}}, fusefs.StableAttr{Mode: syscall.S_IFREG})
}

func (d *inboxDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, e
	}
	if n := d.pending(name); n != nil {
		n.entry(out)
		return n.EmbeddedInode(), 0
	}
	id, ok := msgID(name)
	if slot || !ok {
		return nil, syscall.ENOENT
	}
	if _, err := d.fs.k.MsgRead(c, d.agent, id); err != nil {
		return nil, errno(err)
	}
	ch := d.message(ctx, name, id)
	d.fs.entryAttr(ctx, c, ch, out)
	return ch, 0
}

func (d *inboxDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, 0, e
	}
	if slot {
		return nil, 0, syscall.EACCES // another agent's inbox: write-only
	}
	var ents []entry
	for _, id := range d.fs.k.MsgIDs(c, d.agent) {
		ents = append(ents, entry{name: id + ".md"})
	}
	for name, ch := range d.Children() {
		if n, ok := ch.Operations().(*memNew); ok && n.open() {
			ents = append(ents, entry{name: name, rec: &proto.StateRecord{}})
		}
	}
	l := newListing(&d.Inode, ents)
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode {
		if e.rec != nil {
			if n := d.pending(e.name); n != nil {
				return n.EmbeddedInode()
			}
			n := d.newFile(e.name)
			n.d.End()
			return d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFREG})
		}
		id, _ := msgID(e.name)
		return d.message(ctx, e.name, id)
	}
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		switch n := ch.Operations().(type) {
		case *vfile:
			n.fs.entryAttr(ctx, c, ch, out)
		case *memNew:
			n.entry(out)
		}
		return 0
	}
	return l, 0, 0
}

// newFile makes the node of a message being written.
func (d *inboxDir) newFile(name string) *memNew {
	return &memNew{fs: d.fs, parent: &d.Inode, name: name, what: "message to " + d.agent, check: d.check,
		d: d.fs.layer.NewDraft(&vfs.Node{Kind: vfs.NewMessage, Agent: d.agent}, d.fs.states.MaxValue())}
}

func (d *inboxDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, nil, 0, e
	}
	if !newMemName(name) {
		return nil, nil, 0, syscall.EINVAL
	}
	if d.pending(name) != nil {
		return nil, nil, 0, syscall.EEXIST
	}
	// A send the policy refuses fails here, where every program reports
	// it (a shell's > does not report a failing close), audited as
	// msg.send; the write is checked again when the file is closed.
	if err := d.fs.k.MsgMaySend(c, d.agent); err != nil {
		if isCode(err, proto.EPERM) {
			return nil, nil, 0, syscall.EACCES
		}
		return nil, nil, 0, errno(err)
	}
	if id, ok := msgID(name); ok && !slot {
		if _, err := d.fs.k.MsgRead(c, d.agent, id); err == nil {
			return nil, nil, 0, syscall.EEXIST
		}
	}
	n := d.newFile(name)
	ch := d.NewInode(ctx, n, fusefs.StableAttr{Mode: syscall.S_IFREG})
	h := n.create(c, flags)
	n.entry(out)
	return ch, h, fuse.FOPEN_DIRECT_IO, 0
}

func (d *inboxDir) Unlink(ctx context.Context, name string) syscall.Errno {
	if _, e := d.check(ctx); e != 0 {
		return e
	}
	if n := d.pending(name); n != nil && n.discard() {
		return 0
	}
	return syscall.EPERM // a message stays; ox-msg recv marks it read
}

func (d *inboxDir) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}
func (d *inboxDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *inboxDir) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }
func (d *inboxDir) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *inboxDir) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EPERM
}
func (d *inboxDir) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
func (d *inboxDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}
