package version

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Resolve returns the full hash of the commit rev names. rev is a full
// hash, an abbreviated one (at least 4 hex digits, naming one commit), a
// tag, a branch, a full ref name ("refs/tags/v1") or HEAD, followed by any
// number of "~N" (N-th first-parent ancestor; "~" is "~1") and "^N" (N-th
// parent; "^" is "^1", "^0" the commit itself). As in git, a tag or branch
// wins over an abbreviated hash that reads the same, and a tag over a
// branch. Errors wrap ErrUnknownRevision or ErrAmbiguous and name rev.
func (r *Repo) Resolve(rev string) (string, error) {
	id, err := r.resolve(rev)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

func (r *Repo) resolve(rev string) (oid, error) {
	if err := r.checkOpen(); err != nil {
		return zeroID, err
	}
	base, suffix := rev, ""
	if i := strings.IndexAny(rev, "~^"); i >= 0 {
		base, suffix = rev[:i], rev[i:]
	}
	id, err := r.resolveBase(rev, base)
	if err != nil {
		return zeroID, err
	}
	for suffix != "" {
		op := suffix[0]
		if op != '~' && op != '^' {
			return zeroID, fmt.Errorf("%w %q: cannot parse %q", ErrUnknownRevision, rev, suffix)
		}
		j := 1
		for j < len(suffix) && suffix[j] >= '0' && suffix[j] <= '9' {
			j++
		}
		n := 1
		if j > 1 {
			if n, err = strconv.Atoi(suffix[1:j]); err != nil {
				return zeroID, fmt.Errorf("%w %q: bad number %q", ErrUnknownRevision, rev, suffix[1:j])
			}
		}
		suffix = suffix[j:]
		steps, parent := n, 1
		if op == '^' {
			steps, parent = 1, n
			if n == 0 {
				continue
			}
		}
		for range steps {
			c, err := r.readCommit(id)
			if err != nil {
				return zeroID, err
			}
			if len(c.parents) < parent {
				return zeroID, fmt.Errorf("%w %q: commit %s has %d parent(s)", ErrUnknownRevision, rev, id, len(c.parents))
			}
			id = c.parents[parent-1]
		}
	}
	return id, nil
}

// resolveBase resolves the part of rev before any ~ or ^ to a commit.
func (r *Repo) resolveBase(rev, base string) (oid, error) {
	if base == "" {
		return zeroID, fmt.Errorf("%w %q: no commit before %q", ErrUnknownRevision, rev, strings.TrimPrefix(rev, base))
	}
	if base == "HEAD" || base == "@" {
		id, ok, err := r.readRef(r.branch)
		if err != nil {
			return zeroID, err
		}
		if !ok {
			return zeroID, fmt.Errorf("%w %q: %s has no commit yet", ErrUnknownRevision, rev, strings.TrimPrefix(r.branch, "refs/heads/"))
		}
		return id, nil
	}
	if id, ok := parseID(base); ok {
		return r.peel(rev, id)
	}
	var refs []string
	if strings.HasPrefix(base, "refs/") {
		refs = append(refs, base)
	}
	refs = append(refs, "refs/tags/"+base, "refs/heads/"+base)
	for _, ref := range refs {
		if plumbing.ReferenceName(ref).Validate() != nil {
			continue // not a ref name, so not a ref file to read
		}
		id, ok, err := r.readRef(ref)
		if err != nil {
			return zeroID, err
		}
		if ok {
			return r.peel(rev, id)
		}
	}
	if len(base) < 4 || len(base) > 40 || strings.Trim(strings.ToLower(base), "0123456789abcdef") != "" {
		return zeroID, fmt.Errorf("%w %q", ErrUnknownRevision, rev)
	}
	ids, err := r.db.withPrefix(strings.ToLower(base))
	if err != nil {
		return zeroID, err
	}
	// Only commits (and tags of commits) count, as for git's
	// "committish" abbreviations.
	var commits []oid
	var others []string
	for _, id := range ids {
		c, err := r.peel(rev, id)
		if err != nil {
			t, _, rerr := r.db.read(id)
			if rerr == nil {
				others = append(others, id.String()[:12]+" "+t.String())
			}
			continue
		}
		if !slices.Contains(commits, c) {
			commits = append(commits, c)
		}
	}
	switch len(commits) {
	case 1:
		return commits[0], nil
	case 0:
		if len(others) > 0 {
			return zeroID, fmt.Errorf("%w %q: it names no commit, only %s", ErrUnknownRevision, rev, strings.Join(others, ", "))
		}
		return zeroID, fmt.Errorf("%w %q", ErrUnknownRevision, rev)
	}
	names := make([]string, len(commits))
	for i, c := range commits {
		names[i] = c.String()
	}
	return zeroID, fmt.Errorf("%w %q: %d commits match: %s", ErrAmbiguous, rev, len(commits), strings.Join(names, ", "))
}

// peel follows annotated tags to the commit id names.
func (r *Repo) peel(rev string, id oid) (oid, error) {
	for range maxSymrefDepth {
		t, data, err := r.db.read(id)
		if errors.Is(err, errNotFound) {
			return zeroID, fmt.Errorf("%w %q: no object %s", ErrUnknownRevision, rev, id)
		}
		if err != nil {
			return zeroID, err
		}
		switch t {
		case objCommit:
			return id, nil
		case objTag:
			target, ok := bytes.CutPrefix(data, []byte("object "))
			if !ok || len(target) < 40 {
				return zeroID, fmt.Errorf("tag object %s: %w", id, errCorrupt)
			}
			if id, ok = parseID(string(target[:40])); !ok {
				return zeroID, fmt.Errorf("tag object %s: %w", id, errCorrupt)
			}
		default:
			return zeroID, fmt.Errorf("%w %q: %s is a %s, not a commit", ErrUnknownRevision, rev, id, t)
		}
	}
	return zeroID, fmt.Errorf("%w %q: tags nested too deep", ErrUnknownRevision, rev)
}

// Show returns the commit rev names, with the files it changed against its
// first parent.
func (r *Repo) Show(rev string) (Commit, error) {
	id, err := r.resolve(rev)
	if err != nil {
		return Commit{}, err
	}
	c, err := r.readCommit(id)
	if err != nil {
		return Commit{}, err
	}
	var parentTree oid
	if len(c.parents) > 0 {
		pc, err := r.readCommit(c.parents[0])
		if err != nil {
			return Commit{}, err
		}
		parentTree = pc.tree
	}
	changed, err := r.diffTrees(treeEntry{mode: modeDir, id: parentTree}, treeEntry{mode: modeDir, id: c.tree}, "")
	if err != nil {
		return Commit{}, err
	}
	return describe(id, c, changed), nil
}

// Log calls fn for the commits of the first-parent history of rev, newest
// first, that changed something at or under prefix (a folder or a file;
// "" for every commit), at most n of them (0: all). Each Commit's Changed
// lists the changes under prefix. A commit is selected by comparing the
// hash of prefix's subtree with its parent's, so unchanged subtrees are
// never walked. If fn returns an error, Log stops and returns it.
func (r *Repo) Log(rev, prefix string, n int, fn func(Commit) error) error {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := CheckPath(prefix); err != nil {
			return err
		}
	}
	id, err := r.resolve(rev)
	if err != nil {
		return err
	}
	c, err := r.readCommit(id)
	if err != nil {
		return err
	}
	for count := 0; n <= 0 || count < n; {
		var parent commitData
		var parentTree oid
		if len(c.parents) > 0 {
			if parent, err = r.readCommit(c.parents[0]); err != nil {
				return err
			}
			parentTree = parent.tree
		}
		cur, err := r.entryAt(c.tree, prefix)
		if err != nil {
			return err
		}
		prev, err := r.entryAt(parentTree, prefix)
		if err != nil {
			return err
		}
		if prefix == "" || cur.id != prev.id || cur.mode != prev.mode {
			changed, err := r.diffTrees(prev, cur, prefix)
			if err != nil {
				return err
			}
			if err := fn(describe(id, c, changed)); err != nil {
				return err
			}
			count++
		}
		if len(c.parents) == 0 {
			return nil
		}
		id, c = c.parents[0], parent
	}
	return nil
}

