package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
)

// The fixed parts of the tree: /, /agent, /agent/NAME and what is in it
// besides state, and /audit.

// readOnly refuses every change to the fixed parts of the tree with EROFS
// (go-fuse would otherwise let unlink and rmdir "succeed" on nodes that do
// not implement them).
type readOnly struct{}

func (readOnly) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (readOnly) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (readOnly) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (readOnly) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (readOnly) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }
func (readOnly) Rmdir(ctx context.Context, name string) syscall.Errno  { return syscall.EROFS }
func (readOnly) Rename(ctx context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}
func (readOnly) Link(ctx context.Context, target fusefs.InodeEmbedder, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (readOnly) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

// staticDir is a directory of fixed children, made in OnAdd. agent, if
// set, is the agent the caller must be allowed to act on.
type staticDir struct {
	fusefs.Inode
	readOnly
	fs    *FS
	agent string
	mode  uint32
	onAdd func(ctx context.Context, d *staticDir)
	// slots: an agent's folder, which a run of another agent sees holding
	// only its inbox, to send messages (drafts.go).
	slots bool
}

func (f *FS) newStatic(agent string, mode uint32, onAdd func(ctx context.Context, d *staticDir)) *staticDir {
	return &staticDir{fs: f, agent: agent, mode: mode, onAdd: onAdd}
}

func (d *staticDir) OnAdd(ctx context.Context) {
	if d.onAdd != nil {
		d.onAdd(ctx, d)
	}
}

func (d *staticDir) check(ctx context.Context) (*kernel.Cred, syscall.Errno) {
	c, _, e := d.checkSlot(ctx)
	return c, e
}

// checkSlot is check, and whether the caller sees the folder only as
// the slot of another agent's inbox.
func (d *staticDir) checkSlot(ctx context.Context) (*kernel.Cred, bool, syscall.Errno) {
	if d.agent == "" {
		c, e := d.fs.cred(ctx)
		return c, false, e
	}
	if d.slots {
		c, e := d.fs.cred(ctx)
		if e != 0 {
			return nil, false, e
		}
		if d.fs.k.MayAct(c, d.agent) != nil && d.fs.k.MsgSlot(c, d.agent) {
			return c, true, 0
		}
	}
	c, e := d.fs.may(ctx, d.agent)
	return c, false, e
}

func (d *staticDir) fill(a *fuse.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFDIR | d.mode, Nlink: 1}
	a.SetTimes(&d.fs.started, &d.fs.started, &d.fs.started)
	d.fs.setAttrOwner(a)
}

func (d *staticDir) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := d.check(ctx); e != 0 {
		return e
	}
	d.fill(&out.Attr)
	return 0
}

func (d *staticDir) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := d.check(ctx); e != 0 {
		return e
	}
	if mask&2 != 0 { // W_OK
		return syscall.EACCES
	}
	return 0
}

func (d *staticDir) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return d.fs.statfs(out)
}

func (d *staticDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, e
	}
	ch := d.GetChild(name)
	if ch == nil || slot && name != "inbox" {
		return nil, syscall.ENOENT
	}
	return ch, attrOf(ctx, c, ch, out)
}

func (d *staticDir) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, slot, e := d.checkSlot(ctx)
	if e != 0 {
		return nil, 0, e
	}
	var ents []entry
	for name, ch := range d.Children() {
		if !slot || name == "inbox" {
			ents = append(ents, entry{name: name, dir: ch.IsDir()})
		}
	}
	l := newListing(&d.Inode, ents)
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode {
		if ch := d.GetChild(e.name); ch != nil {
			return ch
		}
		// Gone since the listing was taken: an empty stand-in.
		return d.NewInode(ctx, &fusefs.Inode{}, fusefs.StableAttr{Mode: syscall.S_IFREG})
	}
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		return attrOf(ctx, c, ch, out)
	}
	return l, 0, 0
}

