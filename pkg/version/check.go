package version

import (
	"fmt"
	"path"
)

// Damage is what Check found missing or unreadable in a repository.
type Damage struct {
	// Problems name each object missing or unreadable, with its path
	// under HEAD's tree, at most the first 20.
	Problems []string
	// More counts the problems past those.
	More int
	// Objects is how many objects the check looked at.
	Objects int
}

// OK reports whether the check found nothing wrong.
func (d Damage) OK() bool { return len(d.Problems) == 0 }

func (d Damage) String() string {
	if d.OK() {
		return fmt.Sprintf("%d objects reachable from HEAD's tree, all present", d.Objects)
	}
	s := fmt.Sprintf("%d objects reachable from HEAD are missing or unreadable: ", len(d.Problems)+d.More)
	for i, p := range d.Problems {
		if i > 0 {
			s += "; "
		}
		s += p
	}
	if d.More > 0 {
		s += fmt.Sprintf("; and %d more", d.More)
	}
	return s
}

// Check reads HEAD's commit, its parent's, and every tree of HEAD's
// tree, and looks up every blob those trees name (an index lookup, not a
// read): what `git fsck --connectivity-only` checks of HEAD's tree, at
// the cost of its trees. A commit that builds on a tree whose objects are
// gone makes history that cannot be checked out; Check finds it first
// (issue 45: a deleted object went unnoticed, and commits built on it).
func (r *Repo) Check() (Damage, error) {
	var d Damage
	if err := r.checkOpen(); err != nil {
		return d, err
	}
	note := func(format string, a ...any) {
		if len(d.Problems) < 20 {
			d.Problems = append(d.Problems, fmt.Sprintf(format, a...))
		} else {
			d.More++
		}
	}
	head, ok, err := r.readRef(r.branch)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, nil // no commit yet
	}
	d.Objects++
	c, err := r.readCommit(head)
	if err != nil {
		note("HEAD's commit %s: %v", head, err)
		return d, nil
	}
	for _, p := range c.parents {
		d.Objects++
		if !r.db.has(p) {
			note("HEAD's parent commit %s", p)
		}
	}
	var walk func(dir string, id oid)
	walk = func(dir string, id oid) {
		d.Objects++
		data, err := r.db.readType(id, objTree)
		if err != nil {
			note("tree %s of %s/: %v", id, dir, err)
			return
		}
		es, err := parseTree(data)
		if err != nil {
			note("tree %s of %s/: %v", id, dir, err)
			return
		}
		for i := range es {
			e := &es[i]
			switch {
			case e.isDir():
				walk(path.Join(dir, e.name), e.id)
			case e.mode == modeGitlink:
			default:
				d.Objects++
				if !r.db.has(e.id) {
					note("blob %s of %s", e.id, path.Join(dir, e.name))
				}
			}
		}
	}
	walk("", c.tree)
	return d, nil
}