// Files returns the path and blob hash of every file at or under prefix
// (a folder or a file; "" for all) in the commit rev names. A prefix that
// does not exist there gives an empty map.
func (r *Repo) Files(rev, prefix string) (map[string]string, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := CheckPath(prefix); err != nil {
			return nil, err
		}
	}
	id, err := r.resolve(rev)
	if err != nil {
		return nil, err
	}
	c, err := r.readCommit(id)
	if err != nil {
		return nil, err
	}
	e, err := r.entryAt(c.tree, prefix)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	err = r.walk(e, prefix, func(path string, id oid) { files[path] = id.String() })
	return files, err
}

// ReadBlob returns the content of the blob with the given full hash.
func (r *Repo) ReadBlob(hash string) ([]byte, error) {
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	id, ok := parseID(strings.ToLower(hash))
	if !ok {
		return nil, fmt.Errorf("%w: %q is not a full blob hash", ErrBadName, hash)
	}
	return r.db.readType(id, objBlob)
}

// DiffFiles compares two listings (path -> blob hash, as Files returns)
// and returns the changes from from to to, sorted by path.
func DiffFiles(from, to map[string]string) []PathChange {
	var cs []PathChange
	for path, a := range from {
		b, ok := to[path]
		switch {
		case !ok:
			cs = append(cs, PathChange{Path: path, Action: Deleted, From: a})
		case a != b:
			cs = append(cs, PathChange{Path: path, Action: Modified, From: a, To: b})
		}
	}
	for path, b := range to {
		if _, ok := from[path]; !ok {
			cs = append(cs, PathChange{Path: path, Action: Added, To: b})
		}
	}
	slices.SortFunc(cs, func(a, b PathChange) int { return strings.Compare(a.Path, b.Path) })
	return cs
}