// attrOf fills the entry of a child of a fixed directory.
func attrOf(ctx context.Context, c *kernel.Cred, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
	switch n := ch.Operations().(type) {
	case *staticDir:
		n.fill(&out.Attr)
	case *agentsNode:
		n.fill(&out.Attr)
	case *dirNode:
		n.fill(&out.Attr)
	case *draftDir:
		n.fill(&out.Attr)
	case *auditLog:
		out.SetAttrTimeout(noCache)
		return n.fill(ctx, c, &out.Attr)
	case *vdir:
		n.fs.entryAttr(ctx, c, ch, out)
	case *vfile:
		n.fs.entryAttr(ctx, c, ch, out)
	default:
		return syscall.ENOENT
	}
	return 0
}

// rootNode is the root: agent/ and audit/.
type rootNode struct {
	staticDir
}

// build makes the fixed tree below the root.
func (f *FS) build(ctx context.Context, d *staticDir) {
	f.agents = &agentsNode{fs: f}
	d.AddChild("agent", d.NewPersistentInode(ctx, f.agents, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
	audit := f.newStatic("", 0o555, func(ctx context.Context, a *staticDir) {
		a.AddChild("head", a.NewPersistentInode(ctx, &vfile{fs: f, n: &vfs.Node{Kind: vfs.AuditHead}}, fusefs.StableAttr{Mode: syscall.S_IFREG}), true)
		a.AddChild("log", a.NewPersistentInode(ctx, &auditLog{fs: f, a: f.layer.AuditLog()}, fusefs.StableAttr{Mode: syscall.S_IFREG}), true)
	})
	d.AddChild("audit", d.NewPersistentInode(ctx, audit, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
	d.AddChild("approvals", d.NewPersistentInode(ctx, &vdir{fs: f, d: f.layer.Approvals()}, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
}

// agentsNode is /agent: one folder per agent the caller may act on. mkdir
// makes an agent's folder before its first key is saved (the admin's, or
// a user's granted the name).
type agentsNode struct {
	fusefs.Inode
	readOnly
	fs *FS
}

func (a *agentsNode) fill(at *fuse.Attr) {
	*at = fuse.Attr{Mode: syscall.S_IFDIR | 0o755, Nlink: 1}
	at.SetTimes(&a.fs.started, &a.fs.started, &a.fs.started)
	a.fs.setAttrOwner(at)
}

func (a *agentsNode) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if _, e := a.fs.cred(ctx); e != 0 {
		return e
	}
	a.fill(&out.Attr)
	return 0
}

func (a *agentsNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	_, e := a.fs.cred(ctx)
	return e
}

func (a *agentsNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return a.fs.statfs(out)
}

// agent returns the node of agent name, making it (with its fixed
// children) the first time.
func (a *agentsNode) agent(ctx context.Context, name string) *fusefs.Inode {
	if ch := a.GetChild(name); ch != nil {
		return ch
	}
	return a.NewPersistentInode(ctx, a.fs.newAgent(name), fusefs.StableAttr{Mode: syscall.S_IFDIR})
}

func (a *agentsNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return nil, e
	}
	if proto.CheckAgent(name) == nil && a.fs.k.MayAct(c, name) != nil && a.fs.k.MsgSlot(c, name) {
		// A run of another agent: the folder shows it only the inbox.
		ch := a.agent(ctx, name)
		ch.Operations().(*staticDir).fill(&out.Attr)
		return ch, 0
	}
	if proto.CheckAgent(name) != nil || !a.fs.agentExists(c, name) {
		// Agents the caller may not act on are absent; looking one up by
		// name is an attempt to reach it, and audited.
		if proto.CheckAgent(name) == nil {
			if err := a.fs.k.MayAct(c, name); err != nil {
				a.fs.auditRefusal(c, name+": [mount]", err)
			}
		}
		return nil, syscall.ENOENT
	}
	ch := a.agent(ctx, name)
	ch.Operations().(*staticDir).fill(&out.Attr)
	return ch, 0
}

func (a *agentsNode) OpendirHandle(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return nil, 0, e
	}
	names := a.fs.k.Agents(ctx, c)
	a.fs.mu.Lock()
	for n := range a.fs.localAgents {
		names = append(names, n)
	}
	a.fs.mu.Unlock()
	ents := make([]entry, 0, len(names))
	for _, n := range names {
		if a.fs.k.MayAct(c, n) == nil {
			ents = append(ents, entry{name: n, dir: true})
		}
	}
	l := newListing(&a.Inode, ents)
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode { return a.agent(ctx, e.name) }
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		ch.Operations().(*staticDir).fill(&out.Attr)
		return 0
	}
	return l, 0, 0
}

func (a *agentsNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return nil, e
	}
	if err := proto.CheckAgent(name); err != nil {
		return nil, errno(err)
	}
	if err := a.fs.k.MayAct(c, name); err != nil {
		return nil, errno(err)
	}
	if a.fs.agentExists(c, name) {
		return nil, syscall.EEXIST
	}
	a.fs.mu.Lock()
	a.fs.localAgents[name] = mode & 0o7777
	a.fs.mu.Unlock()
	ch := a.agent(ctx, name)
	ch.Operations().(*staticDir).fill(&out.Attr)
	return ch, 0
}

func (a *agentsNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return e
	}
	if a.fs.k.AgentVisible(c, name) {
		return syscall.ENOTEMPTY // an agent with state stays
	}
	a.fs.mu.Lock()
	defer a.fs.mu.Unlock()
	if _, ok := a.fs.localAgents[name]; !ok || a.fs.k.MayAct(c, name) != nil {
		return syscall.ENOENT
	}
	if a.fs.states.HasFolders(name) {
		return syscall.ENOTEMPTY
	}
	if a.fs.states.Busy(name) {
		return syscall.ENOTEMPTY
	}
	delete(a.fs.localAgents, name)
	return 0
}

