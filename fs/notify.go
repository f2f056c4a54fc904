package fs

import (
	"context"
	"strings"

	fusefs "github.com/hanwen/go-fuse/v2/fs"

	"github.com/oxios/oxios/pkg/bus"
	"github.com/oxios/oxios/pkg/memory"
	"github.com/oxios/oxios/pkg/proto"
	"github.com/oxios/oxios/pkg/vfs"
)

// Coherence. The kernel's caches (entries, attributes, pages) are kept for
// long (see the timeouts in fs.go) and invalidated here, from the kernel's
// bus: each durable state change made other than through the mount (over
// the socket, a restore...) drops exactly what it touched. This runs in
// its own goroutine and holds none of the mount's locks while it talks to
// the kernel, which may wait for requests in flight in the same folder.
// Changes made through the mount carry the mount's tag and are skipped:
// the kernel already saw them happen.

// eventQueue is how many events may wait for the invalidator; past it the
// bus counts them as lost and the invalidator sweeps everything instead.
const eventQueue = 4096

func (f *FS) subscribe() {
	f.sub = f.k.Subscribe(eventQueue, func(ev *bus.Event) bool {
		switch ev.Name {
		case proto.EventStateChanged:
			return ev.Data != any(f.own)
		case proto.EventMemoryAdded, proto.EventMemoryForgotten:
			// Memories made or forgotten through the mount come here
			// too: invalidating them again is harmless.
			return true
		}
		return false
	})
}

func (f *FS) watch() {
	defer f.wg.Done()
	var evs []bus.Event
	for {
		select {
		case <-f.stop:
			return
		case <-f.sub.Ready():
		}
		var lost uint64
		evs, lost = f.sub.Take(evs[:0])
		for i := range evs {
			f.changed(&evs[i])
		}
		if lost > 0 {
			f.log.Warn("mount: missed change events; revalidating every cached name", "lost", lost)
			f.sweep()
		}
	}
}

// changed invalidates what one change touched.
func (f *FS) changed(ev *bus.Event) {
	an := f.agents.GetChild(ev.Agent)
	if an == nil {
		// A new agent: a cached "no such agent" must go.
		f.agents.NotifyEntry(ev.Agent)
		return
	}
	if ev.Name != proto.EventStateChanged {
		f.memChanged(an, ev)
		return
	}
	parent := an.GetChild("state")
	if parent == nil {
		return
	}
	names := strings.Split(ev.Key, "/")
	for i, name := range names {
		ch := parent.GetChild(name)
		if ch == nil {
			// Nothing below is cached; a negative entry here may be.
			parent.NotifyEntry(name)
			break
		}
		if i < len(names)-1 {
			if _, ok := ch.Operations().(*dirNode); ok {
				parent = ch
				continue
			}
			// A file where the key has a folder: it is gone.
			parent.NotifyEntry(name)
			parent.RmChild(name)
			break
		}
		switch n := ch.Operations().(type) {
		case *fileNode:
			n.f.Invalidated()
			if ev.Deleted && n.f.Unsaved() {
				// Made through the mount, and no save of it queued:
				// its create found no key, so the deletion is of the
				// key's earlier life, reaching us late. The file and
				// its folders stay; its first save makes the key.
				return
			}
			if ev.Deleted {
				parent.NotifyDelete(name, ch)
				parent.RmChild(name)
			} else {
				ch.NotifyContent(0, 0)
			}
		default:
			// A key where a folder was.
			parent.NotifyEntry(name)
			parent.RmChild(name)
		}
	}
	if ev.Deleted {
		f.pruneFolders(an, ev.Agent, names)
	}
}

// memChanged invalidates the name of a memory remembered or forgotten:
// a cached "no such file" of a new one, the entry of a forgotten one.
func (f *FS) memChanged(an *fusefs.Inode, ev *bus.Event) {
	kind, id, ok := memory.SplitKey(ev.Key)
	if !ok {
		return
	}
	mem := an.GetChild("mem")
	if mem == nil {
		return
	}
	dir := mem.GetChild(kind)
	if dir == nil {
		return
	}
	name := id + ".md"
	ch := dir.GetChild(name)
	if ch == nil {
		dir.NotifyEntry(name)
		return
	}
	if n, ok := ch.Operations().(*vfile); !ok || n.n.Kind != vfs.Memory {
		return // a file being written that happens to have the name
	}
	if ev.Deleted {
		dir.NotifyDelete(name, ch)
		dir.RmChild(name)
	}
}

// pruneFolders drops the cached folders of key that its deletion emptied,
// deepest first.
func (f *FS) pruneFolders(an *fusefs.Inode, agent string, names []string) {
	nodes := []*fusefs.Inode{an.GetChild("state")}
	for _, name := range names[:len(names)-1] {
		ch := nodes[len(nodes)-1].GetChild(name)
		if ch == nil {
			break
		}
		nodes = append(nodes, ch)
	}
	for i := len(nodes) - 1; i >= 1; i-- {
		prefix := strings.Join(names[:i], "/")
		if f.states.Folder(f.self, agent, prefix) {
			break
		}
		nodes[i-1].NotifyEntry(names[i-1])
		nodes[i-1].RmChild(names[i-1])
	}
}

// sweep revalidates every cached name after events were lost: what still
// exists has its attributes and pages dropped, what does not is removed.
func (f *FS) sweep() {
	for name, an := range f.agents.Children() {
		f.sweepMem(name, an)
		st := an.GetChild("state")
		if st == nil {
			continue
		}
		f.sweepDir(name, st, "")
	}
}

// sweepMem drops the cached memories that are no more.
func (f *FS) sweepMem(agent string, an *fusefs.Inode) {
	mem := an.GetChild("mem")
	if mem == nil {
		return
	}
	for _, dir := range mem.Children() {
		for name, ch := range dir.Children() {
			n, ok := ch.Operations().(*vfile)
			if !ok || n.n.Kind != vfs.Memory {
				continue
			}
			kind, id, _ := memory.SplitKey(n.n.ID)
			if _, err := f.k.MemStat(f.self, agent, kind, id); err != nil {
				dir.NotifyEntry(name)
				dir.RmChild(name)
			}
		}
	}
}

func (f *FS) sweepDir(agent string, dir *fusefs.Inode, prefix string) {
	ctx := context.Background()
	for name, ch := range dir.Children() {
		key := join(prefix, name)
		switch n := ch.Operations().(type) {
		case *fileNode:
			if _, err := f.k.StateStat(ctx, f.self, agent, key); err == nil {
				n.f.Invalidated()
				ch.NotifyContent(0, 0)
			} else if !n.f.Present() {
				dir.NotifyEntry(name)
				dir.RmChild(name)
			}
		case *dirNode:
			if f.states.Folder(f.self, agent, key) {
				f.sweepDir(agent, ch, key)
			} else {
				dir.NotifyEntry(name)
				dir.RmChild(name)
			}
		}
	}
}
