package vfs

import (
	"context"
	"errors"
	"path"
	"sort"

	"github.com/oxios/oxios/pkg/kernel"
	"github.com/oxios/oxios/pkg/proto"
)

// A run's work on a host folder (ox-spawn --work), read-only, so that
// less and grep -r work on what a run did before anyone applies it:
//
//	/agent/NAME/runs/RUN/work.diff  the run's patch (work.diff), the
//	                                bytes of ox-work diff RUN
//	/agent/NAME/runs/RUN/work/      the view of its pending work: the
//	                                folder with the run's changes over it
//	                                (work.view), folders and files only
//
// Both are the caller's syscalls, as ox-work diff is: the gate decides
// who may read them, and audits a refusal. While the run works there is
// no patch yet (a read fails with ESRCH, as ox-work diff does); work/
// lists nothing unless the work is pending (not yet, or no more, once it
// was applied or discarded).

// WorkDiff is a run's work.diff.
var WorkDiff = &Kind{
	Name: "work.diff",
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		a := proto.WorkArgs{Run: n.ID}
		rec, err := k.WorkDiff(ctx, c, a, raw(a))
		if err != nil {
			return nil, err
		}
		return []byte(rec.Patch), nil
	},
}

// WorkFile is a file of a run's work/, at n.Path.
var WorkFile = &Kind{
	Name: "a file of work/",
	Mode: 0o444,
	Read: func(ctx context.Context, k Kernel, c *kernel.Cred, n *Node) ([]byte, error) {
		v, err := view(ctx, k, c, n.ID, n.Path)
		if err != nil {
			return nil, err
		}
		if v.Dir {
			return nil, proto.Errorf(proto.EISDIR, "%s of the work of %s is a folder", n.Path, n.ID)
		}
		return v.Data, nil
	},
}

func view(ctx context.Context, k Kernel, c *kernel.Cred, run, p string) (proto.WorkView, error) {
	a := proto.WorkArgs{Run: run, Path: p}
	return k.WorkView(ctx, c, a, raw(a))
}

// workDir is the folder p ("" for the top) of a run's work/.
type workDir struct {
	k     Kernel
	agent string
	run   string
	path  string
}

func (d *workDir) entry(e proto.WorkEntry) Entry {
	p := path.Join(d.path, e.Name)
	if e.Dir {
		return Entry{Name: e.Name, Dir: &workDir{k: d.k, agent: d.agent, run: d.run, path: p}}
	}
	return Entry{Name: e.Name, File: &Node{Kind: WorkFile, Agent: d.agent, ID: d.run, Path: p}}
}

func (d *workDir) Entries(ctx context.Context, c *kernel.Cred) ([]Entry, error) {
	v, err := view(ctx, d.k, c, d.run, d.path)
	if err != nil {
		if d.path == "" && errCode(err) == proto.ESRCH {
			return nil, nil // no view yet, or no more: an empty folder
		}
		return nil, err
	}
	if !v.Dir {
		return nil, proto.Errorf(proto.ENOTDIR, "%s of the work of %s is a file", d.path, d.run)
	}
	es := make([]Entry, 0, len(v.Entries))
	for _, e := range v.Entries {
		es = append(es, d.entry(e))
	}
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	return es, nil
}

func (d *workDir) Lookup(ctx context.Context, c *kernel.Cred, name string) (Entry, error) {
	es, err := d.Entries(ctx, c)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range es {
		if e.Name == name {
			return e, nil
		}
	}
	return Entry{}, proto.Errorf(proto.ENOENT, "no %s in the work of %s", path.Join(d.path, name), d.run)
}

// errCode is err's errno name, "" if it has none.
func errCode(err error) string {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
