// Package fs is the FUSE view of the agents' world, mounted by oxiosd:
//
//	/agent/NAME/state/...                 read-write: a file is a key, a folder a key prefix
//	/agent/NAME/mem/{working,episodic,semantic}/ID.md   memories: a file written is remembered, rm forgets
//	/agent/NAME/inbox/ID.md               messages: a file written is sent (drafts.go)
//	/agent/NAME/policy                    read-only: the agent's policy (writes EROFS, audited)
//	/agent/NAME/status                    read-only JSON: keys, bytes, last change
//	/agent/NAME/spawn                     a write starts a run; a read gives its id
//	/agent/NAME/runs/RUN/{status,out,ctl} a run as files
//	/audit/log  /audit/head               read-only
//	/approvals/ID                         read-only: pending approval requests
//
// It is an adapter over the kernel's syscall methods (package kernel)
// and reaches no data any other way: every read, write and refusal is the
// same syscall, policy-checked and audited, as over the socket. Kernel
// errors become errnos in exactly one function, errno.
//
// Files whose kind is a row of package vfs's table (policy, status,
// spawn, runs/, audit/head, memories, messages, approvals) are served by
// two node types, vdir and vfile (vfs.go), which only carry requests to
// the layer and its answers back; the folders mem/KIND/ and inbox/ are
// vfs.DraftFolders, and a file written there is a vfs.Draft, whose node
// here only gives it a name while it is pending (drafts.go). A state key
// is a vfs.StateFile (its working copy, write-back, and the versions the
// page cache may hold), whose node here (file.go) gives it its place in
// the tree and maps its answers to FUSE's; the folders of state
// (state.go) keep the tree and carry creates, unlinks and renames to
// vfs.States. The layer's own tests drive all of these without FUSE.
//
// Values are whole, so a file's writes go to an in-memory working copy
// shared by its open handles, and its new content is handed to the kernel
// when a handle is closed (queued for the next group commit: visible
// through the mount at once, and to socket clients once durable, within a
// commit) or fsynced (and fsync returns only once it is durable). See
// pkg/vfs/state.go.
//
// Caching is deliberate: entries and attributes are cached by the kernel
// for an hour and file pages are kept across opens, because a stat that
// reaches the daemon costs 20-50x one that does not. Coherence comes from
// the kernel's bus instead of timeouts: every durable change made over the
// socket invalidates the entry, attributes and pages it touched (see
// notify.go).
package fs

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
	"github.com/oxios/oxios/pkg/writeback"
)

// Cache timeouts. Entries and attributes live long: every change that
// does not come through the mount is announced on the bus and invalidated
// at once (notify.go), so a timeout only bounds how long a lost
// invalidation could last (a lost event also triggers a sweep). Failed
// lookups are kept shorter: after a sweep, negative entries are the one
// thing that cannot be enumerated and invalidated.
const (
	entryTimeout    = time.Hour
	attrTimeout     = time.Hour
	negativeTimeout = 10 * time.Second
	// Generated files (status, audit) change with every syscall: their
	// attributes are not cached at all (zero would mean "the default").
	noCache = time.Nanosecond
)

// FS is the mounted view. Its nodes hold a pointer to it.
type FS struct {
	k   Kernel
	log *slog.Logger
	// own is the tag of the changes made through the mount: the kernel
	// puts it in their bus events, and the invalidator skips them (the
	// kernel's caches already hold what was written).
	own      *byte
	uid, gid uint32

	layer   *vfs.Layer  // the folders and files of package vfs (runs)
	states  *vfs.States // state keys' files and their write-back
	root    *rootNode
	agents  *agentsNode
	started time.Time // the time of folders, which have none in the store
	self    *kernel.Cred

	mu          sync.Mutex
	localAgents map[string]uint32 // mkdir /agent/NAME before any save: mode

	refusedN atomic.Int32
	refused  sync.Map // caller -> time.Time: refused by Identify, not asked again for a while

	closed atomic.Bool // Close has begun: requests fail with ENOTCONN

	sub  *bus.Sub
	stop chan struct{}
	wg   sync.WaitGroup
}

func newFS(k Kernel, log *slog.Logger) *FS {
	f := &FS{
		k:           k,
		layer:       vfs.New(k),
		log:         log,
		own:         new(byte),
		uid:         uint32(os.Getuid()),
		gid:         uint32(os.Getgid()),
		localAgents: map[string]uint32{},
		stop:        make(chan struct{}),
		started:     time.Now(),
	}
	f.states = vfs.NewStates(k, vfs.StateOptions{
		Log:      log,
		Own:      f.own,
		MaxValue: int64(k.Config().Limits.MaxValue),
		// The kernel reads large files straight from their backing file
		// (root only; go-fuse turns it off if the kernel refuses).
		Passthrough: os.Geteuid() == 0,
	})
	f.root = &rootNode{staticDir{fs: f, mode: 0o755, onAdd: f.build}}
	return f
}

type caller struct {
	uid uint32
	pid uint32
}

