package vfs

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
)

// Folders of drafts: /agent/NAME/mem/KIND/ (memories) and
// /agent/NAME/inbox/ (messages). What the kernel holds is listed there as
// read-only files (a row each: Memory, Message); a file created there is
// a Draft, handed to the kernel whole at its first close, and then its
// name is gone and the kernel's own ID.md is there:
//
//   - only NAME.md may be created (editors' swap and backup files: .x.swp,
//     x~, 4913 are EINVAL, so that no editor litters the folder), and not
//     a name being written or of what is there (EEXIST);
//   - unlink of a draft discards it; unlink of a memory forgets it; a
//     message stays (EPERM: ox-msg recv marks it read);
//   - every other change (mkdir, rename, link, symlink, mknod, chmod of
//     the folder) is EPERM: the adapter refuses them.
//
// An inbox has a second face, the slot: a run of another agent (whose
// sandbox shows it the mount) sees NAME's folder holding only inbox/,
// write-only: it may create files there (send) and nothing else.
// Whether a caller sees the slot is the adapter's to tell (it knows who
// asks; the kernel's MsgSlot decides).

// Memory is /agent/NAME/mem/KIND/ID.md (Node.ID is the memory's key,
// KIND/ID.md): the memory as it is stored, front matter then text. A memory
// never changes (an id is never reused): its pages and attributes may be
// kept, and a write is EPERM (forget it and remember anew).
var Memory = &Kind{
	Mode:     0o444,
	Stable:   true,
	WriteErr: proto.EPERM,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		kind, id, _ := memory.SplitKey(n.ID)
		return k.MemRead(ctx, c, n.Agent, kind, id)
	},
	Stat: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) (int64, time.Time, error) {
		kind, id, _ := memory.SplitKey(n.ID)
		size, err := k.MemStat(c, n.Agent, kind, id)
		return size, memory.IDTime(id), err
	},
}

// DraftFolder is a folder of drafts (mem/KIND/ or inbox/).
type DraftFolder struct {
	l     *Layer
	agent string
	kind  string // the memory kind; "" for an inbox
	max   int64  // a draft's size limit

	mu      sync.Mutex
	pending map[string]*Draft
}

// MemFolder is /agent/NAME/mem/KIND/, its drafts at most max bytes.
func (l *Layer) MemFolder(agent, kind string, max int64) *DraftFolder {
	return &DraftFolder{l: l, agent: agent, kind: kind, max: max, pending: map[string]*Draft{}}
}

// Inbox is /agent/NAME/inbox/, its drafts at most max bytes.
func (l *Layer) Inbox(agent string, max int64) *DraftFolder {
	return &DraftFolder{l: l, agent: agent, max: max, pending: map[string]*Draft{}}
}

// Agent is the agent whose folder f is.
func (f *DraftFolder) Agent() string { return f.agent }

// What says what f's drafts are, for a log.
func (f *DraftFolder) What() string {
	if f.kind != "" {
		return "memory " + f.agent + "/" + f.kind
	}
	return "message to " + f.agent
}

// FolderEntry is a name in a DraftFolder: a file of what the kernel
// holds (File, with its attributes), or a Draft being written.
type FolderEntry struct {
	Name  string
	File  *Node
	Attr  Attr
	Sized bool // Attr is File's (else ask Layer.Stat)
	Draft *Draft
}

// IDName is the id of a memory's or a message's file name, if name is
// one.
func (f *DraftFolder) IDName(name string) (string, bool) {
	id, ok := strings.CutSuffix(name, ".md")
	if !ok {
		return "", false
	}
	if f.kind != "" {
		return id, memory.CheckID(id) == nil
	}
	return id, len(id) > 1 && id[0] == 'm' && strings.Trim(id[1:], "0123456789") == ""
}

// NewName reports whether name may be created in a folder of drafts.
func NewName(name string) bool {
	return len(name) > len(".md") && strings.HasSuffix(name, ".md") &&
		!strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "~#")
}

// Pending is the draft being written under name, if there is one.
func (f *DraftFolder) Pending(name string) *Draft {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.pending[name]; d != nil && d.Pending() {
		return d
	}
	delete(f.pending, name)
	return nil
}

// file is the node of what the kernel holds under id.
func (f *DraftFolder) file(id string) *Node {
	if f.kind != "" {
		return &Node{Kind: Memory, Agent: f.agent, ID: f.kind + "/" + id + ".md"}
	}
	return &Node{Kind: Message, Agent: f.agent, ID: id}
}

// stat finds what the kernel holds under id, with its attributes.
func (f *DraftFolder) stat(ctx context.Context, c *kernel.Cred, id string) (*Node, Attr, error) {
	n := f.file(id)
	if f.kind != "" {
		size, err := f.l.k.MemStat(c, f.agent, f.kind, id)
		if err != nil {
			return nil, Attr{}, err
		}
		return n, f.memAttr(id, size), nil
	}
	if _, err := f.l.k.MsgRead(c, f.agent, id); err != nil {
		return nil, Attr{}, err
	}
	a, err := f.l.Stat(ctx, c, Entry{File: n}, nil)
	return n, a, err
}

