package fs

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// dirNode is a folder of an agent's state: a key prefix, or a folder made
// by mkdir that holds no key yet (kept by the mount, in memory, until a
// file is saved in it or it is removed). The agent's state folder itself
// is the dirNode whose root is itself.
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
			d.fs.mu.Lock()
			if ld := d.fs.localDirs[d.agent]; ld != nil {
				if _, ok := ld[p]; ok {
					ld[p] = m & 0o7777
				}
			}
			d.fs.mu.Unlock()
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
			if m, ok := d.fs.localDirMode(d.agent, join(p, name)); ok {
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
		if fn, ok := ch.Operations().(*fileNode); ok && fn.present() {
			return ch, fn.getattr(ctx, c, &out.Attr)
		}
	}
	rec, err := d.fs.k.StateStat(ctx, c, d.agent, key)
	switch {
	case err == nil:
		ch := d.child(ctx, name, false)
		ch.Operations().(*fileNode).attrFromRec(&rec, &out.Attr)
		return ch, 0
	case !isCode(err, proto.ENOENT):
		return nil, errno(err)
	case d.fs.k.IsStateFolder(c, d.agent, key) || d.fs.isLocalDir(d.agent, key):
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
		if fn, ok := ch.Operations().(*fileNode); ok && fn.present() {
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
	d.fs.mu.Lock()
	for p := range d.fs.localDirs[d.agent] {
		if strings.HasPrefix(p, prefix) && len(p) > skip && (prefix == "" || p[len(prefix)] == '/') && !strings.Contains(p[skip:], "/") {
			ents = append(ents, entry{name: p[skip:], dir: true})
		}
	}
	d.fs.mu.Unlock()
	l := newListing(&d.Inode, ents)
	l.sync = func() { d.fs.settle(d.agent) }
	l.node = func(ctx context.Context, e *entry) *fusefs.Inode { return d.child(ctx, e.name, e.dir) }
	l.attr = func(ctx context.Context, e *entry, ch *fusefs.Inode, out *fuse.EntryOut) syscall.Errno {
		switch n := ch.Operations().(type) {
		case *dirNode:
			n.fill(&out.Attr)
		case *fileNode:
			if e.rec == nil {
				return n.getattr(ctx, c, &out.Attr)
			}
			n.attrFromRec(e.rec, &out.Attr)
		}
		return 0
	}
	return l, 0, 0
}

// exists reports what is at key: a file (in the store or made here) or a
// folder, and the node if the mount has one.
func (d *dirNode) exists(ctx context.Context, c *kernel.Cred, name, key string) (file, dir, stored bool, ch *fusefs.Inode) {
	ch = d.GetChild(name)
	if ch != nil {
		if fn, ok := ch.Operations().(*fileNode); ok && fn.present() {
			file = true
		}
	}
	if _, err := d.fs.k.StateStat(ctx, c, d.agent, key); err == nil {
		file, stored = true, true
	}
	if !file {
		dir = d.fs.k.IsStateFolder(c, d.agent, key) || d.fs.isLocalDir(d.agent, key)
	}
	return file, dir, stored, ch
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
	if file, dir, _, _ := d.exists(ctx, c, name, key); file || dir {
		return nil, syscall.EEXIST
	}
	mode &= 0o7777
	d.fs.mu.Lock()
	ld := d.fs.localDirs[d.agent]
	if ld == nil {
		ld = map[string]uint32{}
		d.fs.localDirs[d.agent] = ld
	}
	ld[key] = mode
	d.fs.mu.Unlock()
	n := d.fs.newDir(d.agent, d.stateRoot(), mode)
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
	file, dir, _, _ := d.exists(ctx, c, name, key)
	switch {
	case file:
		return syscall.ENOTDIR
	case !dir:
		return syscall.ENOENT
	case d.fs.k.IsStateFolder(c, d.agent, key) || !d.emptyLocal(name, key):
		return syscall.ENOTEMPTY
	}
	d.fs.mu.Lock()
	delete(d.fs.localDirs[d.agent], key)
	d.fs.mu.Unlock()
	d.touch()
	return 0
}

// emptyLocal reports whether the folder key has nothing that only the
// mount knows of: folders made by mkdir, files made or saved here and not
// committed yet.
func (d *dirNode) emptyLocal(name, key string) bool {
	d.fs.mu.Lock()
	for p := range d.fs.localDirs[d.agent] {
		if strings.HasPrefix(p, key+"/") {
			d.fs.mu.Unlock()
			return false
		}
	}
	d.fs.mu.Unlock()
	if ch := d.GetChild(name); ch != nil {
		for _, gc := range ch.Children() {
			if fn, ok := gc.Operations().(*fileNode); ok && fn.present() {
				return false
			}
		}
	}
	return true
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
		fh, fl, e := fn.openWrite(&handle{n: fn, cred: c}, flags)
		if e != 0 {
			return nil, nil, 0, e
		}
		return ch, fh, fl, fn.getattr(ctx, c, &out.Attr)
	}
	fn := d.fs.newFile(d.agent, d.stateRoot())
	// The create's mode is kept with the key (0644, the default, needs
	// no saying).
	fn.mode = mode & 0o7777
	fn.modeSend = fn.mode != 0o644
	fn.modeHeld = fn.modeSend
	// A new file is saved at its first close even if nothing was
	// written: `touch new` makes an empty key.
	fn.local, fn.loaded, fn.dirty, fn.unwritten, fn.mtime = true, true, true, true, time.Now()
	fn.ctime = fn.mtime
	fn.writers, fn.cred = 1, c
	ch := d.NewInode(ctx, fn, fusefs.StableAttr{Mode: syscall.S_IFREG})
	d.fs.markBusy(fn, true)
	d.touch()
	fn.mu.Lock()
	fn.fillLocked(&out.Attr, 0, fn.mtime)
	fn.mu.Unlock()
	h := &handle{n: fn, cred: c, write: true, append: flags&syscall.O_APPEND != 0}
	return ch, h, fuse.FOPEN_DIRECT_IO, 0
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
	var fn *fileNode
	if ch != nil {
		fn, _ = ch.Operations().(*fileNode)
	}
	if fn == nil {
		_, err := d.fs.k.StateDeleteSubmit(c, d.agent, key, d.fs.own).Wait()
		return errno(err)
	}
	// Marked gone and deleted under the node's lock: a close racing with
	// the unlink cannot queue its save after the delete.
	fn.mu.Lock()
	fn.gone, fn.dirty, fn.deferred = true, false, false
	var wait *kernel.Pending
	if stored || fn.q.Busy() {
		p := d.fs.k.StateDeleteSubmit(c, d.agent, key, d.fs.own)
		wait = &p
	}
	fn.mu.Unlock()
	if wait == nil {
		return 0 // made here, never saved
	}
	if _, err := wait.Wait(); err != nil && !(isCode(err, proto.ENOENT) && !stored) {
		fn.markGone(false)
		return errno(err)
	}
	return 0
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
	case sDir && dDir && (d.fs.k.IsStateFolder(c, d.agent, newKey) || !nd.emptyLocal(newName, newKey)):
		return syscall.ENOTEMPTY
	}
	d.touch()
	nd.touch()
	if sFile {
		var src, dst *fileNode
		if sCh != nil {
			src, _ = sCh.Operations().(*fileNode)
		}
		if dCh != nil {
			dst, _ = dCh.Operations().(*fileNode)
		}
		return d.renameFile(ctx, c, src, oldKey, sStored, dst, newKey, dStored)
	}
	return d.renameDir(ctx, c, sCh, oldKey, newKey, dDir)
}