// newAgent makes /agent/NAME: state/, mem/{working,episodic,semantic}/,
// inbox/, runs/, policy, status and spawn.
func (f *FS) newAgent(name string) *staticDir {
	d := f.newStatic(name, 0o755, func(ctx context.Context, d *staticDir) {
		inbox := &draftDir{fs: f, f: f.layer.Inbox(name, f.states.MaxValue()), slots: true}
		d.AddChild("inbox", d.NewPersistentInode(ctx, inbox, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
		st := f.newDir(name, nil, 0o755)
		stIno := d.NewPersistentInode(ctx, st, fusefs.StableAttr{Mode: syscall.S_IFDIR})
		st.root = stIno
		d.AddChild("state", stIno, true)
		mem := f.newStatic(name, 0o555, func(ctx context.Context, m *staticDir) {
			// One folder per kind: its memories, and creating a file in
			// it remembers one (drafts.go).
			for _, kind := range memory.Kinds {
				md := &draftDir{fs: f, f: f.layer.MemFolder(name, kind, f.states.MaxValue())}
				m.AddChild(kind, m.NewPersistentInode(ctx, md, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
			}
		})
		d.AddChild("mem", d.NewPersistentInode(ctx, mem, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
		// Rows of package vfs: policy and status (read-only, made at
		// each open), spawn (a write starts a run) and runs/.
		for _, k := range []*vfs.Kind{vfs.Policy, vfs.AgentStatus, vfs.Spawn} {
			d.AddChild(k.Name, d.NewPersistentInode(ctx, &vfile{fs: f, n: &vfs.Node{Kind: k, Agent: name}}, fusefs.StableAttr{Mode: syscall.S_IFREG}), true)
		}
		d.AddChild("runs", d.NewPersistentInode(ctx, &vdir{fs: f, agent: name, d: f.layer.Runs(name)}, fusefs.StableAttr{Mode: syscall.S_IFDIR}), true)
	})
	d.slots = true
	return d
}