// Tag creates the lightweight tag name pointing at the commit rev names
// and returns the commit's hash. It refuses a name git would refuse
// (ErrBadName) and one that exists (ErrExists).
//
// Tags are lightweight (a ref, no tag object): the commit already carries
// the message, the author and the audit trailers, and a tag here only
// names a version, so an annotated tag would add an object and say
// nothing more.
func (r *Repo) Tag(name, rev string) (string, error) {
	if err := CheckTagName(name); err != nil {
		return "", err
	}
	id, err := r.resolve(rev)
	if err != nil {
		return "", err
	}
	// A tag names only written commits.
	if err := r.Flush(); err != nil {
		return "", err
	}
	r.refMu.Lock()
	defer r.refMu.Unlock()
	ref := "refs/tags/" + name
	if taken, err := r.refExists(ref); err != nil || taken {
		if err == nil {
			err = fmt.Errorf("tag %s: %w", name, ErrExists)
		}
		return "", err
	}
	err = r.writeRef(ref, id)
	r.forgetTags()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// Tags returns the tags of the repository by the commit they name (hash
// -> sorted tag names), annotated tags peeled; tags of other objects are
// left out. The listing is read once and kept until this Repo writes a
// tag: tags that git creates meanwhile show after a restart.
func (r *Repo) Tags() (map[string][]string, error) {
	if err := r.checkOpen(); err != nil {
		return nil, err
	}
	r.tagMu.Lock()
	defer r.tagMu.Unlock()
	if r.tagCache == nil {
		tags, err := r.listTags()
		if err != nil {
			return nil, err
		}
		m := map[string][]string{}
		for name, id := range tags {
			c, err := r.peel(name, id)
			if err != nil {
				continue
			}
			m[c.String()] = append(m[c.String()], name)
		}
		for _, names := range m {
			slices.Sort(names)
		}
		r.tagCache = m
	}
	out := make(map[string][]string, len(r.tagCache))
	for h, names := range r.tagCache {
		out[h] = slices.Clone(names)
	}
	return out, nil
}

// TagsAt returns the sorted names of the tags of the commit hash (full),
// nil if none or if the tags cannot be read: a helper for listings.
func (r *Repo) TagsAt(hash string) []string {
	if err := r.checkOpen(); err != nil {
		return nil
	}
	r.tagMu.Lock()
	cached := r.tagCache != nil
	var names []string
	if cached {
		names = slices.Clone(r.tagCache[hash])
	}
	r.tagMu.Unlock()
	if cached {
		return names
	}
	tags, err := r.Tags()
	if err != nil {
		return nil
	}
	return tags[hash]
}

// forgetTags drops the cached tag listing after a tag was written.
func (r *Repo) forgetTags() {
	r.tagMu.Lock()
	r.tagCache = nil
	r.tagMu.Unlock()
}

// readTree returns the entries of a tree, through the readers' cache.
func (r *Repo) readTree(id oid) ([]treeEntry, error) {
	if es, ok := r.trees.get(id); ok {
		return es, nil
	}
	data, err := r.db.readType(id, objTree)
	if err != nil {
		return nil, err
	}
	es, err := parseTree(data)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", id, err)
	}
	r.trees.put(id, es)
	return es, nil
}