// renameFile moves a key: the new key gets the content readers see now
// (the last closed version), then the old key is deleted. A working copy
// still being written moves with the node and is saved under the new name
// at its close.
func (d *dirNode) renameFile(ctx context.Context, c *kernel.Cred, src *fileNode, oldKey string, oldStored bool, dst *fileNode, newKey string, newStored bool) syscall.Errno {
	if dst != nil && dst != src {
		dst.markReplaced(true, newKey)
	}
	var waits []kernel.Pending
	var moving []byte
	// The new key keeps the file's mode and mtime (rename(2) changes
	// neither; its ctime is the rename's).
	saveNew := func(v []byte, mode uint32, mtime time.Time) {
		moving = v
		m := kernel.FileMeta{Mod: mtime}
		if mode != 0o644 {
			m.Mode = mode | proto.ModeSet
		}
		waits = append(waits, d.fs.k.StateSubmitMeta(c, d.agent, newKey, v, m, d.fs.own))
	}
	var shown []byte
	hasShown := false
	if src != nil {
		src.mu.Lock()
		shown, hasShown = src.q.Shown()
	}
	switch {
	case src != nil && src.deferred:
		// Closed empty, its save left to the release: the new key gets
		// that empty content now.
		saveNew([]byte{}, src.mode, src.mtime)
		src.deferred, src.dirty = false, false
	case hasShown:
		saveNew(shown, src.mode, src.mtime)
	case src != nil && src.unsavedLocked():
		// Never closed: nothing to save yet; the old target must go.
		if newStored {
			waits = append(waits, d.fs.k.StateDeleteSubmit(c, d.agent, newKey, d.fs.own))
		}
	default:
		v, rec, err := d.load(ctx, c, oldKey)
		if err != nil {
			if src != nil {
				src.mu.Unlock()
			}
			if dst != nil && dst != src {
				dst.markReplaced(false, "")
			}
			return errno(err)
		}
		mode := uint32(0o644)
		if rec.Mode&proto.ModeSet != 0 {
			mode = rec.Mode & 0o7777
		}
		saveNew(v, mode, rec.Modified)
	}
	// oldStored was looked up before src.mu was taken: a save of src that
	// was in flight then may have landed since (saving back to 0, local
	// false), and the old key must go all the same.
	if oldStored || src != nil && (src.q.Busy() || !src.local) {
		waits = append(waits, d.fs.k.StateDeleteSubmit(c, d.agent, oldKey, d.fs.own))
	}
	if src != nil {
		src.renamed = newKey // until go-fuse moves the node, right after we return
		if moving != nil {
			src.moving, src.hasMoving = moving, true
		}
		src.mu.Unlock()
		defer func() {
			src.mu.Lock()
			src.moving, src.hasMoving = nil, false
			src.mu.Unlock()
		}()
	}
	return waitAll(waits, !oldStored)
}

