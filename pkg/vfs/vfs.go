// Package vfs is the file-system layer below the mount, without FUSE:
// the folders and files of the agents' world as nodes, each file of a
// kind described by one row of a table (what a read gives, what a write
// or a close hands to the kernel, what is refused), and the open files
// (handles) that carry out those rows over the kernel's syscalls.
//
// A new kind of file is a row (a Kind), not a new node type with its own
// handle: fs/, the go-fuse adapter, maps every Kind the same way, and
// this package's tests drive the rows in-process, against a real kernel
// opened in a temporary folder, without FUSE and without root.
//
// Every read and write of a row is the same syscall, for the same caller,
// as the ox-* command that does the same thing: the layer holds no data
// and decides nothing the kernel's gate does not. Errors are the kernel's
// (*proto.Error, carrying an errno name); the adapter turns them into
// errnos in one function.
//
// Rows so far: the files made fresh at each open (an agent's policy and
// status, /audit/head, a message, an approval request: gen.go), the
// files written into mem/KIND/ and inbox/ that are remembered or sent
// whole at close (drafts: draft.go) and those folders themselves, with
// the memories and messages they hold (folder.go), and runs as files
// (/agent/NAME/spawn, /agent/NAME/runs/RUN/{status,out,ctl}: runs.go),
// /audit/log, read on demand as far as a reader reached (audit.go),
// with a run's work on a host folder (runs/RUN/work/ and work.diff:
// work.go), and state keys as files, with their working copies,
// write-back and page-cache versions (state.go) and the changes of their
// folders' names (create, unlink, rename: statedir.go) and the folders
// made by mkdir (statefolders.go). Which file is at which key is the
// tree the adapter keeps (go-fuse's inodes): a StateFile asks it for its
// key.
package vfs

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// Kernel is what the layer asks of the kernel: the syscalls its rows
// make, each through the kernel's gate. *kernel.Kernel is one; the tests
// use a real one too.
type Kernel interface {
	RunSpawn(ctx context.Context, c *kernel.Cred, a proto.SpawnArgs, raw []byte) (proto.RunRecord, error)
	RunAttach(ctx context.Context, c *kernel.Cred, id string, raw []byte, emit func([]byte) error) error
	RunKill(ctx context.Context, c *kernel.Cred, a proto.KillArgs, raw []byte, emit func(*proto.RunRecord) error) error
	RunPs(ctx context.Context, c *kernel.Cred, a proto.PsArgs, raw []byte, emit func(*proto.RunRecord) error) error
	RunStdin(ctx context.Context, c *kernel.Cred, a proto.StdinArgs, raw []byte) (proto.RunRecord, error)
	WorkDiff(ctx context.Context, c *kernel.Cred, a proto.WorkArgs, raw []byte) (proto.WorkRecord, error)
	WorkView(ctx context.Context, c *kernel.Cred, a proto.WorkArgs, raw []byte) (proto.WorkView, error)

	StateList(ctx context.Context, c *kernel.Cred, a proto.StateListArgs, raw []byte, emit func(*proto.StateRecord) error) error
	StateStat(ctx context.Context, c *kernel.Cred, agent, key string) (proto.StateRecord, error)
	StateOpen(ctx context.Context, c *kernel.Cred, agent, key string) (*os.File, []byte, proto.StateRecord, error)
	StateSubmitMeta(c *kernel.Cred, agent, key string, value []byte, m kernel.FileMeta, tag any) kernel.Pending
	StateDeleteSubmit(c *kernel.Cred, agent, key string, tag any) kernel.Pending
	MayWrite(c *kernel.Cred, agent, key string) error
	IsStateFolder(c *kernel.Cred, agent, prefix string) bool
	PolicyShow(ctx context.Context, c *kernel.Cred, agent string, raw []byte) (proto.PolicyRecord, error)
	PolicyWriteRefused(c *kernel.Cred, agent string)
	AuditHead(ctx context.Context, c *kernel.Cred) (proto.AuditHead, error)
	AuditScan(ctx context.Context, c *kernel.Cred, from uint64, fn func(line []byte) error) error
	MsgRead(c *kernel.Cred, agent, id string) (proto.MsgRecord, error)
	ApprovalIDs(c *kernel.Cred) []string
	ApprovalRead(c *kernel.Cred, id string) (proto.ApprovalRecord, error)

	MemRemember(ctx context.Context, c *kernel.Cred, a proto.MemRememberArgs, raw []byte) (proto.MemRememberResult, error)
	MsgSend(ctx context.Context, c *kernel.Cred, a proto.MsgSendArgs, raw []byte) (proto.MsgRecord, error)

	MemIDs(c *kernel.Cred, agent, kind string) ([]string, []int64)
	MemStat(c *kernel.Cred, agent, kind, id string) (int64, error)
	MemRead(ctx context.Context, c *kernel.Cred, agent, kind, id string) ([]byte, error)
	MemForget(ctx context.Context, c *kernel.Cred, a proto.MemForgetArgs, raw []byte) ([]proto.MemoryRecord, error)
	MsgIDs(c *kernel.Cred, agent string) []string
	MsgMaySend(c *kernel.Cred, to string) error
}

var _ Kernel = (*kernel.Kernel)(nil)

// Layer is the tree of one mount: its kernel, and the time of folders
// and files that have none of their own.
type Layer struct {
	k       Kernel
	started time.Time

	mu sync.Mutex
	// following: the open handles of each Follow file. stat(2) of one
	// shows the most any of them holds: a FUSE getattr of fstat(2) does
	// not say which open file it is about.
	following map[Node]map[*Handle]struct{}
	audit     *AuditLog
}

// New returns the layer over k.
func New(k Kernel) *Layer {
	return &Layer{k: k, started: time.Now(), following: map[Node]map[*Handle]struct{}{}}
}

// Attr is what stat shows of a node.
type Attr struct {
	Dir   bool
	Mode  uint32 // permission bits
	Size  int64
	Mtime time.Time
	Ctime time.Time // zero: Mtime's
	// Unlinked: an open file whose name is gone (it has no links).
	Unlinked bool
}

// raw is the args of a syscall as the wire carries them: what the audit
// entry digests, so an entry made through the mount reads like one made
// over the socket.
func raw(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// jsonLine is v as one line of JSON, as every ox-* command prints records.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