// entryAt returns the entry at path in the tree root ("" is the root
// itself); mode 0 when nothing is there.
func (r *Repo) entryAt(root oid, path string) (treeEntry, error) {
	e := treeEntry{mode: modeDir, id: root}
	if root == zeroID {
		return treeEntry{}, nil
	}
	for path != "" {
		if !e.isDir() {
			return treeEntry{}, nil
		}
		es, err := r.readTree(e.id)
		if err != nil {
			return treeEntry{}, err
		}
		name, rest, _ := strings.Cut(path, "/")
		i, ok := findEntry(es, name)
		if !ok {
			return treeEntry{}, nil
		}
		e, path = es[i], rest
	}
	return e, nil
}

// walk calls fn for every file at or under e, whose path is path.
func (r *Repo) walk(e treeEntry, path string, fn func(string, oid)) error {
	switch {
	case e.mode == 0:
		return nil
	case !e.isDir():
		fn(path, e.id)
		return nil
	}
	es, err := r.readTree(e.id)
	if err != nil {
		return err
	}
	for _, c := range es {
		if err := r.walk(c, join(path, c.name), fn); err != nil {
			return err
		}
	}
	return nil
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// diffTrees returns the file changes from a to b (entries at path; mode 0:
// absent), sorted by path. Equal subtrees are skipped without reading
// them.
func (r *Repo) diffTrees(a, b treeEntry, path string) ([]PathChange, error) {
	var cs []PathChange
	if err := r.diffInto(a, b, path, &cs); err != nil {
		return nil, err
	}
	slices.SortFunc(cs, func(x, y PathChange) int { return strings.Compare(x.Path, y.Path) })
	return cs, nil
}

func (r *Repo) diffInto(a, b treeEntry, path string, cs *[]PathChange) error {
	if a.mode == b.mode && a.id == b.id {
		return nil
	}
	aFile, bFile := a.mode != 0 && !a.isDir(), b.mode != 0 && !b.isDir()
	switch {
	case aFile && bFile:
		*cs = append(*cs, PathChange{Path: path, Action: Modified, From: a.id.String(), To: b.id.String()})
		return nil
	case aFile:
		*cs = append(*cs, PathChange{Path: path, Action: Deleted, From: a.id.String()})
	case bFile:
		*cs = append(*cs, PathChange{Path: path, Action: Added, To: b.id.String()})
	}
	var ae, be []treeEntry
	var err error
	if a.isDir() && a.id != zeroID {
		if ae, err = r.readTree(a.id); err != nil {
			return err
		}
	}
	if b.isDir() && b.id != zeroID {
		if be, err = r.readTree(b.id); err != nil {
			return err
		}
	}
	// Pair the entries of both sides by name.
	byName := make(map[string][2]treeEntry, len(ae)+len(be))
	for _, e := range ae {
		v := byName[e.name]
		v[0] = e
		byName[e.name] = v
	}
	for _, e := range be {
		v := byName[e.name]
		v[1] = e
		byName[e.name] = v
	}
	for name, v := range byName {
		if err := r.diffInto(v[0], v[1], join(path, name), cs); err != nil {
			return err
		}
	}
	return nil
}
