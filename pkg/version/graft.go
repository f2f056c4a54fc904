package version

import (
	"fmt"
	"strings"
)

// Graft sets the folder dst to the folder src holds in the commit rev
// names, whole: the new commit's tree points at the same tree object, so
// no file is read or copied and the commit costs the folders on dst's
// path, whatever src holds. This is how an agent is forked. Files the
// transaction puts or deletes below dst afterwards change the folder set
// (the fork's own changes, in the same commit); dst may not hold files
// it changed before. A folder it replaces is replaced whole.
func (tx *Tx) Graft(dst, rev, src string) error {
	if tx.done {
		return ErrTxDone
	}
	if err := CheckPath(dst); err != nil {
		return err
	}
	if err := CheckPath(src); err != nil {
		return err
	}
	id, err := tx.r.resolve(rev)
	if err != nil {
		return err
	}
	c, err := tx.r.readCommit(id)
	if err != nil {
		return err
	}
	e, err := tx.r.entryAt(c.tree, src)
	if err != nil {
		return err
	}
	if !e.isDir() {
		return fmt.Errorf("%w: %s is not a folder in %s", ErrUnknownRevision, src, rev)
	}
	return tx.setTree(dst, treeEntry{mode: modeDir, id: e.id})
}

// DeleteTree removes the folder path and everything in it, at the cost of
// the folders on its path. Removing a folder that does not exist is not a
// change.
func (tx *Tx) DeleteTree(path string) error {
	if tx.done {
		return ErrTxDone
	}
	if err := CheckPath(path); err != nil {
		return err
	}
	return tx.setTree(path, treeEntry{})
}

func (tx *Tx) setTree(path string, e treeEntry) error {
	for p := range tx.pending {
		if strings.HasPrefix(p, path+"/") || p == path {
			return fmt.Errorf("%w: %s is set whole, but this transaction also changes %s", ErrBadName, path, p)
		}
	}
	for g := range tx.grafts {
		if g != path && (strings.HasPrefix(g, path+"/") || strings.HasPrefix(path, g+"/")) {
			return fmt.Errorf("%w: %s and %s are both set whole", ErrBadName, path, g)
		}
	}
	if tx.grafts == nil {
		tx.grafts = map[string]treeEntry{}
	}
	tx.grafts[path] = e
	return nil
}

// graftAbove returns the folder set whole that holds path, if any.
func (tx *Tx) graftAbove(path string) string {
	for g := range tx.grafts {
		if strings.HasPrefix(path, g+"/") || path == g {
			return g
		}
	}
	return ""
}

// graftChanges describes each graft that changes something as one
// PathChange of the folder (From and To its tree hashes), so a commit
// record of a fork costs one line, not one per file of the agent.
func (tx *Tx) graftChanges() ([]PathChange, error) {
	var cs []PathChange
	for path, e := range tx.grafts {
		cur, err := tx.r.folderAt(path)
		if err != nil {
			return nil, err
		}
		if cur == e.id {
			continue
		}
		c := PathChange{Path: path, From: cur.str(), To: e.id.str(), Action: Modified}
		switch {
		case cur == zeroID:
			c.Action = Added
		case e.mode == 0:
			c.Action = Deleted
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// folderAt returns the tree id of the folder at path in the parent commit
// (zero: none).
func (r *Repo) folderAt(path string) (oid, error) {
	n, err := r.rootNode()
	if err != nil {
		return zeroID, err
	}
	for {
		name, rest, more := strings.Cut(path, "/")
		i, ok := findEntry(n.entries, name)
		if !ok || !n.entries[i].isDir() {
			return zeroID, nil
		}
		e := &n.entries[i]
		if !more {
			return e.id, nil
		}
		if n, err = r.subdir(e); err != nil {
			return zeroID, err
		}
		path = rest
	}
}

// DiffFolders returns the file changes from folder a in revision revA to
// folder b in revision revB, with paths relative to the folders: between
// two agents, or an agent and its fork point. Subtrees the two share
// (everything a fork has not changed) are skipped without being read.
// A folder that does not exist compares as empty.
func (r *Repo) DiffFolders(revA, a, revB, b string) ([]PathChange, error) {
	ea, err := r.folderEntry(revA, a)
	if err != nil {
		return nil, err
	}
	eb, err := r.folderEntry(revB, b)
	if err != nil {
		return nil, err
	}
	return r.diffTrees(ea, eb, "")
}

func (r *Repo) folderEntry(rev, path string) (treeEntry, error) {
	path = strings.Trim(path, "/")
	if path != "" {
		if err := CheckPath(path); err != nil {
			return treeEntry{}, err
		}
	}
	id, err := r.resolve(rev)
	if err != nil {
		return treeEntry{}, err
	}
	c, err := r.readCommit(id)
	if err != nil {
		return treeEntry{}, err
	}
	e, err := r.entryAt(c.tree, path)
	if err != nil || e.isDir() {
		return e, err
	}
	return treeEntry{}, nil
}

// Folder returns the tree hash of the folder at path in the commit rev
// names, "" if there is no folder there.
func (r *Repo) Folder(rev, path string) (string, error) {
	e, err := r.folderEntry(rev, path)
	if err != nil || e.mode == 0 {
		return "", err
	}
	return e.id.String(), nil
}