// load reads a key's committed value.
func (d *dirNode) load(ctx context.Context, c *kernel.Cred, key string) ([]byte, proto.StateRecord, error) {
	file, v, rec, err := d.fs.k.StateOpen(ctx, c, d.agent, key)
	if err != nil || file == nil {
		return v, rec, err
	}
	defer file.Close()
	v = make([]byte, rec.Size)
	if _, err := io.ReadFull(file, v); err != nil {
		return nil, rec, proto.Errorf(proto.EIO, "reading %s:%s: %v", d.agent, key, err)
	}
	return v, rec, nil
}

// waitAll waits for queued changes and returns the first failure (a
// missing old key is fine when it was not known to be stored).
func waitAll(waits []kernel.Pending, missingOK bool) syscall.Errno {
	var first error
	for _, w := range waits {
		if _, err := w.Wait(); err != nil && first == nil && !(missingOK && isCode(err, proto.ENOENT)) {
			first = err
		}
	}
	return errno(first)
}

// renameDir moves every key below oldKey to newKey, each a save of the
// new key and a delete of the old. It is not atomic: the store has no
// rename, and a crash midway leaves both halves (nothing is lost).
func (d *dirNode) renameDir(ctx context.Context, c *kernel.Cred, src *fusefs.Inode, oldKey, newKey string, replaceEmpty bool) syscall.Errno {
	// Saves queued by closes below the folder must be in the store before
	// it is listed.
	d.fs.settle(d.agent)
	var recs []proto.StateRecord
	err := d.fs.k.StateList(ctx, c, proto.StateListArgs{Agent: d.agent, Prefix: oldKey}, nil, func(r *proto.StateRecord) error {
		recs = append(recs, *r)
		return nil
	})
	if err != nil && !isCode(err, proto.ENOENT) {
		return errno(err)
	}
	// Working copies below move with their nodes: their closes save
	// under the new names.
	if src != nil {
		walkFiles(src, func(fn *fileNode) {
			fn.mu.Lock()
			if k, ok := fn.keyLocked(); ok && strings.HasPrefix(k, oldKey+"/") {
				fn.renamed = newKey + k[len(oldKey):]
			}
			fn.mu.Unlock()
		})
	}
	var waits []kernel.Pending
	var queued int64
	for _, r := range recs {
		v, _, err := d.load(ctx, c, r.Key)
		if err != nil {
			waitAll(waits, false)
			return errno(err)
		}
		waits = append(waits,
			d.fs.k.StateSubmitMeta(c, d.agent, newKey+r.Key[len(oldKey):], v, kernel.FileMeta{Mode: r.Mode, Mod: r.Modified}, d.fs.own),
			d.fs.k.StateDeleteSubmit(c, d.agent, r.Key, d.fs.own))
		// Bound what is held in memory.
		if queued += int64(len(v)); queued > 64<<20 {
			if e := waitAll(waits, false); e != 0 {
				return e
			}
			waits, queued = waits[:0], 0
		}
	}
	d.fs.mu.Lock()
	if ld := d.fs.localDirs[d.agent]; ld != nil {
		if replaceEmpty {
			delete(ld, newKey)
		}
		for p, m := range ld {
			if p == oldKey || strings.HasPrefix(p, oldKey+"/") {
				delete(ld, p)
				ld[newKey+p[len(oldKey):]] = m
			}
		}
	}
	d.fs.mu.Unlock()
	return waitAll(waits, false)
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
	d.fs.settle(d.agent)
	return 0
}