// refuseFor is how long a refused caller is refused without asking the
// kernel again: Identify audits each refusal, and one `ls` by a stranger
// is dozens of requests.
const refuseFor = 5 * time.Second

// cred is who is asking, as the kernel sees them: the same Identify as a
// socket connection, per request (a FUSE request carries the caller's
// uid, gid and pid).
func (f *FS) cred(ctx context.Context) (*kernel.Cred, syscall.Errno) {
	if f.closed.Load() {
		return nil, syscall.ENOTCONN
	}
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return nil, syscall.EACCES
	}
	key := caller{c.Uid, c.Pid}
	if f.refusedN.Load() > 0 {
		if t, ok := f.refused.Load(key); ok {
			if time.Since(t.(time.Time)) < refuseFor {
				return nil, syscall.EACCES
			}
			f.refused.Delete(key)
			f.refusedN.Add(-1)
		}
	}
	kc, err := f.k.Identify(c.Uid, c.Gid, int32(c.Pid))
	if err != nil {
		if _, loaded := f.refused.Swap(key, time.Now()); !loaded {
			f.refusedN.Add(1)
		}
		return nil, errno(err)
	}
	return kc, 0
}

// may returns the caller's Cred if they may act on agent.
func (f *FS) may(ctx context.Context, agent string) (*kernel.Cred, syscall.Errno) {
	c, e := f.cred(ctx)
	if e != 0 {
		return nil, e
	}
	if err := f.k.MayAct(c, agent); err != nil {
		f.auditRefusal(c, agent+": [mount]", err)
		return nil, errno(err)
	}
	return c, 0
}

// auditRefusal puts a refusal the mount decided on the audit log (op
// fs.access): a caller reaching into another agent's tree, or making a
// link. Lookups and listings that merely leave out what the caller may
// not see are not refusals and are not audited.
func (f *FS) auditRefusal(c *kernel.Cred, target string, err error) {
	code := proto.EPERM
	var pe *proto.Error
	if errors.As(err, &pe) {
		code = pe.Code
	}
	f.k.Refused(c, proto.OpFSAccess, target, nil, code)
}

// mayWrite checks that c may write key of agent (its policy).
func (f *FS) mayWrite(c *kernel.Cred, agent, key string) syscall.Errno {
	return errno(f.k.MayWrite(c, agent, key))
}

// errno is the one place where errors become errnos. Kernel errors carry
// errno names (pkg/proto); the few that name no file-system condition are
// mapped to the nearest one.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var pe *proto.Error
	if errors.As(err, &pe) {
		if e, ok := codes[pe.Code]; ok {
			return e
		}
		return syscall.EIO
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, writeback.ErrTooLarge):
		return syscall.EFBIG
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	}
	return syscall.EIO
}

// shut makes every request fail with ENOTCONN from now on: the mount
// is going away. Close then saves what closes left.
func (f *FS) shut() {
	f.closed.Store(true)
	f.states.Shut()
}

// statfs reports the file system that holds the data directory.
func (f *FS) statfs(out *fuse.StatfsOut) syscall.Errno {
	var st syscall.Statfs_t
	if err := syscall.Statfs(f.k.Config().Data, &st); err != nil {
		return errno(err)
	}
	out.FromStatfsT(&st)
	out.NameLen = proto.MaxKeyElem
	return 0
}

// agentExists reports whether c sees agent: it has state, or was made by
// mkdir and c may act on it.
func (f *FS) agentExists(c *kernel.Cred, agent string) bool {
	if f.k.AgentVisible(c, agent) {
		return true
	}
	f.mu.Lock()
	_, ok := f.localAgents[agent]
	f.mu.Unlock()
	return ok && f.k.MayAct(c, agent) == nil
}

// codes maps the kernel's error codes to errnos. Most are themselves; the
// few that name no file-system condition map to the nearest one.
var codes = map[string]syscall.Errno{
	proto.EINVAL:       syscall.EINVAL,
	proto.ENOENT:       syscall.ENOENT,
	proto.EEXIST:       syscall.EEXIST,
	proto.ENOTDIR:      syscall.ENOTDIR,
	proto.EISDIR:       syscall.EISDIR,
	proto.EPERM:        syscall.EPERM,
	proto.EACCES:       syscall.EACCES,
	proto.E2BIG:        syscall.EFBIG, // a value past limits.max_value: a file too large
	proto.EMSGSIZE:     syscall.EFBIG,
	proto.ENAMETOOLONG: syscall.ENAMETOOLONG,
	proto.EBADMSG:      syscall.EIO,
	proto.ENOSYS:       syscall.ENOSYS,
	proto.EPROTO:       syscall.EIO,
	proto.ESHUTDOWN:    syscall.ESHUTDOWN,
	proto.EIO:          syscall.EIO,
	proto.EDQUOT:       syscall.EDQUOT,
	proto.EROFS:        syscall.EROFS,
	proto.ESRCH:        syscall.ESRCH, // a signal to a run that has ended
}

func (f *FS) setAttrOwner(a *fuse.Attr) {
	a.Uid, a.Gid = f.uid, f.gid
	a.Blksize = 4096
}
