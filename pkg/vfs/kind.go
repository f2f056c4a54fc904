package vfs

import (
	"context"
	"sort"
	"time"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// Kind is one kind of file: a row of the table. What it may do follows
// from the functions it has; an operation with none is refused:
//
//   - an open for writing (or O_TRUNC) of a Kind without Write, or whose
//     Mode has no write bit: EROFS (or WriteErr), and Refused (if set)
//     hears of it, to audit it;
//   - an open for reading of a Kind without Read, Follow or Write, or
//     whose Mode has no read bit: EACCES.
//
// Every other change (rename, link, unlink, chmod) is refused by the
// folders, which are fixed.
type Kind struct {
	Name string // the file's name in its folder
	Mode uint32 // permission bits shown

	// Read gives the content as one snapshot, taken at open: each open
	// sees the kernel's answer of that moment. stat shows its size.
	Read func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error)

	// Follow gives content that grows until an end (a run's output):
	// emit gets each piece in order. A read past what has come waits for
	// more, and is end of file once Follow has returned; stat of the open
	// file shows what has come so far, so `tail -f` sees it grow.
	Follow func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, emit func([]byte) error) error

	// Write takes each write(2) as one command, handed to the kernel at
	// once, so that a refusal is the write's errno (a shell reports a
	// failed write; it ignores a failed close). What it returns is added
	// to what reads of the same open file give, as a Plan 9 clone file
	// answers with the id of what it made.
	Write func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) ([]byte, error)

	// Submit takes a Draft's content, whole, at the first close (or
	// fsync) after something was written: a memory to remember, a
	// message to send. Its answer is close(2)'s.
	Submit func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node, b []byte) error

	// Refused, if set, is told of a write refused by the table.
	Refused func(k Kernel, c *kernel.Cred, n *Node)
	// WriteErr is the code of a refused write: EROFS if empty (a fixed
	// file), EPERM for one whose content may not change (a memory).
	WriteErr string

	// Stable: the content never changes (the file goes instead), so the
	// OS may keep its pages across opens and its attributes.
	Stable bool
	// Stat, if set, gives size and mtime without reading the content,
	// and an error when the thing is gone.
	Stat func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) (int64, time.Time, error)
}

// Node is a file of the tree: a Kind, and what it is about.
type Node struct {
	Kind  *Kind
	Agent string
	ID    string // what it is about within the agent: a run's id, a message's
	Path  string // where within that (a file of a run's work/)
}

// Dir is a folder of the tree: its entries as the caller sees them.
type Dir interface {
	// Entries lists the folder for c, sorted by name.
	Entries(ctx context.Context, c *kernel.Cred) ([]Entry, error)
	// Lookup finds one name; ENOENT when it is not there for c.
	Lookup(ctx context.Context, c *kernel.Cred, name string) (Entry, error)
}

// Entry is a name in a folder: a folder or a file.
type Entry struct {
	Name string
	Dir  Dir
	File *Node
}

// table is a folder of fixed files, one per row, about one thing, and
// of fixed folders beside them.
type table struct {
	rows  []*Kind
	dirs  map[string]Dir
	agent string
	run   string
}

func (t *table) Entries(ctx context.Context, c *kernel.Cred) ([]Entry, error) {
	es := make([]Entry, 0, len(t.rows)+len(t.dirs))
	for _, k := range t.rows {
		es = append(es, Entry{Name: k.Name, File: &Node{Kind: k, Agent: t.agent, ID: t.run}})
	}
	for name, d := range t.dirs {
		es = append(es, Entry{Name: name, Dir: d})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es, nil
}

func (t *table) Lookup(ctx context.Context, c *kernel.Cred, name string) (Entry, error) {
	for _, k := range t.rows {
		if k.Name == name {
			return Entry{Name: name, File: &Node{Kind: k, Agent: t.agent, ID: t.run}}, nil
		}
	}
	if d, ok := t.dirs[name]; ok {
		return Entry{Name: name, Dir: d}, nil
	}
	return Entry{}, proto.Errorf(proto.ENOENT, "no %s here", name)
}