func (f *DraftFolder) memAttr(id string, size int64) Attr {
	return Attr{Mode: Memory.Mode, Size: size, Mtime: memory.IDTime(id)}
}

// Lookup finds name for c (slot: c sees the folder as an inbox's slot).
func (f *DraftFolder) Lookup(ctx context.Context, c *kernel.Cred, name string, slot bool) (FolderEntry, error) {
	if d := f.Pending(name); d != nil {
		return FolderEntry{Name: name, Draft: d}, nil
	}
	id, ok := f.IDName(name)
	if slot || !ok {
		return FolderEntry{}, syscall.ENOENT
	}
	n, a, err := f.stat(ctx, c, id)
	if err != nil {
		return FolderEntry{}, err
	}
	return FolderEntry{Name: name, File: n, Attr: a, Sized: true}, nil
}

// Entries lists the folder for c: what the kernel holds, then the drafts
// being written (in no order). A slot is not listed (EACCES).
func (f *DraftFolder) Entries(ctx context.Context, c *kernel.Cred, slot bool) ([]FolderEntry, error) {
	if slot {
		return nil, syscall.EACCES // another agent's inbox: write-only
	}
	var es []FolderEntry
	if f.kind != "" {
		ids, sizes := f.l.k.MemIDs(c, f.agent, f.kind)
		es = make([]FolderEntry, 0, len(ids))
		for i, id := range ids {
			es = append(es, FolderEntry{Name: id + ".md", File: f.file(id), Attr: f.memAttr(id, sizes[i]), Sized: true})
		}
	} else {
		for _, id := range f.l.k.MsgIDs(c, f.agent) {
			n := f.file(id)
			// A message's size is its file's: made when asked (an entry
			// of a listing that is stat'ed), not for every name here.
			es = append(es, FolderEntry{Name: id + ".md", File: n})
		}
	}
	f.mu.Lock()
	for name, d := range f.pending {
		if d.Pending() {
			es = append(es, FolderEntry{Name: name, Draft: d})
		} else {
			delete(f.pending, name)
		}
	}
	f.mu.Unlock()
	return es, nil
}

// Create makes a draft named name for c, opened with flags (the handle
// of create(2)). A send the policy refuses fails here, where every
// program reports it (a shell's > does not report a failing close),
// audited as msg.send, EACCES; the draft is checked again at its close.
func (f *DraftFolder) Create(ctx context.Context, c *kernel.Cred, name string, flags int, slot bool) (*Draft, *DraftHandle, error) {
	if !NewName(name) {
		return nil, nil, syscall.EINVAL
	}
	if f.Pending(name) != nil {
		return nil, nil, syscall.EEXIST // being written; the OS opens it instead
	}
	row := NewMemory
	if f.kind == "" {
		row = NewMessage
		if err := f.l.k.MsgMaySend(c, f.agent); err != nil {
			var pe *proto.Error
			if errors.As(err, &pe) && pe.Code == proto.EPERM {
				return nil, nil, syscall.EACCES
			}
			return nil, nil, err
		}
	}
	if id, ok := f.IDName(name); ok && !slot {
		if _, _, err := f.stat(ctx, c, id); err == nil {
			return nil, nil, syscall.EEXIST
		}
	}
	d := f.l.NewDraft(&Node{Kind: row, Agent: f.agent, ID: f.kind}, f.max)
	h, _ := d.Open(c, flags, true)
	f.mu.Lock()
	f.pending[name] = d
	f.mu.Unlock()
	return d, h, nil
}

// Gone is a draft for a name listed as being written that was submitted
// since: it answers no more (ESTALE).
func (f *DraftFolder) Gone() *Draft {
	d := f.l.NewDraft(&Node{Kind: NewMemory, Agent: f.agent, ID: f.kind}, f.max)
	d.End()
	return d
}

// Unlink removes name: a draft is discarded, a memory forgotten
// (mem.forget); a message stays (EPERM).
func (f *DraftFolder) Unlink(ctx context.Context, c *kernel.Cred, name string) error {
	if d := f.Pending(name); d != nil && d.Discard() {
		return nil
	}
	if f.kind == "" {
		return syscall.EPERM // a message stays; ox-msg recv marks it read
	}
	id, ok := f.IDName(name)
	if !ok {
		return syscall.ENOENT
	}
	if _, err := f.l.k.MemStat(c, f.agent, f.kind, id); err != nil {
		return err
	}
	a := proto.MemForgetArgs{Agent: f.agent, IDs: []string{id}}
	_, err := f.l.k.MemForget(ctx, c, a, raw(a))
	return err
}
