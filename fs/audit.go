package fs

import (
	"context"
	"syscall"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/vfs"
)

// auditLog is /audit/log (vfs.AuditLog): its size is the length of the
// caller's view, never cached, and reads go around the page cache.
type auditLog struct {
	fusefs.Inode
	readOnly
	fs *FS
	a  *vfs.AuditLog
}

func (a *auditLog) fill(ctx context.Context, c *kernel.Cred, at *fuse.Attr) syscall.Errno {
	st, err := a.a.Stat(ctx, c)
	if err != nil {
		return errno(err)
	}
	*at = fuse.Attr{Mode: syscall.S_IFREG | st.Mode, Nlink: 1, Size: uint64(st.Size)}
	at.SetTimes(&st.Mtime, &st.Mtime, &st.Mtime)
	at.Blocks = (uint64(st.Size) + 511) / 512
	a.fs.setAttrOwner(at)
	return 0
}

func (a *auditLog) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return e
	}
	out.SetTimeout(noCache)
	return a.fill(ctx, c, &out.Attr)
}

func (a *auditLog) Access(ctx context.Context, mask uint32) syscall.Errno {
	if _, e := a.fs.cred(ctx); e != 0 {
		return e
	}
	if mask&(2|1) != 0 {
		return syscall.EACCES
	}
	return 0
}

func (a *auditLog) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	c, e := a.fs.cred(ctx)
	if e != 0 {
		return nil, 0, e
	}
	h, err := a.a.Open(c, int(flags))
	if err != nil {
		return nil, 0, errno(err)
	}
	return &auditHandle{h}, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
}

type auditHandle struct{ h *vfs.AuditHandle }

func (h *auditHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n, err := h.h.Read(ctx, dest, off)
	if err != nil {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}
