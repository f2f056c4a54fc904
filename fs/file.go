package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/vfs"
)

// A state key as a FUSE node. What the file does (its working copy,
// write-back, the versions the page cache may hold) is package vfs's
// StateFile; this node gives it its place in the tree (its key is its
// path below the agent's state folder) and maps its answers to FUSE's:
// writers use direct I/O so the kernel's page cache only ever holds
// committed versions; read-only opens use the page cache and keep it
// across opens (FOPEN_KEEP_CACHE) while the version they read is the one
// it holds, and large ones may be read by the kernel from the key's file
// (passthrough).

// fileNode is a state key.
type fileNode struct {
	fusefs.Inode
	fs    *FS
	agent string
	root  *fusefs.Inode // the agent's state folder: the key is the path below it
	f     *vfs.StateFile
}

func (f *FS) newFile(agent string, root *fusefs.Inode) *fileNode {
	n := &fileNode{fs: f, agent: agent, root: root}
	n.f = f.states.File(agent, n.where)
	return n
}

// where is the node's key, or false once it is out of the tree.
func (n *fileNode) where() (string, bool) { return keyOf(&n.Inode, n.root) }

// fillState fills a with what the layer shows of a state file.
func (f *FS) fillState(a *fuse.Attr, at vfs.Attr) {
	*a = fuse.Attr{Mode: syscall.S_IFREG | at.Mode, Size: uint64(at.Size), Nlink: 1}
	if at.Unlinked {
		a.Nlink = 0
	}
	a.SetTimes(&at.Mtime, &at.Mtime, &at.Ctime)
	a.Blocks = (uint64(at.Size) + 511) / 512
	f.setAttrOwner(a)
}

func (n *fileNode) getattr(ctx context.Context, c *kernel.Cred, a *fuse.Attr) syscall.Errno {
	at, err := n.f.Stat(ctx, c)
	if err != nil {
		return errno(err)
	}
	n.fs.fillState(a, at)
	return 0
}

func (n *fileNode) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c, e := n.fs.may(ctx, n.agent)
	if e != 0 {
		return e
	}
	return n.getattr(ctx, c, &out.Attr)
}

func (n *fileNode) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := n.fs.may(ctx, n.agent); e != 0 {
		return e
	}
	if mask&1 != 0 { // X_OK: state files are not programs
		return syscall.EACCES
	}
	return 0
}

// Setattr: mode, size and mtime are kept with the key (vfs.StateFile's
// Setattr). Owners are the daemon's and atime is not kept: accepted and
// ignored, so that cp -p, tar and rsync work.
func (n *fileNode) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	c, e := n.fs.may(ctx, n.agent)
	if e != 0 {
		return e
	}
	var s vfs.SetAttr
	if m, ok := in.GetMode(); ok {
		s.Mode = &m
	}
	if sz, ok := in.GetSize(); ok {
		size := int64(min(sz, 1<<62))
		s.Size = &size
	}
	if t, ok := in.GetMTime(); ok {
		s.Mtime = &t
	}
	at, err := n.f.Setattr(ctx, c, s)
	if err != nil {
		return errno(err)
	}
	n.fs.fillState(&out.Attr, at)
	return 0
}

func (n *fileNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := n.fs.may(ctx, n.agent)
	if e != 0 {
		return nil, 0, e
	}
	h, err := n.f.Open(ctx, c, int(flags))
	if err != nil {
		return nil, 0, errno(err)
	}
	fh, fl := n.handle(h)
	return fh, fl, 0
}

// handle is h as FUSE's file handle, and the flags of its open.
func (n *fileNode) handle(h *vfs.StateHandle) (fusefs.FileHandle, uint32) {
	var fl uint32
	if !h.Writes() {
		fl |= fuse.FOPEN_NOFLUSH // nothing to do at close: no FLUSH round trip
	}
	if h.Direct {
		fl |= fuse.FOPEN_DIRECT_IO
	}
	if h.KeepCache {
		fl |= fuse.FOPEN_KEEP_CACHE
	}
	if h.DropAttr {
		// Attribute-only invalidation (offset -1) takes no lock the open
		// holds.
		n.NotifyContent(-1, 0)
	}
	if h.Passthrough {
		return &ptHandle{&handle{n, h}}, fl
	}
	return &handle{n, h}, fl
}

// handle is an open file.
type handle struct {
	n *fileNode
	h *vfs.StateHandle
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if fd, size, ok := h.h.Fd(); ok {
		if off >= size {
			return fuse.ReadResultData(nil), 0
		}
		return fuse.ReadResultFd(uintptr(fd), off, int(min(int64(len(dest)), size-off))), 0
	}
	b, err := h.h.Read(ctx, dest, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(b), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	n, err := h.h.Write(ctx, data, off)
	return uint32(n), errno(err)
}

func (h *handle) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return errno(h.h.Allocate(ctx, off, size, mode))
}

func (h *handle) Flush(ctx context.Context) syscall.Errno { return errno(h.h.Flush()) }

func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return errno(h.h.Fsync())
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	h.h.Release()
	return 0
}

// ptHandle is a read-only handle whose reads the kernel may serve from
// the key's file directly (FUSE passthrough). go-fuse registers one
// backing file per node and reuses it for every handle opened while it is
// registered; the layer only makes a handle Passthrough when that
// registration is of the same version.
type ptHandle struct{ *handle }

// PassthroughFd is called by go-fuse when it registers a new backing file
// for the node.
func (h *ptHandle) PassthroughFd() (int, bool) { return h.h.PassthroughFd() }
